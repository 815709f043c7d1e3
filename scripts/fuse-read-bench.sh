#!/usr/bin/env bash
# READ throughput on a FUSE share (issue 33; docs/cluster-internals.md, "File system calls off
# the I/O thread"): scripts/stall-fuse.py (a passthrough FUSE mount of an ext4 loop device,
# here never stalled) holds a 256 MiB file; each ringshare build given serves it with ONE I/O
# thread (`fs calls off io thread` auto: a FUSE share is offloaded, every READ asks a file
# system job for its checks), and `ringshare bench` reads it: rand-read 4k at queue depth 32
# and seq-read 1m at queue depth 16, all on one open. Builds run in turn, round after round
# (their order reversed every other round). Prints one line per run and the medians. Needs
# root, python with mfusepy (PY=...).
#
#   scripts/fuse-read-bench.sh [--runs N] [--duration S] LABEL=PATH/TO/RINGSHARE ...
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=3
DUR=8
BINS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS=$2; shift ;;
    --duration) DUR=$2; shift ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    *=*) BINS+=("$1") ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ ${#BINS[@]} -gt 0 ] || { echo "give LABEL=PATH builds" >&2; exit 2; }
PY=${PY:-python3}
"$PY" -c 'import mfusepy' 2>/dev/null || { echo "needs python mfusepy (PY=...)" >&2; exit 2; }
W=$(mktemp -d /tmp/fuseread.XXXXXX)
PORT=${PORT:-4474}
USER_NAME=rsfsinv
PASS=inventory
PIDS=()
LOOP=""
SERVER=""
. scripts/lib/fuse-share.sh
cleanup() {
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null
    fuse_share_cleanup
}
trap cleanup EXIT INT TERM

fuse_share_under
head -c 256M /dev/urandom >"$W/under/big"
chown -R "$USER_NAME" "$W/under"
fuse_share_mount --log /dev/null --flag "$W/never"
cat "$W/share/big" >/dev/null

CLIENT=${BINS[0]#*=}
fuse_share_config "$CLIENT"

echo "# scripts/fuse-read-bench.sh --runs $RUNS --duration $DUR ($(date -u +%FT%TZ), $(uname -r), $(git rev-parse --short HEAD)): one I/O thread, stall-fuse.py passthrough, 256 MiB file"
RES="$W/results"
: >"$RES"
for r in $(seq 1 "$RUNS"); do
    order=("${BINS[@]}")
    if [ $((r % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#BINS[@]} - 1; i >= 0; i--)); do order+=("${BINS[$i]}"); done
    fi
    for b in "${order[@]}"; do
        label=${b%%=*} bin=${b#*=}
        setsid "$bin" serve --config "$W/rs.conf" --threads 1 </dev/null >"$W/log" 2>&1 &
        SERVER=$!
        for _ in $(seq 1 100); do
            ss -Htln "sport = :$PORT" | grep -q . && break
            kill -0 "$SERVER" || { cat "$W/log" >&2; exit 1; }
            sleep 0.1
        done
        for row in "rand-read 4k qd32|rand-read --file big --file-size 256m --io-size 4k --queue-depth 32" \
            "seq-read 1m qd16|seq-read --file big --file-size 256m --io-size 1m --queue-depth 16"; do
            name=${row%%|*} args=${row#*|}
            # shellcheck disable=SC2086
            line=$("$CLIENT" bench "//127.0.0.1:$PORT/share" -U "$USER_NAME%$PASS" $args \
                --duration "$DUR" --server-pid "$SERVER" --json 2>"$W/err") || { cat "$W/err" >&2; }
            echo "$r $label $name $line"
            echo "$label|$name|$line" >>"$RES"
        done
        kill "$SERVER"
        wait "$SERVER" 2>/dev/null || true
        SERVER=""
    done
done
python3 - "$RES" <<'EOF3'
import json, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    label, name, js = l.rstrip("\n").split("|", 2)
    if not js:
        continue
    j = json.loads(js)
    rows.setdefault((name, label), []).append(j)
print("medians:")
for (name, label), runs in sorted(rows.items()):
    def med(f):
        v = [f(r) for r in runs]
        return statistics.median(v)
    print(f"  {name:18} {label:10} {med(lambda r: r['gb_per_s'] * 1000):9.1f} MB/s  {med(lambda r: r['iops']):9.0f} IOPS  "
          f"p50 {med(lambda r: r['latency_us']['p50']):8.0f} us  p99 {med(lambda r: r['latency_us']['p99']):8.0f} us  "
          f"server CPU {med(lambda r: r['server_cpu_s_per_gib'] or 0):.2f} s/GiB  ({len(runs)} runs)")
EOF3
