#!/usr/bin/env bash
# Runs one test binary with a time limit: cargo's target runner in scripts/test-all.sh
# (CARGO_TARGET_<triple>_RUNNER), so that a test that hangs fails CI with its name and the
# processes it was waiting on, instead of running into CI's own limit with no word.
#
#   scripts/test-time-limit.sh TEST-BINARY [ARGS...]
#
# Environment: TEST_BINARY_LIMIT, seconds for the whole binary (default 900; the slowest
# binary, tests/cluster.rs, took 125 s on the 2-vCPU machine: docs/testing.md).
# When the limit passes, it prints the binary, the tests libtest still ran ("has been running
# for over 60 seconds" above) and the process tree under it, then ends that tree with SIGTERM
# and, 10 s later, SIGKILL, and exits 124.
set -uo pipefail
limit="${TEST_BINARY_LIMIT:-900}"
# Its own process group, so that what the tests started (servers, clients) ends with it.
setsid "$@" &
pid=$!
(
    sleep "$limit" &
    s=$!
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    wait "$s"
    kill -0 "$pid" 2>/dev/null || exit 0
    # From here on, the limit ends the binary: exit 3 tells the caller.
    trap '' TERM
    {
        echo "test-time-limit: $(basename "$1") ran longer than ${limit} s; what was still running:"
        ps -o pid=,etimes=,args= --forest -g "$pid" 2>/dev/null | cut -c1-200
    } >&2
    kill -TERM -- "-$pid" 2>/dev/null
    sleep 10
    kill -KILL -- "-$pid" 2>/dev/null
    exit 3
) &
watcher=$!
wait "$pid"
rc=$?
kill "$watcher" 2>/dev/null
wait "$watcher"
[ $? -eq 3 ] && rc=124
exit "$rc"
