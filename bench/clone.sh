#!/bin/bash
# Server-side block clone vs copychunk vs read+write of one file through ringshare on a btrfs
# image on a loop device (bench/clone.py with python smbprotocol), then what btrfs says the
# copies share (`btrfs filesystem du`).
#
# Usage: RINGSHARE_BIN=... PYTHON=.../bin/python bench/clone.sh [SIZE_MIB] [METHOD ...]
#   SIZE_MIB  default 1024; METHODs as bench/clone.py takes them (default all three)
# Needs: root, btrfs-progs, losetup, useradd; PYTHON with smbprotocol (default
# target/pyenv/bin/python, which the interop tests set up).
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
truncate -s $((SIZE * 5 + 1024))M "$WORK/img"
mkfs.btrfs -q "$WORK/img" >/dev/null || exit 1
LOOP=$(losetup -f --show "$WORK/img") || exit 1
mkdir "$WORK/mnt" && mount "$LOOP" "$WORK/mnt" || exit 1
mkdir "$WORK/mnt/share" && chown "$USER_NAME" "$WORK/mnt/share"
PORT=$(lib_free_port) || exit 1
lib_ringshare_start "$BIN" "$WORK/rs" "$PORT" bench "$WORK/mnt/share" "$USER_NAME" "$PASS" ||
    exit 1
PID=$LIB_RINGSHARE_PID
"$PY" "$SCRIPT_DIR/clone.py" 127.0.0.1 "$PORT" "$USER_NAME" "$PASS" bench "$SIZE" "$@" || exit 1
sync
echo "btrfs filesystem du -s (Total, Exclusive, Set shared):"
btrfs filesystem du --raw "$WORK/mnt/share"/* | sed 's/^/  /'
