#!/usr/bin/env python3
"""bench/syscalls.py: one server's system calls during a row, from `perf script -F pid,tid,trace` of a
`perf record -a -e raw_syscalls:sys_enter` run (bench/profile --syscalls), per request (request
rows) or per GiB moved (byte rows), by name.

Usage: perf script -F pid,tid,trace | syscalls.py PIDS_FILE ROW_JSON TITLE

PIDS_FILE  the server's process ids, one a line (its process and every child seen during the run)
ROW_JSON   the row's result line from bench/lib.sh, or "-" (then totals only)
"""
import json
import re
import sys
from collections import Counter

UNISTD = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"


def names():
    """Syscall numbers to names, from the kernel headers when installed."""
    out = {}
    try:
        with open(UNISTD) as f:
            for line in f:
                m = re.match(r"#define __NR_(\w+)\s+(\d+)", line)
                if m:
                    out[int(m.group(2))] = m.group(1)
    except OSError:
        pass
    return out


def main():
    pids_file, row, title = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(pids_file) as f:
        pids = {int(x) for x in f.read().split()}
    counts = Counter()
    for line in sys.stdin:
        m = re.match(r"\s*(\d+)/\d+\s.*?\bNR (\d+)\b", line)
        if m and int(m.group(1)) in pids:
            counts[int(m.group(2))] += 1
    result = json.loads(row) if row != "-" else {}
    requests = result.get("requests") or 0
    gib = (result.get("bytes") or 0) / 2**30
    if requests:
        per, unit = requests, "per request"
    elif gib:
        per, unit = gib, "per GiB"
    else:
        per, unit = 1, "in all"
    table = names()
    total = sum(counts.values())
    print(f"{title}: {total} system calls, {total / per:.3f} {unit}")
    for nr, n in counts.most_common():
        if n / total < 0.001:
            break
        print(f"  {table.get(nr, f'#{nr}'):<24} {n / per:10.3f}")


if __name__ == "__main__":
    main()
