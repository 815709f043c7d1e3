"""Summarise an `strace -tt -k` log of one I/O thread by the steps of fs-inventory-client.py.

  python fs-inventory-summary.py STRACE_LOG STEPS_JSONL [FUSE_LOG IO_TID]
  python fs-inventory-summary.py --trim STRACE_LOG STEPS_JSONL > KEPT   (the log's calls within
      the steps' marks only, each headed by its step, with ringshare's own frames (libc, rustix
      and the standard library left out) down to the first of the core, state, files or driver
      below the backend's (at most 6), each frame as its function's name alone, long calls cut:
      what is kept under docs/benchmarks; the summary of KEPT is the summary of the log)

For each step: every system call the thread made between the step's marks, counted per
request, with the first function of ringshare's own code on the call's stack (the backend's,
ringshare_vfs, for file system calls) and, where the stack was unwound that far, the core's
function below it. Calls made in the steps' gaps (a client's preparation) are left out.
"""

import collections
import datetime
import json
import re
import sys

FRAME = re.compile(r"^ > (\S+?)\((.*?)\+0x[0-9a-f]+\)( \[0x[0-9a-f]+\])?$")
# A frame as --trim keeps it: the function alone.
FRAME_KEPT = re.compile(r"^ > ()([^(\[]+|<.+)$")
# System calls newer than the strace that wrote the log (strace 6.1 names them by number).
NEWER = {"syscall_0x1d0": "getxattrat", "syscall_0x1d1": "setxattrat", "syscall_0x1d2": "listxattrat",
         "syscall_0x1d3": "removexattrat", "syscall_0x1c4": "file_getattr", "syscall_0x1c5": "file_setattr"}
CALL = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d+) (\w+)\((.*)$")


def demangle(sym):
    """Rust legacy mangling (_ZN...17h<hash>E) to a path without the hash."""
    if not sym.startswith("_ZN"):
        return sym
    s, i, parts = sym[3:], 0, []
    while i < len(s) and s[i].isdigit():
        j = i
        while s[j].isdigit():
            j += 1
        n = int(s[i:j])
        parts.append(s[j : j + n])
        i = j + n
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    out = "::".join(parts)
    for a, b in [("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$RF$", "&"), ("$C$", ","), ("$u7b$", "{"),
                 ("$u7d$", "}"), ("$BP$", "*"), ("$u27$", "'"), ("$u5b$", "["), ("$u5d$", "]"), ("..", "::")]:
        out = out.replace(a, b)
    return out.lstrip("_")


def short(fn):
    """Drop generic noise: `<ringshare_vfs::posix::PosixShare as ringshare_vfs::Share>::open` -> PosixShare::open."""
    m = re.match(r"^<(.+?) as (.+?)>::(.+)$", fn)
    if m:
        fn = f"{m.group(1)}::{m.group(3)}"
    for p in ("ringshare_vfs::", "ringshare_core::", "ringshare_state::", "ringshare_files::",
              "ringshare_engine::", "ringshare::"):
        if fn.startswith(p):
            return p.rstrip(":") .replace("ringshare_", "") + ":" + fn[len(p):]
    return fn


def parse(path):
    calls = []
    cur = None
    for line in open(path, errors="replace"):
        m = CALL.match(line)
        if m:
            h, mi, s, frac, name, rest = m.groups()
            t = int(h) * 3600 + int(mi) * 60 + int(s) + int(frac) / 10 ** len(frac)
            name = NEWER.get(name, name)
            cur = {"t": t, "name": name, "args": rest[:120], "frames": []}
            calls.append(cur)
            continue
        f = FRAME.match(line.rstrip("\n")) or FRAME_KEPT.match(line.rstrip("\n"))
        if f and cur is not None:
            cur["frames"].append(demangle(f.group(2)))
    return calls


SKIP = ("libc.so", "rustix::", "alloc::", "core::", "std::", "unexpected_backtracing_error", "__")


def classify(frames):
    """The first frame of ringshare's own code (libc, rustix and the standard library skipped);
    strace unwinds release builds only a frame or two, so where only a rustix or libc frame is
    known, that one, marked `(caller not unwound)`."""
    own = [f for f in frames if f and not f.startswith(SKIP) and "ringshare" in f]
    if own:
        return short(own[0])
    if frames:
        return short(frames[0]) + " (caller not unwound)"
    return "?"


ASKERS = ("ringshare_core::", "ringshare_state::", "ringshare_files::", "ringshare_cluster_home::",
          "ringshare::driver")


def asker(frames):
    """The first frame of the core (or state, files, the driver) below the backend's on the
    stack: who asked. Empty when the stack was not unwound that far (a release build without
    frame pointers: strace gets a frame or two)."""
    own = [i for i, f in enumerate(frames) if f and not f.startswith(SKIP) and "ringshare" in f]
    for f in frames[own[0] + 1:] if own else []:
        if f.startswith(ASKERS) or any(f.startswith("<" + a) for a in ASKERS):
            return short(f)
    return ""


def shape(name, args):
    """What kind of call, from its arguments: a path call names a path relative to a directory
    descriptor, a descriptor call has AT_EMPTY_PATH."""
    if name == "statx":
        return "statx(fd)" if "AT_EMPTY_PATH" in args else "statx(dir, name)"
    return name


# Frames kept per call by --trim: ringshare's own, the innermost ones (the backend's and the
# command's are within the first few; the rest is the driver's loop).
FRAMES_KEPT = 6
# A call's line is cut after this many characters by --trim (its return value kept).
CALL_CHARS_KEPT = 160


def trim(log, steps_file):
    steps = [json.loads(line) for line in open(steps_file) if line.strip()]
    windows = []
    for st in steps:
        day = datetime.datetime.fromtimestamp(st["t0"]).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        windows.append((st["t0"] - day, st["t1"] - day, st["step"]))
    at, keep, depth = None, False, 0
    for line in open(log, errors="replace"):
        if line.startswith("### step: "):
            continue
        f = FRAME.match(line)
        if f and not (keep and "ringshare" in f.group(2) and not f.group(2).startswith(SKIP)
                      and depth < FRAMES_KEPT):
            continue
        if f:
            # Down to the first core (or state, files, driver) frame below the backend's: who asked.
            sym = f.group(2)
            asked = depth > 0 and (sym.startswith(ASKERS) or any(sym.startswith("<" + a) for a in ASKERS))
            depth = FRAMES_KEPT if asked else depth + 1
        m = CALL.match(line)
        if m:
            h, mi, s, frac = m.groups()[:4]
            t = int(h) * 3600 + int(mi) * 60 + int(s) + int(frac) / 10 ** len(frac)
            w = next((w for w in windows if w[0] <= t <= w[1]), None)
            keep, depth = w is not None, 0
            if keep and w[2] != at:
                at = w[2]
                print(f"### step: {at}")
        if keep:
            line = line.rstrip("\n")
            if f:
                line = " > " + f.group(2)
            if m and len(line) > CALL_CHARS_KEPT:
                # Long results (statx's structure) cut, the return value kept.
                ret = line[line.rfind(") = "):] if ") = " in line else ""
                line = line[:CALL_CHARS_KEPT] + " ..." + ret
            print(line)


def main():
    if sys.argv[1] == "--trim":
        return trim(sys.argv[2], sys.argv[3])
    calls = parse(sys.argv[1])
    fuse_log, io_tid = [], None
    if len(sys.argv) > 4:
        io_tid = sys.argv[4]
        for line in open(sys.argv[3]):
            t, tid, op, path = (line.rstrip("\n").split(" ", 3) + [""])[:4]
            fuse_log.append((float(t), tid, op))
    steps = [json.loads(line) for line in open(sys.argv[2]) if line.strip()]
    tz = datetime.datetime.now().astimezone().utcoffset().total_seconds()
    print("per step: system calls the I/O thread made between the step's marks, per request;")
    print("  calls/request  syscall  <- the first ringshare function on its stack (strace -k)"
          "  [<- the first core, state, files or driver function below it, when unwound]")
    grand = collections.Counter()
    for st in steps:
        day = datetime.datetime.fromtimestamp(st["t0"]).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        t0, t1 = st["t0"] - day, st["t1"] - day
        inside = [c for c in calls if t0 <= c["t"] <= t1]
        n = st["requests"]
        print(f"\n## {st['step']}  ({n} requests in {st['t1'] - st['t0']:.3f} s, status {st['status']}; "
              f"{len(inside)} calls, {len(inside) / n:.1f} per request)")
        groups = collections.Counter()
        example = {}
        for c in inside:
            b, a = classify(c["frames"]), asker(c["frames"])
            key = (shape(c["name"], c["args"]), b, a)
            groups[key] += 1
            example.setdefault(key, c["name"] + "(" + c["args"])
            grand[(key[0], b)] += 1
        if io_tid:
            reqs = [(tid, op) for (t, tid, op) in fuse_log if st["t0"] <= t <= st["t1"]]
            mine = collections.Counter(op for tid, op in reqs if tid == io_tid)
            other = collections.Counter(op for tid, op in reqs if tid != io_tid)
            fmt = lambda c: ", ".join(f"{op} {k / n:.2f}" for op, k in c.most_common()) or "none"
            print(f"  FUSE requests per request, made by the I/O thread itself: {fmt(mine)}")
            print(f"  FUSE requests per request, made by other threads (io_uring workers): {fmt(other)}")
        for (name, b, a), k in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {k / n:5.2f}  {name:<17} <- {b}" + (f"  <- {a}" if a else ""))
            print(f"         e.g. {example[(name, b, a)]}")
    _ = tz
    print("\n## all steps: calls by syscall and backend function")
    for (name, b), k in sorted(grand.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {k:5d}  {name:<16} <- {b}")


if __name__ == "__main__":
    main()
