#!/bin/bash
# Where ringshare's I/O threads wait, other than in io_uring_enter: every ~20 ms (plus the time
# the loop takes) for SECONDS seconds, each `ringshare serve` process's ring threads are looked
# at, and one line is printed for each not running and not waiting for completions: time, pid,
# thread, state, wchan and the top of its kernel stack (/proc/PID/task/TID/stack; needs root).
# Used to find the file system calls an I/O thread makes synchronously (session 41: on CephFS,
# FUSE requests: docs/cluster.md, Limits).
#   scripts/ring-thread-waits.sh SECONDS > waits.txt
set -u
end=$(($(date +%s) + ${1:?seconds}))
while [ "$(date +%s)" -lt "$end" ]; do
    for p in $(pgrep -f "ringshare serve"); do
        for t in /proc/"$p"/task/*; do
            case "$(cat "$t/comm" 2>/dev/null)" in ringshare-ring*) ;; *) continue ;; esac
            st=$(awk '{print $3}' "$t/stat" 2>/dev/null)
            w=$(cat "$t/wchan" 2>/dev/null)
            if [ "$w" != "io_cqring_wait" ] && [ "$st" != "R" ]; then
                printf '%s pid=%s st=%s wchan=%s %s\n' "$(date +%T.%N | cut -c1-12)" "$p" "$st" "$w" \
                    "$(head -4 "$t/stack" 2>/dev/null | awk '{print $2}' | tr '\n' ' ')"
            fi
        done
    done
    sleep 0.02
done
