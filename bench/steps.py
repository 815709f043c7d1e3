#!/usr/bin/env python3
"""bench/steps.py: inclusive time a request of named steps of the request path, from a
frame-pointer build's profile (bench/profile's SERVER-ROW.folded and SERVER-ROW.budget.json).

Usage: steps.py PREFIX [GROUP=REGEX ...]
PREFIX   bench/profile's output prefix of one server and row (PREFIX.folded, PREFIX.budget.json)
GROUP    a name and a regular expression over frame names: a sample counts for the group when
         any frame of its stack matches (counted once however many match); REGEX!UNLESS leaves
         out the stacks any of whose frames match UNLESS. Without any, the
         groups below: the work an SMB server does per open that a server without share modes,
         leases, durable handles, delete pending, NT ACLs and DOS attributes skips (issue 34;
         bench/semantics shows which peer skips what).
Prints each group's samples and µs a request (the row's measured CPU a request, spread over
the samples), then every group together (a sample counted once).
"""
import json
import re
import sys

SEMANTIC = [
    # Share modes, leases and delete pending on open: the file's entry in the file table.
    ("admission (share modes, leases, the file's entry)", r"cmd::create::admission::"),
    # The open leaving its file's entry: share modes, leases, delete pending, write time; not
    # the close of its descriptor, made from there too, which every server makes.
    ("the close's leaving of the file's entry", r"state::opens::(closing|closed_open)",
     r"__close|sys_close|close_fd|PosixNode as core::ops::drop::Drop"),
    # Access from an NT ACL kept with the file (or its absence, kept by change time).
    ("NT ACL check (rights)", r"cmd::create::rights::"),
    # QUERY_INFO's delete-pending answer comes from the file's entry.
    ("delete pending (QUERY_INFO)", r"cmd::pending::delete_pending"),
    # Durable handles: the open's owner and durable state.
    ("durable handles", r"cmd::create::durable::"),
    # DOS attributes: the per-thread cache by change time, else the xattr.
    ("DOS attributes", r"posix::doscache::|posix::kept_or_read|read_dos|fgetxattr"),
    # Names in another case: a name not there as given is looked for in any case (the
    # directory read, or its names index) before a new file is made under it.
    ("names in another case (a new name looked for)", r"find_name_case_insensitive|posix::names::"),
    # The write time a CLOSE settles ([MS-FSA] 2.1.5.4).
    ("write time", r"core::writetime::"),
]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    prefix = sys.argv[1]
    groups = [tuple([a.split("=", 1)[0]] + a.split("=", 1)[1].split("!", 1))
              for a in sys.argv[2:]] or SEMANTIC
    pats = [(g[0], re.compile(g[1]), re.compile(g[2]) if len(g) > 2 else None) for g in groups]
    budget = json.load(open(prefix + ".budget.json"))
    per_request = budget.get("cost") if budget.get("unit") == "us/request" else None
    total = 0
    counts = {name: 0 for name, _, _ in pats}
    anyone = 0
    for line in open(prefix + ".folded"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        n = int(n)
        total += n
        frames = stack.split(";")
        hit = False
        for name, p, unless in pats:
            if any(p.search(f) for f in frames) and not (
                    unless and any(unless.search(f) for f in frames)):
                counts[name] += n
                hit = True
        anyone += n if hit else 0
    scale = per_request / total if total and per_request else 0
    print("%s: %d samples, %.3f us a request measured" % (prefix, total, per_request or 0))
    for name, _, _ in pats:
        print("  %6d samples  %6.3f us  %5.1f %%  %s" % (counts[name], counts[name] * scale,
                                                       100.0 * counts[name] / max(total, 1), name))
    print("  %6d samples  %6.3f us  %5.1f %%  %s" % (anyone, anyone * scale,
                                                   100.0 * anyone / max(total, 1), "all of these"))


if __name__ == "__main__":
    main()
