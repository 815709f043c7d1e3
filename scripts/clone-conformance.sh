#!/bin/bash
# Block cloning (FSCTL_DUPLICATE_EXTENTS_TO_FILE) against ringshare and Samba 4.22 with
# `vfs objects = btrfs` in the same run, on a btrfs image on a loop device: smbtorture 4.22's
# smb2.ioctl dup_extents tests (and bug14607) through scripts/conformance.sh with its shares on
# the image.
#
# Usage: scripts/clone-conformance.sh [--out DIR] [TEST ...]
#   TEST ...   smbtorture tests (default: every smb2.ioctl.dup_extents_* test)
# Env: RINGSHARE_BIN and the rest as scripts/conformance.sh takes them.
# Needs: root, btrfs-progs (mkfs.btrfs), losetup, and what scripts/conformance.sh needs.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ARGS=()
if [ "${1:-}" = --out ]; then
    ARGS=(--out "$2")
    shift 2
fi
TESTS=("$@")
if [ ${#TESTS[@]} -eq 0 ]; then
    mapfile -t TESTS < <(smbtorture --list smb2.ioctl 2>/dev/null |
        sed -nE 's/^(smb2\.ioctl\.dup_extents_[a-z_]+)\.dup_extents_[a-z_]+$/\1/p' | sort -u)
fi
[ ${#TESTS[@]} -gt 0 ] || { echo "no dup_extents tests in smbtorture --list smb2.ioctl" >&2; exit 2; }

WORK=$(mktemp -d /tmp/ringshare-clone-XXXXXX)
LOOP=
cleanup() {
    mountpoint -q "$WORK/mnt" && umount "$WORK/mnt"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    rm -rf "$WORK"
}
trap cleanup EXIT

truncate -s 2G "$WORK/img"
mkfs.btrfs -q "$WORK/img" >/dev/null || exit 1
LOOP=$(losetup -f --show "$WORK/img") || exit 1
mkdir "$WORK/mnt"
# smbd acts as the test user and must reach the share through these.
chmod 0755 "$WORK" "$WORK/mnt"
mount "$LOOP" "$WORK/mnt" || exit 1
chmod 0755 "$WORK/mnt"

SHARE_ROOT=$WORK/mnt SAMBA_VFS_OBJECTS="btrfs streams_xattr acl_xattr" \
    "$SCRIPT_DIR/conformance.sh" "${ARGS[@]}" "${TESTS[@]}"
