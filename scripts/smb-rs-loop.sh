#!/usr/bin/env bash
# The smb-rs harness (interop/smb-rs, its `--quic` run) N times against one ringshare server,
# over QUIC or TCP: counts the runs that failed, the runs whose logon smb-rs had to retry (its
# own race, see the harness's `logon`) and runs past RUNLIMIT seconds (hangs). For a client
# fault that shows once in tens or hundreds of runs; BUSY=2 adds two busy loops on the CPUs.
#
#   scripts/smb-rs-loop.sh [RINGSHARE_BINARY]
#   env: MODE=quic|tcp (quic) N=200 MIB=1 RUNLIMIT=30 PORT=14471 BUSY=0 STOP= (stop at a failure)
# Needs root (the share belongs to the account rsinterop, made if missing) and the harness
# built (scripts/install-deps.sh --test or scripts/interop-smb-rs.sh build it).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RS=${1:-$ROOT/target/release/ringshare}
H=${INTEROP_TARGET:-$ROOT/target/interop-smb-rs}/release/ringshare-interop-smb-rs
N=${N:-200} MODE=${MODE:-quic} PORT=${PORT:-14471} BUSY=${BUSY:-0}
[ -x "$H" ] || { echo "no harness at $H: run scripts/interop-smb-rs.sh once" >&2; exit 2; }
W=$(mktemp -d /tmp/rs-smbrs-loop.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/share"
cat >"$W/rs.conf" <<EOC
[global]
listen = 127.0.0.1:$PORT
smb passwd file = $W/smbpasswd
log level = 2
server smb transports = tcp, quic:$PORT
[share]
path = $W/share
read only = no
EOC
getent passwd rsinterop >/dev/null || useradd -M -s /usr/sbin/nologin rsinterop
chown rsinterop "$W/share"
printf 'interop\ninterop\n' | "$RS" user add --config "$W/rs.conf" --password-stdin rsinterop >/dev/null
"$RS" serve --config "$W/rs.conf" </dev/null >"$W/log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
    grep -q 'SMB over QUIC on udp' "$W/log" && ss -Htln "sport = :$PORT" | grep -q . && break
    sleep 0.1
done
cert=-
if [ "$MODE" = quic ]; then
    pem=$(grep -o '/[^ ]*cert\.pem' "$W/log" | head -1)
    [ -n "$pem" ] || { echo "the server did not say where its certificate is:" >&2; cat "$W/log" >&2; exit 2; }
    openssl x509 -in "$pem" -outform der -out "$W/cert.der"
    cert=$W/cert.der
fi
for _ in $(seq 1 "$BUSY"); do
    sh -c 'while :; do :; done' &
    PIDS+=($!)
done
fails=0 retried=0 hung=0 i=0
for i in $(seq 1 "$N"); do
    if out=$(timeout "${RUNLIMIT:-30}" "$H" --quic "$cert" "127.0.0.1:$PORT" share rsinterop interop "${MIB:-1}" 2>&1); then
        :
    else
        rc=$?
        fails=$((fails + 1))
        [ "$rc" = 124 ] && hung=$((hung + 1))
        echo "run $i failed (exit $rc): $(printf '%s' "$out" | tail -c 2000)"
        [ -n "${STOP:-}" ] && break
    fi
    case "$out" in *"logging on again"*) retried=$((retried + 1)) ;; esac
done
echo "smb-rs harness over $MODE, $i runs (busy loops: $BUSY): $fails failed ($hung past ${RUNLIMIT:-30} s), $retried retried the logon"
[ "$fails" = 0 ]
