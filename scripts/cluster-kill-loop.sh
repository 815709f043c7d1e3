#!/bin/sh
# Issue 33, item 1: kill a random node of a 3-node cluster (real `ringshare serve` processes on
# three etcd members) RUNS times (default 50), each time at a random moment while clients of
# every node hold persistent opens of files homed on every node, and have the killed node's
# client reconnect each open through a survivor. Prints each run's answers (every DH2C's status,
# in order) and a SUMMARY line; fails when any answer was not SUCCESS or FILE_NOT_AVAILABLE, or
# an open did not come back with its data and locks. About 12 s a run on a 2-core machine.
#   scripts/cluster-kill-loop.sh [RUNS]      (RINGSHARE_KILL_LOOP_SEED=N repeats a sequence)
# Needs root (the nodes act as a Unix user the test makes) and etcd (apt-get install etcd-server).
set -eu
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
RINGSHARE_KILL_LOOP_RUNS="${1:-50}" exec cargo test -p ringshare --test cluster \
    a_node_killed_at_a_random_moment -- --nocapture --test-threads 1
