#!/bin/bash
# Server-side block clone vs copychunk vs read+write of one file through ringshare on a btrfs
# (or reflink xfs) image on a loop device (bench/clone.py with python smbprotocol), then what
# the file system says the copies share: `btrfs filesystem du` on btrfs, and on either the
# bytes of each file's extents `filefrag -v` flags shared.
#
# Usage: RINGSHARE_BIN=... PYTHON=.../bin/python [CLONE_FS=xfs] bench/clone.sh [SIZE_MIB] [METHOD ...]
#   SIZE_MIB  default 1024; METHODs as bench/clone.py takes them (default all three)
#   CLONE_FS  btrfs (default) or xfs (made with `mkfs.xfs -m reflink=1`)
# Needs: root, btrfs-progs or xfsprogs, losetup, useradd, filefrag (e2fsprogs); PYTHON with
# smbprotocol (default target/pyenv/bin/python, which the interop tests set up).
set -uo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
. "$REPO/scripts/lib/servers.sh"
SIZE=${1:-1024}
shift || true
PY=${PYTHON:-$REPO/target/pyenv/bin/python}
BIN=${RINGSHARE_BIN:?set RINGSHARE_BIN}
USER_NAME=rsbench PASS=Bench-Pw-1

WORK=$(mktemp -d /tmp/ringshare-clonebench-XXXXXX)
LOOP= PID= CREATED=
cleanup() {
    [ -n "$PID" ] && lib_stop_tree "$PID"
    mountpoint -q "$WORK/mnt" && umount "$WORK/mnt"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    [ -n "$CREATED" ] && userdel "$USER_NAME" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
getent passwd "$USER_NAME" >/dev/null ||
    { useradd --no-create-home --no-user-group --shell /usr/sbin/nologin "$USER_NAME" && CREATED=1; }
# The image is sparse: what it takes on the host is what the copies write (about SIZE * 4 MiB
# with the file system's own). A host short of it makes the loop device's writes fail with
# ENOSPC, which reaches the client as DISK_FULL from the clone: say so before starting instead.
NEED=$((SIZE * 4 + 512))
FREE=$(df --output=avail -BM "$WORK" | tail -1 | tr -dc 0-9)
if [ "${FREE:-0}" -lt "$NEED" ]; then
    echo "clone.sh: only ${FREE} MiB free on the host under $WORK; the image needs about $NEED MiB" >&2
    exit 1
fi
truncate -s $((SIZE * 5 + 1024))M "$WORK/img"
case "${CLONE_FS:-btrfs}" in
btrfs) mkfs.btrfs -q "$WORK/img" >/dev/null || exit 1 ;;
xfs) mkfs.xfs -q -m reflink=1 "$WORK/img" >/dev/null || exit 1 ;;
*) echo "CLONE_FS: btrfs or xfs" >&2; exit 2 ;;
esac
LOOP=$(losetup -f --show "$WORK/img") || exit 1
mkdir "$WORK/mnt" && mount "$LOOP" "$WORK/mnt" || exit 1
mkdir "$WORK/mnt/share" && chown "$USER_NAME" "$WORK/mnt/share"
PORT=$(lib_free_port) || exit 1
lib_ringshare_start "$BIN" "$WORK/rs" "$PORT" bench "$WORK/mnt/share" "$USER_NAME" "$PASS" ||
    exit 1
PID=$LIB_RINGSHARE_PID
"$PY" "$SCRIPT_DIR/clone.py" 127.0.0.1 "$PORT" "$USER_NAME" "$PASS" bench "$SIZE" "$@" || exit 1
sync
if [ "${CLONE_FS:-btrfs}" = btrfs ]; then
    echo "btrfs filesystem du -s (Total, Exclusive, Set shared):"
    btrfs filesystem du --raw "$WORK/mnt/share"/* | sed 's/^/  /'
fi
# shared<TAB>FILE<TAB>bytes in extents flagged shared<TAB>size (filefrag -v, in its blocks)
for f in "$WORK/mnt/share"/*; do
    filefrag -v "$f" | awk -v f="${f##*/}" '
        /^File size of / { for (i = 1; i < NF; i++) {
            if ($i == "is") size = $(i + 1)
            if ($i == "of" && $(i + 2) == "bytes)") bs = $(i + 1) } }
        /^ *[0-9]+:/ && /shared/ { n += $6 + 0 }
        END { printf "shared\t%s\t%d\t%d\n", f, n * bs, size }'
done
