#!/usr/bin/env bash
# Prints the import cycles between crates/core's modules (issue 30: "no circle inside
# crates/core"): which module uses which (`use crate::…`, `use super::…` and paths written out
# in code), then the strongly connected components of that graph, with their sizes and members,
# at two grains:
#
#   - top-level modules (crate::cmd::create::request counts as `cmd`), the layers to come;
#   - files, where a module's use of its own parent (`super::`, or any ancestor) is left out:
#     a module and the submodules it is made of are not a cycle, but a path through a
#     submodule that comes back to its parent is.
#
# Test code (`#[cfg(test)] mod tests`, tests.rs, *_tests.rs) and comments are not counted.
# It fails (exit 1) with --acyclic when there is any cycle, with --acyclic-in=M,… when a cycle
# (at either grain) holds a module under one of the top-level modules M, when a module of a
# layer that must stand alone inside the crate (LAYERS at the end) imports anything outside that
# layer, and when a module of crates/state's, crates/cluster-home's or crates/core's layers
# (ORDERS at the end) imports one of a later layer.
#
#   scripts/core-cycles.sh [SRC_DIR]     (default: crates/core/src)
#   scripts/core-cycles.sh --edges       also list which file imports which inside a cycle
#   scripts/core-cycles.sh --acyclic D   fail when D has any import cycle, at either grain (CI:
#                                        crates/files/src, crates/state/src,
#                                        crates/cluster-home/src and crates/core/src)
#   scripts/core-cycles.sh --acyclic-in=arbiter,cluster,…
#                                        fail when any of these modules is in a cycle (CI: the
#                                        cluster layer and the per-file operations below it)
set -euo pipefail
cd "$(dirname "$0")/.."
edges=0
acyclic=0
acyclic_in=
src=crates/core/src
for a in "$@"; do
    case "$a" in
        --edges) edges=1 ;;
        --acyclic) acyclic=1 ;;
        --acyclic-in=*) acyclic_in=${a#--acyclic-in=} ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        *) src=$a ;;
    esac
done
[ -d "$src" ] || { echo "no directory $src" >&2; exit 2; }
exec python3 - "$src" "$edges" "$acyclic" "$acyclic_in" <<'PY'
import os, re, sys

src, show_edges, acyclic = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
acyclic_in = [m for m in sys.argv[4].split(",") if m]

def module_of(rel):
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("lib", "mod"):
        parts = parts[:-1]
    return tuple(parts)

files = {}
for root, _, names in os.walk(src):
    for n in names:
        if not n.endswith(".rs") or n == "tests.rs" or n.endswith("_tests.rs"):
            continue
        path = os.path.join(root, n)
        files[module_of(os.path.relpath(path, src))] = path
modules = set(files)

def code_of(path):
    text = open(path, encoding="utf-8").read()
    # Tests last in a file, by the crate's convention.
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod tests\s*\{", text, re.M)
    if m:
        text = text[: m.start()]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)

def expand(tree):
    """`a::{b, c::{d, self}}` -> [a::b, a::c::d, a::c]"""
    tree = re.sub(r"\s+", "", tree)
    out = []
    def walk(prefix, s):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:i])
                start = i + 1
        items.append(s[start:])
        for it in filter(None, items):
            if "{" in it:
                head, rest = it.split("{", 1)
                walk(prefix + [p for p in head.split("::") if p], rest[:-1])
            else:
                it = re.sub(r"\bas\b.*$", "", it)
                segs = [p for p in it.split("::") if p]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                out.append(prefix + segs)
    walk([], tree)
    return out

def resolve(segs, here):
    """The file module a path names, or None when it leaves the crate."""
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base, rest = here, segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    else:
        return None
    best = None
    for i in range(len(rest) + 1):
        cand = base + tuple(rest[:i])
        if cand in modules:
            best = cand
    return best

edges = {m: set() for m in modules}
for m, path in files.items():
    code = code_of(path)
    paths = [expand(u) for u in re.findall(r"\buse\s+((?:crate|super|self)\b[^;]*);", code)]
    paths = [p for group in paths for p in group]
    code_wo_use = re.sub(r"\buse\s+[^;]*;", "", code)
    paths += [p.split("::") for p in re.findall(r"\b(?:crate|super)(?:::\w+)+", code_wo_use)]
    # `child::item`, for a submodule declared here.
    for child in re.findall(r"\bmod\s+(\w+)\s*;", code):
        if re.search(r"(?<![\w:])" + child + r"::", code_wo_use):
            paths.append(["self", child])
    for p in paths:
        t = resolve(p, m)
        if t is not None and t != m:
            edges[m].add(t)

def name(m):
    return "crate" if not m else "::".join(m)

def sccs(nodes, succ):
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(comp)
    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]

def report(title, nodes, succ, adjacency=False):
    comps = sorted(sccs(nodes, succ), key=len, reverse=True)
    n_edges = sum(len(s) for s in succ.values())
    in_cycles = sum(len(c) for c in comps)
    print(f"== {title}: {len(nodes)} modules, {n_edges} imports; "
          f"{len(comps)} cycle(s), {in_cycles} modules in them")
    for i, c in enumerate(comps, 1):
        members = sorted(name(m) for m in c)
        inner = sum(1 for a in c for b in succ[a] if b in c)
        print(f"  cycle {i}: {len(c)} modules, {inner} imports among them")
        print("    " + ", ".join(members))
        if adjacency or show_edges:
            print("    which imports which (inside the cycle):")
            for a in sorted(c):
                bs = sorted(name(b) for b in succ[a] if b in c)
                print(f"      {name(a)} -> {', '.join(bs)}")
    print()

# Top-level modules: crate::cmd::create::request is `cmd`.
top = lambda m: m[:1]
tops = {top(m) for m in modules if m}
tsucc = {t: set() for t in tops}
for a, bs in edges.items():
    for b in bs:
        if a and b and top(a) != top(b):
            tsucc[top(a)].add(top(b))
report("top-level modules of " + src, tops, tsucc, adjacency=True)

# Files, without a module's uses of its ancestors.
ancestor = lambda b, a: len(b) < len(a) and a[: len(b)] == b
fsucc = {m: {b for b in bs if not ancestor(b, m)} for m, bs in edges.items()}
report("files of " + src + " (uses of ancestors left out)", modules, fsucc)

# Layers that stand alone inside the crate (issue 30): a module under one imports nothing of the
# crate outside it. (The per-file state started as one, `files`; it is the crate crates/files
# now, where the compiler keeps the rule.)
LAYERS = []
bad = []
for layer in LAYERS:
    for m, bs in sorted(edges.items()):
        if m[: len(layer)] == layer:
            bad += [(m, b) for b in sorted(bs) if b[: len(layer)] != layer]
if LAYERS:
    print("== layers that import nothing outside themselves: " + ", ".join(name(l) for l in LAYERS))
    for m, b in bad:
        print(f"  NOT ALLOWED: {name(m)} imports {name(b)}")
    print("  ok" if not bad else f"  {len(bad)} import(s) out of a layer")
# Layers in order (issue 30; docs/architecture.md, "Layers inside crates/core"): a top-level
# module of one imports nothing of a later one. Modules not named here are not held to it.
# The server's tables and the per-file operations are crates/state, the cluster layer
# crates/cluster-home (the compiler keeps each crate below the next, and crates/core's layers
# above them); inside each crate the order is this script's to keep.
ORDERS = {
    "crates/state/src": [
        ("server", "state", "link", "watch"),  # the server's tables
        ("decide", "deliver", "notify", "opens", "durable"),  # per-file operations
    ],
    "crates/cluster-home/src": [
        ("cluster",),  # the cluster layer
        ("arbiter",),  # its front for commands
    ],
    "crates/core/src": [
        ("exchange",),  # what a command works on: request, reply, the connection's state
        ("cmd",),  # the commands
        ("conn",),  # the connection driver, which dispatches to the commands
    ],
}
ORDER = ORDERS.get(os.path.normpath(src))
if ORDER:
    rank = {(m,): i for i, layer in enumerate(ORDER) for m in layer}
    missing = sorted(k[0] for k in rank if k not in tops)
    for m in missing:
        print(f"  NOT ALLOWED: ORDER names {m}, no top-level module of {src}")
    bad += [((m,), ()) for m in missing]
    upward = [(a, b) for a in sorted(tsucc) for b in sorted(tsucc[a])
              if a in rank and b in rank and rank[b] > rank[a]]
    print("== layers, each importing nothing of a later one: "
          + " < ".join("{" + ", ".join(l) + "}" for l in ORDER))
    for a, b in upward:
        print(f"  NOT ALLOWED: {name(a)} imports {name(b)}")
    print("  ok" if not upward else f"  {len(upward)} import(s) up")
    bad += upward
cyclic = bool(sccs(modules, fsucc)) or bool(sccs(tops, tsucc))
if acyclic and cyclic:
    print(f"NOT ALLOWED: {src} must have no import cycle (--acyclic)")
# Modules that must be in no cycle, at the grain of files or of top-level modules.
unknown = [m for m in acyclic_in if (m,) not in tops]
if unknown:
    print("no such top-level module: " + ", ".join(unknown))
caught = sorted({name(m) for c in sccs(modules, fsucc) + sccs(tops, tsucc) for m in c
                 if m and m[0] in acyclic_in})
if acyclic_in:
    print("== in no cycle: " + ", ".join(acyclic_in))
    print("  ok" if not caught else "  NOT ALLOWED: in a cycle: " + ", ".join(caught))
sys.exit(1 if bad or (acyclic and cyclic) or caught or unknown else 0)
PY
