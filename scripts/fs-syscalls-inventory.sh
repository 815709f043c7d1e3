#!/usr/bin/env bash
# Which file system calls an I/O thread makes itself (issue 33; docs/cluster-internals.md, "File
# system calls off the I/O thread (plan)"): serves a directory on a local file system with ONE
# I/O thread, records every system call that thread makes (strace attached to its TID only,
# io_uring_enter left out, with a stack trace each), drives each SMB command family against it
# step by step (scripts/lib/fs-inventory-client.py: python smbprotocol, one connection), and
# prints per step the calls the thread made per request and the backend function that made each
# (scripts/lib/fs-inventory-summary.py). Needs root (a Unix account, a loop device, strace).
#
#   scripts/fs-syscalls-inventory.sh [--fs ext4|tmpfs] [--reps N] [--bin PATH] [--out FILE]
#
#   --fs     the share's file system: ext4 on a 512 MiB loop device (default), tmpfs, or fuse
#            (scripts/stall-fuse.py mirroring an ext4 loop device: its log says which thread
#            made each FUSE request, summarised per step as well; needs mfusepy in PY)
#   --reps   requests per step (default 4)
#   --bin    the ringshare binary (default target/release/ringshare; build it with --release:
#            the stacks need its symbols, which the release profile keeps, debug = 1). strace
#            unwinds a plain release build only a frame or two; for whole stacks (and the core
#            function that asked) build one with frame pointers apart:
#              CARGO_TARGET_DIR=target-fp RUSTFLAGS="-C force-frame-pointers=yes" \
#                cargo build --release -p ringshare
#            and pass --bin target-fp/release/ringshare
#   --out    where the summary goes (default: stdout); the strace log (the calls within the
#            steps' marks) and the steps are kept beside it (FILE.strace, FILE.steps; with
#            --fs fuse also the file system's log of requests, FILE.fuse)
#
# Every process this starts (server, strace) is stopped by PID on exit; the loop device is
# unmounted and detached.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
FS=ext4
REPS=4
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/ringshare
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
    --fs) FS=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --bin) BIN=$2; shift ;;
    --out) OUT=$2; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
PY=${PY:-python3}
"$PY" -c 'import smbprotocol' 2>/dev/null || {
    echo "needs python smbprotocol (PY=/path/to/venv/bin/python; pip install smbprotocol==1.17.0)" >&2
    exit 2
}
[ -x "$BIN" ] || { echo "no $BIN (cargo build --release -p ringshare)" >&2; exit 2; }

W=$(mktemp -d /tmp/fsinv.XXXXXX)
SHARE=$W/share
PORT=${PORT:-4471}
USER_NAME=rsfsinv
PASS=inventory
PIDS=()
LOOP=""
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    done
    mountpoint -q "$SHARE" && umount "$SHARE"
    mountpoint -q "$W/under" 2>/dev/null && umount "$W/under"
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT INT TERM

mkdir -p "$SHARE"
case "$FS" in
ext4)
    truncate -s 512M "$W/img"
    mkfs.ext4 -q -F "$W/img"
    LOOP=$(losetup -f --show "$W/img")
    mount "$LOOP" "$SHARE"
    ;;
tmpfs) mount -t tmpfs -o size=512m tmpfs "$SHARE" ;;
fuse)
    mkdir -p "$W/under"
    truncate -s 512M "$W/img"
    mkfs.ext4 -q -F "$W/img"
    LOOP=$(losetup -f --show "$W/img")
    mount "$LOOP" "$W/under"
    setsid "$PY" scripts/stall-fuse.py "$W/under" "$SHARE" --log "$W/fuse.log" >"$W/fuse.out" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1 50); do mountpoint -q "$SHARE" && break; sleep 0.1; done
    mountpoint -q "$SHARE" || { cat "$W/fuse.out" >&2; exit 1; }
    ;;
*) echo "--fs ext4|tmpfs|fuse" >&2; exit 2 ;;
esac
getent passwd "$USER_NAME" >/dev/null || useradd -M -s /usr/sbin/nologin "$USER_NAME"
chown "$USER_NAME" "$SHARE"

cat >"$W/rs.conf" <<EOF
[global]
smb passwd file = $W/smbpasswd
listen = 127.0.0.1:$PORT
[share]
path = $SHARE
read only = no
EOF
printf '%s\n%s\n' "$PASS" "$PASS" | "$BIN" user add --config "$W/rs.conf" --password-stdin "$USER_NAME" >/dev/null
setsid "$BIN" serve --config "$W/rs.conf" --threads 1 </dev/null >"$W/log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 1 100); do
    ss -Htln "sport = :$PORT" | grep -q . && break
    kill -0 "$SERVER" || { cat "$W/log" >&2; exit 1; }
    sleep 0.1
done

TIDS=()
for t in /proc/"$SERVER"/task/*; do
    case "$(cat "$t/comm")" in ringshare-ring*) TIDS+=("${t##*/}") ;; esac
done
[ ${#TIDS[@]} -eq 1 ] || { echo "expected one I/O thread, found ${#TIDS[@]}: ${TIDS[*]}" >&2; exit 1; }
TID=${TIDS[0]}
echo "server $SERVER, I/O thread $TID ($(cat /proc/"$SERVER"/task/"$TID"/comm)), share on $FS ($(stat -f -c %T "$SHARE"))" >&2

RAW=$W/strace
strace -tt -k -p "$TID" -e 'trace=!io_uring_enter' -o "$RAW" 2>"$W/strace.err" &
STRACE=$!
PIDS+=("$STRACE")
sleep 1

"$PY" scripts/lib/fs-inventory-client.py --port "$PORT" --user "$USER_NAME" --password "$PASS" \
    --share share --reps "$REPS" >"$W/steps"
sleep 0.5
kill "$STRACE"
wait "$STRACE" 2>/dev/null || true

FUSELOG=()
[ "$FS" = fuse ] && FUSELOG=("$W/fuse.log" "$TID")
head_line="# scripts/fs-syscalls-inventory.sh --fs $FS --reps $REPS ($(date -u +%F), $(uname -r), $(git rev-parse --short HEAD))"
if [ -n "$OUT" ]; then
    "$PY" scripts/lib/fs-inventory-summary.py --trim "$RAW" "$W/steps" >"$OUT.strace"
    cp "$W/steps" "$OUT.steps"
    [ "$FS" = fuse ] && cp "$W/fuse.log" "$OUT.fuse"
    { echo "$head_line"; "$PY" scripts/lib/fs-inventory-summary.py "$RAW" "$W/steps" "${FUSELOG[@]}"; } >"$OUT"
    echo "summary in $OUT (raw: $OUT.strace, $OUT.steps)" >&2
else
    echo "$head_line"
    "$PY" scripts/lib/fs-inventory-summary.py "$RAW" "$W/steps" "${FUSELOG[@]}"
fi
