#!/usr/bin/env python3
"""bench/flame.py: one server's share of a `perf record -a -g` profile, as folded stacks, a flame
graph (SVG) and a budget: where its CPU went, in categories, scaled to the row's measured server
CPU per request or per GiB.

Usage: flame.py PERF_SCRIPT_OUTPUT PIDS_FILE ROW_JSON OUT_PREFIX TITLE

PERF_SCRIPT_OUTPUT  `perf script -F pid,tid,comm,ip,sym,dso` of the run (samples of every CPU),
                    or a .folded file this script wrote (PIDS_FILE then unused): budgets again
PIDS_FILE           the server's process ids, one a line (its process and every child seen
                    during the run: smbd forks one per connection); samples of other processes
                    (the client, other work on the machine) are left out
ROW_JSON            the row's result line from bench/lib.sh (server CPU and requests or bytes),
                    or "-" when there is none
OUT_PREFIX          writes OUT_PREFIX.folded, OUT_PREFIX.svg and OUT_PREFIX.budget.json
Prints the budget table.
"""
import html
import json
import re
import sys
from collections import Counter, defaultdict

# Categories of a sample, decided by its innermost frame (the function the CPU was in) and,
# for kernel frames, by the first frame of the stack that names a subsystem. Order matters: the
# first match wins.
KERNEL_RULES = [
    ("kernel: io_uring", re.compile(r"^_*(io_|io_uring|tctx_)")),
    ("kernel: copy to/from user", re.compile(r"^_*(copy_to_user|copy_from_user|copy_to_iter|copy_from_iter|copy_page_to_iter|copy_page_from_iter|copy_user|rep_movs|memcpy|memmove|clear_user|clear_page)")),
    ("kernel: page cache, tmpfs, pages", re.compile(r"^_*(shmem|filemap|folio|page|lru|alloc_pages|rmqueue|get_page|free_unref|free_pages|zone|memcg|mem_cgroup|truncate|xas_|xa_|mark_page|kmem_cache|kmalloc|kfree|slab)")),
    ("kernel: TCP/socket/loopback", re.compile(r"^_*(tcp|sock|sk_|skb|inet|ip_|ip6|net_|netif|napi|loopback|dev_|splice|pipe|sys_sendmsg|sys_recvmsg|sendmsg|recvmsg|release_sock|lock_sock|security_socket)")),
    ("kernel: files, names, statx, xattrs", re.compile(r"^_*(vfs_|do_sys_open|do_filp_open|path_|link_path|walk_component|lookup|d_|dput|dget|inode|generic_fillattr|statx|cp_statx|do_statx|getxattr|xattr|openat|filp|fput|fget|fd_|security_inode|security_file|apparmor|generic_perm|may_|fsnotify|inotify|getdents|iterate_dir|dcache|legitimize|step_into|complete_walk|terminate_walk|getname|putname|strncpy_from_user|close_fd|file_|do_dentry|alloc_empty_file|make_vfsuid|from_kuid|override_creds|revert_creds|prepare_creds)")),
    ("kernel: scheduling, wake-ups", re.compile(r"^_*(schedule|wake|futex|try_to_wake|ttwu|enqueue|dequeue|pick_next|finish_task|update_curr|switch_|psi_|cpuidle|irq|softirq|handle_softirqs|raw_spin_unlock_irq|task_work|sched)")),
    ("kernel: syscall entry/exit", re.compile(r"^_*(entry_SYSCALL|do_syscall|syscall|exit_to_user|x64_sys|do_sys_io_uring_enter)")),
]
USER_RULES = [
    ("user: allocator", re.compile(r"^_*(malloc|free|calloc|realloc|int_malloc|int_free|tcache|arena|rust_alloc|rust_dealloc|rust_realloc|rdl_|cfree|libc_malloc|libc_free)")),
    ("user: memcpy/memmove/memset", re.compile(r"^_*(memcpy|memmove|memset)")),
    ("user: crypto", re.compile(r"(aws_lc|^_*aes_|^_*aes_hw|gcm_|gmac|^_*sha(1|256|512)|hmac|^_*md5|cmac|^ring::)")),
]
KERNEL_DSOS = ("[kernel.kallsyms]", "[kernel]", "[unknown]")


def parse(path, pids):
    """Yields (comm, stack innermost-first as [(sym, dso)]) for the server's samples."""
    head, frames = None, []
    keep = False

    def flush():
        if head is not None and keep and frames:
            yield head, frames

    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                yield from flush()
                head, frames, keep = None, [], False
                continue
            if not line.startswith((" ", "\t")):
                yield from flush()
                # "comm pid/tid" or "comm pid" (the comm may hold spaces; pid is the last
                # number before the tid or the end).
                m = re.match(r"^(.*?)\s+(\d+)(?:/(\d+))?\s*$", line.rstrip())
                frames = []
                if m:
                    head = m.group(1).strip()
                    keep = int(m.group(2)) in pids
                else:
                    head, keep = None, False
                continue
            m = re.match(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
            if m:
                sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
                frames.append((sym, m.group(2)))
    yield from flush()


def short(sym):
    """A Rust symbol without its hash and generic noise, so that the folded stacks stay short."""
    sym = re.sub(r"::h[0-9a-f]{16}$", "", sym)
    sym = re.sub(r"<.*>", "<>", sym) if len(sym) > 120 else sym
    return sym.replace(";", ":")


def category(frames):
    sym, dso = frames[0]
    if dso in KERNEL_DSOS or sym.startswith(("__x64", "entry_")):
        names = [s for s, d in frames if d in KERNEL_DSOS]
        for name, rule in KERNEL_RULES:
            if rule.search(sym):
                return name
        # A leaf that names no subsystem (a spin lock, a list walk) goes by its callers.
        for caller in names[1:8]:
            for name, rule in KERNEL_RULES:
                if rule.search(caller):
                    return name
        return "kernel: other"
    for name, rule in USER_RULES:
        if rule.search(sym):
            return name
    if "libc" in dso:
        return "user: libc other"
    return "user: server code"


def svg(folded, title, path):
    """A flame graph: each frame a box as wide as its samples, callers below callees."""
    total = sum(folded.values()) or 1
    tree = {}
    for stack, n in folded.items():
        node = tree
        for fr in stack.split(";"):
            child = node.setdefault(fr, [0, {}])
            child[0] += n
            node = child[1]
    width, row = 1200, 16
    boxes = []
    depth_max = [0]

    def walk(node, x, depth):
        for name, (n, kids) in sorted(node.items()):
            w = n / total * width
            if w >= 1.0:
                boxes.append((x, depth, w, name, n))
                depth_max[0] = max(depth_max[0], depth)
                walk(kids, x, depth + 1)
            x += w

    walk(tree, 0.0, 0)
    height = (depth_max[0] + 3) * row
    out = ['<?xml version="1.0" standalone="no"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="11">' % (width, height),
           '<text x="4" y="12">%s (%d samples; hover a box for its name and share)</text>' % (html.escape(title), total)]
    for x, depth, w, name, n in boxes:
        y = height - (depth + 1) * row
        kernel = name.endswith("_[k]")
        hue = 20 if kernel else (40 if "ringshare" in name or "smb" in name else 60)
        label = html.escape(name)
        out.append('<g><title>%s: %d samples, %.2f %%</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="hsl(%d,80%%,%d%%)" stroke="white" stroke-width="0.3"/>' % (
            label, n, 100.0 * n / total, x, y, w, row - 1, hue, 55 + (hash(name) % 20)))
        if w > 40:
            chars = int(w / 7)
            out.append('<text x="%.2f" y="%d">%s</text>' % (x + 2, y + 11, html.escape(name[:chars])))
        out.append("</g>")
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def parse_folded(path):
    """Yields the samples of a .folded file this script wrote (to budget a profile again)."""
    for line in open(path):
        stack, n = line.rsplit(" ", 1)
        names = stack.split(";")
        frames = [(f[:-4], "[kernel.kallsyms]") if f.endswith("_[k]") else (f, "")
                  for f in reversed(names[1:])]
        for _ in range(int(n)):
            yield names[0], frames


def main():
    script, pids_file, row_json, prefix, title = sys.argv[1:6]
    folded = Counter()
    cats = Counter()
    selfs = defaultdict(Counter)
    if script.endswith(".folded"):
        samples = parse_folded(script)
    else:
        pids = {int(x) for x in open(pids_file).read().split() if x.strip().isdigit()}
        samples = parse(script, pids)
    for comm, frames in samples:
        stack = []
        for sym, dso in reversed(frames):
            k = "_[k]" if dso in KERNEL_DSOS else ""
            stack.append(short(sym) + k)
        folded[comm.split("/")[0].rstrip("0123456789-") + ";" + ";".join(stack)] += 1
        c = category(frames)
        cats[c] += 1
        selfs[c][short(frames[0][0])] += 1
    with open(prefix + ".folded", "w") as f:
        for k, v in sorted(folded.items()):
            f.write("%s %d\n" % (k, v))
    svg(folded, title, prefix + ".svg")
    total = sum(cats.values())
    row = json.loads(row_json) if row_json not in ("-", "") else {}
    # The measured cost of the row, spread over the categories by their share of samples.
    unit, cost = None, None
    # Rows that move bytes by GiB (as bench/rows reports them), the others by request.
    if row.get("server_cpu_s_per_gib") and row.get("workload") in ("seq-read", "seq-write", "same-file"):
        unit, cost = "s/GiB", row["server_cpu_s_per_gib"]
    elif row.get("requests") and row.get("server_cpu_s"):
        unit, cost = "us/request", row["server_cpu_s"] / row["requests"] * 1e6
    budget = {"title": title, "samples": total, "unit": unit, "cost": cost, "categories": {}}
    print("%s: %d samples of the server%s" % (title, total,
          "; measured %.3f %s" % (cost, unit) if cost else ""))
    for name, n in sorted(cats.items(), key=lambda kv: -kv[1]):
        share = n / total if total else 0
        top = ", ".join("%s %.0f%%" % (s[:48], 100.0 * m / n) for s, m in selfs[name].most_common(3))
        part = cost * share if cost else None
        budget["categories"][name] = {"samples": n, "share": share, "cost": part,
                                      "top": selfs[name].most_common(8)}
        print("  %-38s %5.1f %%  %s  [%s]" % (name, 100 * share,
              ("%8.3f %s" % (part, unit)) if part is not None else "", top))
    with open(prefix + ".budget.json", "w") as f:
        json.dump(budget, f, indent=1)


if __name__ == "__main__":
    main()
