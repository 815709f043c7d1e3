#!/bin/sh
# Issue 33 ("Also: Rolling upgrades"): a 3-node cluster of the previous release's binary on a
# real etcd is upgraded to this build one node at a time (SIGTERM, which hands the node's files
# over; this build started on the same addresses; the cluster let settle), while clients write
# throughout: persistent handles on a continuously available share and plain opens, each writing
# a known pattern. Prints per step the cluster's level (`ringshare cluster nodes`), the answers
# the clients got other than SUCCESS and the longest a client waited; fails on any answer but
# SUCCESS or FILE_NOT_AVAILABLE, a connection dropped by a node that was not stopping, a byte
# acknowledged and not in its file at the end, or a level other than 1 while an old node serves
# and this build's (`msg::LEVEL`, 5 now) once all are new.
# The test: crates/ringshare/tests/cluster_upgrade/mod.rs.
#   scripts/cluster-upgrade.sh                      builds OLD_REV (default e9524d6, the last
#                                                   build before levels) in its own clone
#   OLD_BIN=/path/to/old/ringshare scripts/cluster-upgrade.sh
#   OLD_BIN=this scripts/cluster-upgrade.sh         a control run: this build replaced by itself
#   OLD_LEVEL=N OLD_BIN=... or OLD_REV=...          an old build that has levels (N: the one it
#                                                   speaks; default 1, every build before levels)
# OLD_DIR (default /work/rs-old-OLD_REV, or /tmp/... without /work) holds that clone and its
# target dir; a second run reuses its build. Run it under the heavy lock (it builds and runs
# three servers): flock -o /tmp/rs-heavy.lock scripts/cluster-upgrade.sh
# Needs root (the nodes act as a Unix user the test makes) and etcd (apt-get install etcd-server).
set -eu
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if [ -z "${OLD_BIN:-}" ]; then
    rev="${OLD_REV:-e9524d6}"
    base=/tmp
    [ -d /work ] && base=/work
    dir="${OLD_DIR:-$base/rs-old-$rev}"
    want="$(git rev-parse "$rev^{commit}")"
    if [ ! -d "$dir/.git" ]; then
        git clone --quiet --no-checkout "$(pwd)" "$dir"
    fi
    if [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null || true)" != "$want" ]; then
        git -C "$dir" fetch --quiet "$(pwd)" "$want"
        git -C "$dir" checkout --quiet --detach "$want"
    fi
    echo "cluster-upgrade: building $rev ($want) in $dir"
    (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo build --release --quiet -p ringshare)
    OLD_BIN="$dir/target/release/ringshare"
fi
[ "$OLD_BIN" = this ] || [ -x "$OLD_BIN" ] || { echo "cluster-upgrade: $OLD_BIN is not an executable" >&2; exit 1; }
[ "$OLD_BIN" = this ] || echo "cluster-upgrade: old binary $OLD_BIN ($("$OLD_BIN" --version))"
RINGSHARE_OLD_LEVEL="${OLD_LEVEL:-1}" RINGSHARE_OLD_BIN="$OLD_BIN" exec cargo test -p ringshare --test cluster \
    a_cluster_of_the_previous_release_upgraded_one_node_at_a_time -- --ignored --nocapture \
    --test-threads 1
