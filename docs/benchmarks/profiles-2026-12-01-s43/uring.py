import sys, re, collections
pid = sys.argv[1]; gib = int(sys.argv[2]) / 2**30
op_of = {}
cnt = collections.Counter(); res = collections.Counter(); ev = collections.Counter(); asy = collections.Counter()
sw = collections.Counter()
for line in sys.stdin:
    f = line.split()
    if len(f) < 2 or f[0].split('/')[0] != pid: continue
    e = f[1].rstrip(':')
    ev[e] += 1
    if e == 'io_uring:io_uring_submit_req':
        m = re.search(r'req (\S+), user_data \S+, opcode (\S+),', line)
        if m: op_of[m.group(1).rstrip(',')] = m.group(2)
    elif e == 'io_uring:io_uring_queue_async_work':
        m = re.search(r'opcode (\S+),', line)
        if m: asy[m.group(1)] += 1
    elif e == 'io_uring:io_uring_complete':
        m = re.search(r'req (\S+), user_data \S+, result (-?\d+)', line)
        if m:
            k = op_of.get(m.group(1).rstrip(','), '?')
            cnt[k] += 1
            r = int(m.group(2))
            if r > 0: res[k] += r
    elif e == 'sched:sched_switch':
        m = re.search(r'prev_comm=(\S+)', line)
        sw[m.group(1) if m else '?'] += 1
for e, n in sorted(ev.items()): print("   %-40s %8d  %9.0f per GiB" % (e, n, n / gib))
for k, n in sorted(cnt.items(), key=lambda x: -x[1]):
    print("   completions %-14s %8d  %9.0f per GiB, mean result %.0f" % (k, n, n / gib, res[k] / n if n else 0))
for k, n in sorted(asy.items(), key=lambda x: -x[1]):
    print("   to io-wq %-14s %8d  %9.0f per GiB" % (k, n, n / gib))
for k, n in sorted(sw.items(), key=lambda x: -x[1])[:5]:
    print("   switches away from %-16s %8d  %9.0f per GiB" % (k, n, n / gib))
