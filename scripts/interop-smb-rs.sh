#!/usr/bin/env bash
# The independent Rust SMB client `smb` (smb-rs 0.12.1, crates.io) against ringshare with
# SMB 3.1.1 compression: interop/smb-rs writes a 6 MiB compressible file (text, then zeros),
# reads it back, checks every byte, and fails unless compressed frames went both ways.
# interop/smb-rs is its own cargo workspace (smb needs Rust 1.89 and tokio), built here, never
# by the main workspace's build.
#
#   scripts/interop-smb-rs.sh [RINGSHARE_BINARY]
#   (CARGO_TARGET_DIR for the harness: $INTEROP_TARGET, default target/interop-smb-rs)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RS=${1:-$ROOT/target/release/ringshare}
TARGET=${INTEROP_TARGET:-$ROOT/target/interop-smb-rs}
PORT=${PORT:-4472}
WORK=$(mktemp -d /tmp/rs-interop-smbrs.XXXXXX)
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$ROOT/interop/smb-rs" && CARGO_TARGET_DIR=$TARGET cargo build --release --quiet)
mkdir -p "$WORK/share"
cat >"$WORK/rs.conf" <<EOF
[global]
smb passwd file = $WORK/smbpasswd
listen = 127.0.0.1:$PORT
[share]
path = $WORK/share
read only = no
EOF
if [ "$(id -u)" = 0 ]; then
    getent passwd rsinterop >/dev/null || useradd -M -s /usr/sbin/nologin rsinterop
    chown rsinterop "$WORK/share"
    USER_NAME=rsinterop
else
    USER_NAME=$(id -un)
fi
printf 'interop\ninterop\n' | "$RS" user add --config "$WORK/rs.conf" --password-stdin "$USER_NAME" >/dev/null
"$RS" serve --config "$WORK/rs.conf" </dev/null >"$WORK/log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
    ss -Htln "sport = :$PORT" | grep -q . && break
    sleep 0.1
done
"$TARGET/release/ringshare-interop-smb-rs" "127.0.0.1:$PORT" share "$USER_NAME" interop ||
    { echo "--- ringshare log" >&2; cat "$WORK/log" >&2; exit 1; }
