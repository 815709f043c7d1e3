#!/usr/bin/env bash
# The three-node cluster tests (crates/ringshare/tests/cluster.rs) on a real CephFS, by hand,
# as root (not in CI): a throwaway Ceph on loopback (1 mon, 3 OSDs on memstore, 1 MDS; no
# block device), the file system mounted three times with ceph-fuse (page cache off, as
# docs/cluster.md asks: with it on, two mounts do not see each other's writes), node N serving
# mount N. Each node runs in its own network namespace (ringshare-ceph-N, address
# $NET.N on a bridge whose host side, $NET.254, carries Ceph and etcd): its SMB port, its
# cluster port, its etcd and Ceph traffic (its ceph-fuse runs there too) cross a real
# interface, and the tests' clients reach it at its own address. Each node's mount carries
# client_metadata ringshare_node=N, and the nodes' `cluster takeover command` evicts the dead
# node's CephFS session (`ceph tell mds.* client evict`) before the survivors decide for its
# files, so nothing it still sends lands (a node stopped cleanly is not evicted).
#
# Every test of the cluster test binary runs, each on fresh mounts: those of cluster.rs and of
# its modules (cluster_kill: the kill loop; cluster_stall; cluster_upgrade: a node stopped and
# started again; cluster_witness: Witness over DCE/RPC to each node at its own address, a kill,
# and `ringshare cluster drain`), and the nodecut test, which only this script can run. A test
# that kills a node has its mount made again (`$W/remount N`, RINGSHARE_CLUSTER_REMOUNT) once
# the survivors' evictions are done, before it starts the node again. The rolling upgrade from
# the previous release (cluster.rs, ignored) runs only with OLD_BIN=/path/to/old/ringshare
# (scripts/cluster-upgrade.sh builds one).
#
#   sudo scripts/cluster-ceph.sh            # every cluster test
#   sudo scripts/cluster-ceph.sh after_a_node   # those whose names contain this
#
# Needs: apt-get install ceph-mon ceph-osd ceph-mds ceph-fuse ceph-common etcd-server iproute2,
# and a built tree (cargo). NET=a.b.c picks the /24 (default 10.231.77). Leaves nothing behind:
# daemons stopped, mounts gone, namespaces and bridge deleted, work dir removed (KEEP=1 keeps
# the work dir with the daemons' and nodes' logs).
set -euo pipefail

cd "$(dirname "$0")/.."
FILTER="${1:-}"

if [ "$(id -u)" != 0 ]; then
    echo "cluster-ceph.sh: run as root (ceph-fuse mounts, test accounts)" >&2
    exit 2
fi
for b in ceph-mon ceph-osd ceph-mds ceph-fuse ceph monmaptool etcd bc ip nsenter; do
    if ! command -v "$b" >/dev/null; then
        echo "cluster-ceph.sh: $b is missing (apt-get install ceph-mon ceph-osd ceph-mds ceph-fuse ceph-common etcd-server bc iproute2)" >&2
        exit 2
    fi
done

NET="${NET:-10.231.77}"
HOST="$NET.254"
# The tests' clients reach the nodes from another address of the host, so that a node cut off
# from etcd and Ceph ($HOST) still reaches its client (the nodecut test).
CLIENTS="$NET.253"
BRIDGE=rsceph0
NS=(ringshare-ceph-1 ringshare-ceph-2 ringshare-ceph-3)
W=$(mktemp -d /tmp/ringshare-ceph.XXXXXX)
CONF="$W/ceph.conf"
PIDS=()
cleanup() {
    set +e
    for n in 1 2 3; do
        umount -l "$W/mnt$n" 2>/dev/null
    done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    sleep 1
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for n in 1 2 3; do
        ns=${NS[$((n - 1))]}
        # Whatever still runs in a node's namespace (a test's leftover node).
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        # (The host's side goes first: the namespace itself may linger in the kernel a
        # while, held by its closing sockets.)
        ip link del "rsceph-h$n" 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    ip link del "$BRIDGE" 2>/dev/null
    if [ "${KEEP:-}" = 1 ]; then
        echo "cluster-ceph.sh: kept $W"
    else
        rm -rf "$W"
    fi
}
trap cleanup EXIT

# The nodes' network: a bridge in this namespace ($HOST: Ceph, etcd, the tests' clients) and
# one namespace per node with a veth on it ($NET.N).
if ip link show "$BRIDGE" >/dev/null 2>&1; then
    echo "cluster-ceph.sh: $BRIDGE exists (another run, or a leftover: ip link del $BRIDGE)" >&2
    exit 2
fi
ip link add "$BRIDGE" type bridge
ip addr add "$HOST/24" dev "$BRIDGE"
ip addr add "$CLIENTS/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
for n in 1 2 3; do
    ns=${NS[$((n - 1))]}
    ip netns del "$ns" 2>/dev/null || true
    ip link del "rsceph-h$n" 2>/dev/null || true
    ip netns add "$ns"
    ip link add "rsceph-h$n" type veth peer name eth0 netns "$ns"
    ip link set "rsceph-h$n" master "$BRIDGE" up
    ip -n "$ns" addr add "$NET.$n/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip route add "$NET.$n/32" dev "$BRIDGE" src "$CLIENTS"
done
in_node() { local n=$1; shift; nsenter --net="/run/netns/${NS[$((n - 1))]}" "$@"; }
for n in 1 2 3; do
    # The bridge forwards once its ports are up (no STP delay on a new bridge, but wait).
    for _ in $(seq 50); do
        in_node "$n" python3 -c "import socket; socket.create_connection(('$HOST', 9), 0.2)" \
            2>&1 | grep -q 'refused' && break
        sleep 0.1
    done
done

port() { python3 -c "import socket; s=socket.socket(); s.bind(('$HOST',0)); print(s.getsockname()[1])"; }
MON_PORT=$(port)
FSID=$(cat /proc/sys/kernel/random/uuid)
mkdir -p "$W/run" "$W/log" "$W/mon" "$W/osd" "$W/mds"
cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = v2:$HOST:$MON_PORT
public network = $NET.0/24
auth cluster required = none
auth service required = none
auth client required = none
osd objectstore = memstore
memstore device bytes = 536870912
osd pool default size = 1
osd pool default min size = 1
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
run dir = $W/run
log file = $W/log/\$name.log
admin socket = $W/run/\$name.asok
mon data = $W/mon/\$id
osd data = $W/osd/\$id
mds data = $W/mds/\$id
[client]
fuse disable pagecache = true
client oc = false
EOF
C=(ceph -c "$CONF")
t0=$(date +%s.%N)
say() { printf '[cluster-ceph %5.1fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }

monmaptool --create --add a "v2:$HOST:$MON_PORT" --fsid "$FSID" "$W/monmap" >/dev/null
mkdir -p "$W/mon/a"
ceph-mon -c "$CONF" --mkfs -i a --monmap "$W/monmap"
ceph-mon -c "$CONF" -i a -f 2>>"$W/log/stderr" &
PIDS+=($!)
timeout 30 "${C[@]}" -s >/dev/null
say "mon up"
for i in 0 1 2; do
    U=$(cat /proc/sys/kernel/random/uuid)
    ID=$("${C[@]}" osd new "$U")
    mkdir -p "$W/osd/$ID"
    ceph-osd -c "$CONF" -i "$ID" --mkfs --osd-uuid "$U" >/dev/null 2>&1
    ceph-osd -c "$CONF" -i "$ID" -f 2>>"$W/log/stderr" &
    PIDS+=($!)
done
"${C[@]}" osd pool create cephfs_metadata 8 >/dev/null
"${C[@]}" osd pool create cephfs_data 16 >/dev/null
"${C[@]}" fs new cephfs cephfs_metadata cephfs_data >/dev/null
mkdir -p "$W/mds/a"
ceph-mds -c "$CONF" -i a -f 2>>"$W/log/stderr" &
PIDS+=($!)
for _ in $(seq 120); do
    "${C[@]}" mds stat 2>/dev/null | grep -q 'up:active' && break
    sleep 0.5
done
"${C[@]}" mds stat | grep -q 'up:active' || { echo "cluster-ceph.sh: no active MDS" >&2; exit 1; }
say "CephFS up on $HOST (3 memstore OSDs, 1 MDS); nodes' namespaces ${NS[*]} at $NET.1-3"

# Each node's own mount, its ceph-fuse in the node's namespace (a fresh one each time: a
# takeover evicts the dead node's). The mount itself is in this mount namespace: the tests
# look at the files through node 1's. `$W/remount N` makes node N's mount again (the nodecut
# test runs it for the node it cut off, whose mount the takeover evicted).
cat >"$W/remount" <<EOF
#!/bin/sh
# (An evicted mount answers ESHUTDOWN even to stat: unmount blindly.)
umount -l "$W/mnt\$1" 2>/dev/null
mkdir -p "$W/mnt\$1"
exec nsenter --net="/run/netns/ringshare-ceph-\$1" ceph-fuse -c "$CONF" --id admin \\
    --client_metadata "ringshare_node=\$1" "$W/mnt\$1" >>"$W/log/stderr" 2>&1
EOF
chmod 755 "$W/remount"
mount_all() {
    for n in 1 2 3; do
        "$W/remount" "$n"
    done
}
mount_all
say "mounted 3 times with ceph-fuse (page cache off), each from its node's namespace"
# Coherence across mounts (what the page cache breaks).
echo one >"$W/mnt1/coherence"
grep -q one "$W/mnt2/coherence"
echo two >"$W/mnt2/coherence"
grep -q two "$W/mnt1/coherence" || { echo "cluster-ceph.sh: mounts not coherent" >&2; exit 1; }
rm "$W/mnt1/coherence"

# The nodes' takeover command: evict the dead node's CephFS session(s).
cat >"$W/evict" <<EOF
#!/bin/sh
exec ceph -c "$CONF" tell 'mds.*' client evict "client_metadata.ringshare_node=\$1"
EOF
chmod 755 "$W/evict"

export RINGSHARE_CLUSTER_MOUNTS="$W/mnt1:$W/mnt2:$W/mnt3"
export RINGSHARE_CLUSTER_TAKEOVER="$W/evict"
# Node N runs in NS[N-1] at $NET.N; etcd listens on $HOST (crates/ringshare/tests/cluster.rs).
export RINGSHARE_CLUSTER_NETNS="${NS[0]},${NS[1]},${NS[2]}"
export RINGSHARE_CLUSTER_ADDRESSES="$NET.1,$NET.2,$NET.3"
export RINGSHARE_CLUSTER_HOST="$HOST"
export RINGSHARE_CLUSTER_LOGS="$W/log/nodes"
export RINGSHARE_CLUSTER_REMOUNT="$W/remount"
[ -n "${OLD_BIN:-}" ] && export RINGSHARE_OLD_BIN="$OLD_BIN"
if [ -n "${CEPH_COMMAND:-}" ]; then
    # By hand: anything else against the three mounts (CEPH_COMMAND='bash' for a shell).
    say "running $CEPH_COMMAND (mounts: $RINGSHARE_CLUSTER_MOUNTS)"
    bash -c "$CEPH_COMMAND"
    exit
fi
say "running the cluster tests on CephFS, each on fresh mounts"
cargo build -p ringshare --tests -q
failed=()
tests=$(cargo test -p ringshare --test cluster -q -- --list 2>/dev/null | sed -n 's/: test$//p')
for t in $tests; do
    case "$t" in *"$FILTER"*) ;; *) continue ;; esac
    case "$t" in *previous_release*)
        if [ -z "${OLD_BIN:-}" ]; then
            say "skipped: $t (OLD_BIN=/path/to/the/previous/release/ringshare runs it)"
            continue
        fi ;;
    esac
    mount_all
    if cargo test -p ringshare --test cluster -q -- --exact "$t" --include-ignored --nocapture; then
        say "passed: $t"
    else
        say "FAILED: $t"
        failed+=("$t")
    fi
done
say "evictions (OSD blocklist entries): $("${C[@]}" osd blocklist ls 2>/dev/null | grep -c . || true)"
if [ ${#failed[@]} -gt 0 ]; then
    say "failed on CephFS: ${failed[*]}"
    exit 1
fi
say "every cluster test passed on CephFS"
