#!/usr/bin/env python3
"""Every tests/*.rs of a crate whose Cargo.toml turns cargo's test discovery off
(`autotests = false`: its tests are modules of one binary, docs/testing.md) is either a test
target named there ([[test]] path) or a module of one (`mod NAME;` in a target's file).
Without this check a new file there would never be built or run. Exits 1 naming each
file that is neither."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
bad = []
for toml in sorted(root.glob("crates/*/Cargo.toml")):
    text = toml.read_text()
    if not re.search(r"^autotests\s*=\s*false\s*$", text, re.M):
        continue
    crate = toml.parent
    targets = re.findall(r'^path\s*=\s*"(tests/[^"]+\.rs)"\s*$', text, re.M)
    covered = {crate / t for t in targets}
    for t in targets:
        src = (crate / t).read_text()
        covered |= {crate / "tests" / (m + ".rs") for m in re.findall(r"^mod ([a-z0-9_]+);$", src, re.M)}
    for f in sorted((crate / "tests").glob("*.rs")):
        if f not in covered:
            bad.append(f.relative_to(root))
for f in bad:
    print(f"tests-listed: {f} is neither a [[test]] of its crate's Cargo.toml nor a module of one "
          "(autotests is off there): add `mod NAME;` to the crate's merged test file, or a [[test]]",
          file=sys.stderr)
sys.exit(1 if bad else 0)
