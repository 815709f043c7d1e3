#!/usr/bin/env python3
"""Which parts of `ServerState` each function that takes the whole server uses (issue 30:
"ServerState becomes a few owned parts passed to what needs them").

For every function of crates/state, crates/cluster-home and crates/core (test code left out)
that has the whole server in hand -- a parameter whose type names `ServerState`, `self` in an
`impl ... ServerState` block, or `<x>.server` (a connection's `Arc<ServerState>`) -- it lists
the parts it touches: the fields of `ServerState` (config, shares, files, sessions, mail,
notify, log_limit, node, logons, interfaces, next_connection), directly or through a method of
`ServerState` or another such function it hands the server to (followed to a fixed point).
A function handing the server to something this script cannot follow (a trait object, a
closure, a function of another crate) is marked `opaque`.

    scripts/server-parts.py            the table, then a summary
    scripts/server-parts.py --check    exit 1 when a function outside the commands' layer
                                       (crates/core/src/cmd, conn, exchange) takes the whole
                                       server but touches one part only and is not a method of
                                       ServerState itself (it should take that part)

Heuristic: comments and strings are stripped and braces matched; it reads names, not types.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES = ["crates/state/src", "crates/cluster-home/src", "crates/core/src"]
PARTS = {"config", "shares", "files", "interfaces", "sessions", "next_connection", "mail",
         "notify", "log_limit", "node", "logons"}
TOP_LAYER = ("crates/core/src/cmd", "crates/core/src/conn", "crates/core/src/exchange")


def strip(src):
    """Comments and string/char literals blanked (lengths kept, so offsets stay)."""
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            for k in range(i, end):
                if out[k] != "\n":
                    out[k] = " "
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                if out[k] != "\n":
                    out[k] = " "
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^'\\])'", src[i:i + 12])
            if m:
                for k in range(i, i + len(m.group(0))):
                    out[k] = " "
                i += len(m.group(0))
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


def match(text, i, open_c, close_c):
    """Index just past the bracket closing the one at i."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def test_ranges(text, path):
    if path.endswith("tests.rs") or "/tests/" in path:
        return [(0, len(text))]
    ranges = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+\w+\s*\{", text):
        b = text.index("{", m.end() - 1)
        ranges.append((m.start(), match(text, b, "{", "}")))
    return ranges


def functions(path, text):
    tests = test_ranges(text, path)
    impls = []
    for m in re.finditer(r"\bimpl\b[^{;]*?\bServerState\s*\{", text):
        b = m.end() - 1
        impls.append((b, match(text, b, "{", "}")))
    for m in re.finditer(r"\bfn\s+(\w+)\s*(<[^(]*?>)?\s*\(", text):
        start = m.start()
        if any(a <= start < b for a, b in tests):
            continue
        p0 = m.end() - 1
        p1 = match(text, p0, "(", ")")
        params = text[p0 + 1:p1 - 1]
        k = p1
        while k < len(text) and text[k] not in "{;":
            k += 1
        if k >= len(text) or text[k] == ";":
            continue
        body_end = match(text, k, "{", "}")
        body = text[k:body_end]
        vars_ = set()
        for pm in re.finditer(r"(\w+)\s*:\s*([^,]*)", params):
            if "ServerState" in pm.group(2):
                vars_.add(pm.group(1))
        in_impl = any(a < start < b for a, b in impls)
        if in_impl and re.search(r"\bself\b", params):
            vars_.add("self")
        line = text.count("\n", 0, start) + 1
        yield {"name": m.group(1), "path": path, "line": line, "vars": vars_, "body": body,
               "method": in_impl}


def uses(fn):
    """(parts, methods called on the server, functions the server is handed to, conn use)."""
    parts, methods, handed = set(), set(), set()
    body = fn["body"]
    conn = re.search(r"\b\w+(?:\.\w+)*\.server\b(?!\s*:)", body) is not None
    names = set(fn["vars"])
    pats = [re.escape(v) for v in names] + [r"\w+\.server"]
    for pat in pats:
        for m in re.finditer(r"(?<![\w.])(?:&\s*)?(" + pat + r")\b(\s*\.\s*(\w+))?", body):
            if pat == "self" and m.group(1) != "self":
                continue
            field = m.group(3)
            if field and field in PARTS:
                parts.add(field)
            elif field and field in ("clone",):
                handed.add("clone")
            elif field:
                methods.add(field)
            else:
                # handed on: the call whose argument list holds it
                depth, j = 0, m.start() - 1
                while j >= 0:
                    if body[j] == ")":
                        depth += 1
                    elif body[j] == "(":
                        if depth == 0:
                            break
                        depth -= 1
                    elif body[j] in ";{}" and depth == 0:
                        j = -1
                        break
                    j -= 1
                if j >= 0:
                    cm = re.search(r"(\w+)\s*(::<[^>]*>)?\s*$", body[:j])
                    handed.add(cm.group(1) if cm else "?")
                else:
                    handed.add("=")
    return parts, methods, handed, conn


def main():
    check = "--check" in sys.argv
    fns = []
    for crate in CRATES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, crate)):
            for f in sorted(files):
                if not f.endswith(".rs"):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), ROOT)
                text = strip(open(os.path.join(dirpath, f), encoding="utf-8").read())
                for fn in functions(path, text):
                    p, me, h, conn = uses(fn)
                    if not fn["vars"] and not conn:
                        continue
                    fn.update(parts=p, methods=me, handed=h, conn=conn)
                    fns.append(fn)
    by_name = {}
    for fn in fns:
        if fn["vars"]:
            by_name.setdefault(fn["name"], []).append(fn)
    methods = {fn["name"]: fn for fn in fns if fn["method"]}
    for fn in fns:
        fn["all"] = set(fn["parts"])
        fn["opaque"] = set()
    changed = True
    while changed:
        changed = False
        for fn in fns:
            before = (len(fn["all"]), len(fn["opaque"]))
            for me in fn["methods"]:
                if me in methods:
                    fn["all"] |= methods[me]["all"]
                else:
                    fn["opaque"].add("." + me)
            for h in fn["handed"]:
                if h in by_name:
                    for g in by_name[h]:
                        fn["all"] |= g["all"]
                        fn["opaque"] |= g["opaque"]
                elif h not in ("clone",):
                    fn["opaque"].add(h + "()")
            if (len(fn["all"]), len(fn["opaque"])) != before:
                changed = True
    single = []
    for fn in sorted(fns, key=lambda f: (f["path"], f["line"])):
        kind = "method" if fn["method"] else ("conn" if fn["conn"] and not fn["vars"] else "fn")
        parts = ",".join(sorted(fn["all"])) or "-"
        opaque = (" opaque:" + ",".join(sorted(fn["opaque"]))) if fn["opaque"] else ""
        if not check:
            print(f"{fn['path']}:{fn['line']}\t{kind}\t{fn['name']}\t{parts}{opaque}")
        top = fn["path"].startswith(TOP_LAYER)
        if (kind == "fn" and len(fn["all"]) <= 1 and not fn["opaque"] and not top
                and fn["name"] not in ("new", "with_accounts")):
            single.append(fn)
    total = len(fns)
    whole = [f for f in fns if not f["method"] and f["vars"]]
    print(f"functions with the whole server: {total} ({len(whole)} take it as a parameter, "
          f"{sum(1 for f in fns if f['method'])} methods of ServerState, "
          f"{sum(1 for f in fns if f['conn'] and not f['vars'])} reach it through a connection)")
    print(f"parameter takers touching one part or none (should take the part): {len(single)}")
    for fn in single:
        print(f"  {fn['path']}:{fn['line']} {fn['name']} -> {','.join(sorted(fn['all'])) or '-'}")
    if check and single:
        sys.exit(1)


if __name__ == "__main__":
    main()
