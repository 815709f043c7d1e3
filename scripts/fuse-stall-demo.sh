#!/usr/bin/env bash
# A KNOWN LIMIT, shown (issue 33; docs/cluster-internals.md, "File system calls off the I/O
# thread (plan)"): on a FUSE or network file system, one client touching a file the file system
# is slow to answer for stalls every other client of the same I/O thread. Not a CI test: it is
# the failing test the plan's steps are judged by (it passes when "during the stall" stays near
# "before").
#
# Serves scripts/stall-fuse.py (a passthrough FUSE mount of an ext4 loop device) with ONE I/O
# thread; 4 clients loop CREATE+WRITE+READ+CLOSE of their own files while a fifth does ACTION on
# a file under stall/ that the file system holds for 3 s (scripts/lib/fuse-stall-clients.py).
# Needs root, python with smbprotocol and mfusepy (PY=...).
#
#   scripts/fuse-stall-demo.sh [--action create|read|query|list|close|write-close|disconnect|setinfo|flush|rename|lock|copychunk|security|stream|stream-create|delete|stream-rename] [--stall-ops OP,...] [--direct-io] [--bin PATH]
#     create: a CREATE of a new file under stall/ (the backend's path lookups, on the I/O thread)
#     read:   a READ of a file under stall/ opened before (the file's data not yet cached)
#     query:  QUERY_INFO FileAllInformation of that file; list: QUERY_DIRECTORY of stall/;
#     close:  CLOSE of that file (its descriptor's close sends FUSE_FLUSH)
#     write-close: a WRITE of that file and its CLOSE sent right behind it, on a share with
#             `posix locking = no` (the WRITE asks no file system job); the FUSE write and then
#             the flush are held 1.5 s each (the review of steps 3-4, finding B: the WRITE's
#             I/O held the descriptor, and the flush was made where it ended, on the I/O thread)
#     disconnect: a TREE_DISCONNECT with that file open (the server closes it: its flush)
#     setinfo: SET_INFO FileEndOfFileInformation of that file (a FUSE setattr: `truncate`)
#     flush:  FLUSH of that file, written before the stall (its write time, a FUSE setattr:
#             `utimens`, then its fsync)
#     rename: SET_INFO FileRenameInformation of that file (opened with DELETE) to stall/renamed
#             (the target's case-insensitive search: FUSE opendir and readdir; then `rename`)
#     lock:   LOCK of 4 KiB of that file (its POSIX lock under `posix locking`, default yes),
#             on a mount that takes POSIX locks itself (stall-fuse.py --posix-locks, as
#             ceph-fuse asks its MDS), only its `lock` requests held
#     copychunk: FSCTL_SRV_COPYCHUNK_WRITE of 1 MiB from that file into stall/copy (both opened
#             before; the copy's reads and writes, copy_file_range through FUSE)
#     security: QUERY_INFO of that file's security descriptor (its stat and ACL xattrs)
#     stream: READ of 1 KiB of that file's named stream `cold:s`, opened and written before (the
#             POSIX backend keeps a stream in an xattr: its read is a FUSE getxattr)
#     stream-create: a CREATE of a new named stream `cold:new` of that file (its lookup and
#             open, its xattrs listed, the empty stream's setxattr)
#     delete: CLOSE of that file, opened before with DELETE and delete on close (its flush,
#             then the FUSE unlink)
#     stream-rename: SET_INFO FileRenameInformation of `cold:s` (opened with DELETE and written
#             before) to `:renamed` (the target's listxattr, the xattr's get, set and remove)
#     --stall-ops: hold only these FUSE requests (stall-fuse.py --ops; e.g. `read`: the data
#     read alone, not the getattr before it)
#     --direct-io: the mount opens every file in direct I/O mode (stall-fuse.py --direct-io; as
#     ceph-fuse can): a READ's FUSE read is made by whichever thread reads, past the page cache
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ACTION=create
OPS=()
DIRECT=()
LABEL=""
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/ringshare
while [ $# -gt 0 ]; do
    case "$1" in
    --action) ACTION=$2; shift ;;
    --stall-ops) OPS=(--ops "$2"); LABEL=" --stall-ops $2"; shift ;;
    --direct-io) DIRECT=(--direct-io); LABEL="$LABEL --direct-io" ;;
    --bin) BIN=$2; shift ;;
    -h | --help) sed -n '2,45p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
PY=${PY:-python3}
"$PY" -c 'import smbprotocol, mfusepy' 2>/dev/null || {
    echo "needs python smbprotocol and mfusepy (PY=/path/to/venv/bin/python)" >&2
    exit 2
}
W=$(mktemp -d /tmp/fusestall.XXXXXX)
PORT=${PORT:-4473}
USER_NAME=rsfsinv
PASS=inventory
PIDS=()
LOOP=""
. scripts/lib/fuse-share.sh
cleanup() {
    # The flag gone first: a held FUSE request is let go.
    rm -f "$W/flag"
    fuse_share_cleanup
}
trap cleanup EXIT INT TERM

fuse_share_under
mkdir "$W/under/stall"
head -c 1M /dev/urandom >"$W/under/stall/cold"
chown -R "$USER_NAME" "$W/under"
SHARE_EXTRA=""
if [ "$ACTION" = write-close ]; then
    [ ${#OPS[@]} -eq 0 ] && OPS=(--ops write,flush) && LABEL=" (write and flush held)"
    OPS+=(--hold-each 1.5)
    SHARE_EXTRA="posix locking = no"
fi
if [ "$ACTION" = lock ]; then
    [ ${#OPS[@]} -eq 0 ] && OPS=(--ops lock) && LABEL=" (lock requests held)"
    OPS+=(--posix-locks)
fi
fuse_share_mount --log "$W/fuse.log" --flag "$W/flag" "${OPS[@]}" "${DIRECT[@]}"

fuse_share_config "$BIN" "$SHARE_EXTRA"
setsid "$BIN" serve --config "$W/rs.conf" --threads 1 </dev/null >"$W/log" 2>&1 &
SERVER=$!
PIDS=("$SERVER" "${PIDS[@]}")
for _ in $(seq 1 100); do
    ss -Htln "sport = :$PORT" | grep -q . && break
    kill -0 "$SERVER" || { cat "$W/log" >&2; exit 1; }
    sleep 0.1
done
echo "# scripts/fuse-stall-demo.sh --action $ACTION$LABEL ($(date -u +%FT%TZ), $(uname -r), $(git rev-parse --short HEAD)): one I/O thread"
"$PY" scripts/lib/fuse-stall-clients.py --port "$PORT" --user "$USER_NAME" --password "$PASS" --share share \
    --flag "$W/flag" --action "$ACTION"
# Which threads asked the file system about stall/, in order, by name (`ringshare-ring-N`: the
# I/O thread, which waits for the answer of a synchronous request; `iou-wrk-N`: an io_uring
# worker of its ring, which does not hold it), with the time the file system took to answer
# (the held one takes the stall's 3 s; the fuse log has when each request came, FLAG_ON when the
# stall began).
echo "FUSE requests about stall/ (seconds after the stall began: op path thread):"
on=$(cat "$W/flag_on")
grep -E ' /stall(/|$)' "$W/fuse.log" | while read -r t tid op path; do
    name=$(cat /proc/"$SERVER"/task/"$tid"/comm 2>/dev/null || echo "tid $tid (not a live thread of the server)")
    printf '  %+8.3f  %-9s %-12s %s\n' "$(echo "$t - $on" | bc)" "$op" "$path" "$name"
done
