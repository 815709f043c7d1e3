#!/usr/bin/env bash
# Soak test: a release `ringshare serve` on a tmpfs share, `ringshare bench mixed --verify` with
# N connections for M minutes against it, the server's RSS sampled every 10 s.
#
#   scripts/soak.sh [--minutes 10] [--clients 16] [--file-size 64m] [--io-size 256k]
#                   [--rss-growth-mib 64] [--no-build] [--reconnect [--drop-every 250ms]]
#
# With --reconnect the workload is `bench reconnect` instead: each connection works on a durable
# open (DH2Q, RWH lease) with verified random writes and reads, drops its TCP connection about
# every --drop-every with requests in flight, takes the open back with DH2C and sends again what
# was not answered; at the end every block is compared with its last acknowledged write.
#
# Prints the bench report (errors and verify mismatches are both counted as errors) and the RSS
# series. Exits non-zero when the bench saw any error or mismatch, when the server died, or when
# its RSS grew by more than --rss-growth-mib after the warm-up (the first fifth of the run, at
# least 30 s). Traffic stays on 127.0.0.1. Needs root for the tmpfs mount; without root the
# share goes to a directory under /dev/shm (also memory-backed).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
clients=16
file_size=64m
io_size=256k
rss_growth_mib=64
build=1
workload=mixed
drop_every=250ms
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --file-size) file_size="$2"; shift 2 ;;
        --io-size) io_size="$2"; shift 2 ;;
        --rss-growth-mib) rss_growth_mib="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --reconnect) workload=reconnect; shift ;;
        --drop-every) drop_every="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
case "$minutes" in ''|*[!0-9]*) echo "soak.sh: --minutes takes whole minutes" >&2; exit 2 ;; esac
[ "$minutes" -ge 1 ] || { echo "soak.sh: --minutes must be at least 1" >&2; exit 2; }

[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if [ "$build" = 1 ]; then
    cargo build --release -p ringshare
fi
bin="$PWD/target/release/ringshare"
[ -x "$bin" ] || { echo "soak.sh: $bin not built" >&2; exit 2; }

work="$(mktemp -d /tmp/ringshare-soak.XXXXXX)"
share="$work/share"
mkdir -p "$share"
mounted=0
if [ "$(id -u)" = 0 ]; then
    mount -t tmpfs -o size=4g,mode=0777 tmpfs "$share"
    mounted=1
else
    share="$(mktemp -d /dev/shm/ringshare-soak.XXXXXX)"
fi
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    [ "$mounted" = 1 ] && umount -l "$share" 2>/dev/null || true
    [ "$mounted" = 0 ] && rm -rf "$share"
    rm -rf "$work"
    [ "${made_user:-0}" = 1 ] && userdel "$user" 2>/dev/null || true
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
conf="$work/ringshare.conf"
cat > "$conf" <<EOF
[global]
	listen = 127.0.0.1:$port
	smb passwd file = $work/smbpasswd
	log level = 1
[soak]
	path = $share
	read only = no
EOF
user=rssoak
pass=Soak-Pass-1
# As root the server acts as each user's Unix account: make one for the soak user (removed at exit).
made_user=0
if [ "$(id -u)" = 0 ] && ! id -u "$user" >/dev/null 2>&1; then
    useradd -M -N -s /usr/sbin/nologin "$user"
    made_user=1
fi
printf '%s\n%s\n' "$pass" "$pass" | "$bin" user add "$user" --password-stdin --config "$conf" >/dev/null

"$bin" serve --config "$conf" > "$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log"; echo "soak.sh: server exited" >&2; exit 1; }
    sleep 0.1
done

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status" 2>/dev/null || echo 0; }

threads=2
[ "$clients" -lt 2 ] && threads=1
if [ "$workload" = reconnect ]; then
    what="reconnect: durable opens, connections dropped every ~$drop_every and taken back with DH2C"
    extra=(--drop-every "$drop_every")
else
    what="mixed 70/30 read/write, --verify"
    extra=(--verify)
fi
echo "soak: ringshare $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $clients connections," \
     "$what, io $io_size, file $file_size each, $minutes min," \
     "share on $([ "$mounted" = 1 ] && echo tmpfs || echo /dev/shm)"
"$bin" bench "//127.0.0.1:$port/soak" -U "$user%$pass" "$workload" "${extra[@]}" \
    --connections "$clients" --threads "$threads" --queue-depth 8 --io-size "$io_size" \
    --file-size "$file_size" --duration "${minutes}m" --server-pid "$server_pid" \
    > "$work/bench.out" 2>"$work/bench.err" &
bench_pid=$!

warmup_s=$(( minutes * 60 / 5 ))
[ "$warmup_s" -lt 30 ] && warmup_s=30
series=()
baseline=""
peak_after=0
t=0
while kill -0 "$bench_pid" 2>/dev/null; do
    sleep 10
    t=$((t + 10))
    kill -0 "$server_pid" 2>/dev/null || break
    r="$(rss_kib)"
    series+=("${t}s:$((r / 1024))MiB")
    if [ "$t" -ge "$warmup_s" ]; then
        [ -z "$baseline" ] && baseline="$r"
        [ "$r" -gt "$peak_after" ] && peak_after="$r"
    fi
done
bench_rc=0
wait "$bench_pid" || bench_rc=$?
cat "$work/bench.out"

fail=0
echo "server RSS every 10 s: ${series[*]}"
if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "FAIL: the server died during the soak"; tail -50 "$work/serve.log"; fail=1
else
    echo "server peak RSS (VmHWM): $(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status") KiB"
fi
if [ "$workload" = reconnect ]; then
    if [ "$bench_rc" != 0 ] || ! grep -qx 'result: clean' "$work/bench.out"; then
        echo "FAIL: bench exited $bench_rc, or a read mismatched, a write was lost or a reconnect failed"
        tail -20 "$work/bench.err"; fail=1
    else
        echo "errors 0, mismatched reads 0, lost acknowledged writes 0, every drop reconnected"
    fi
elif [ "$bench_rc" != 0 ] || ! grep -qE '^  errors +0$' "$work/bench.out"; then
    echo "FAIL: bench exited $bench_rc or saw errors/mismatches"; tail -20 "$work/bench.err"; fail=1
else
    echo "errors 0, mismatches 0 (bench --verify counts a mismatch as an error)"
fi
if [ -n "$baseline" ]; then
    growth_kib=$((peak_after - baseline))
    echo "RSS after warm-up (${warmup_s}s): ${baseline} KiB, peak after it ${peak_after} KiB, growth ${growth_kib} KiB (bound $((rss_growth_mib * 1024)) KiB)"
    if [ "$growth_kib" -gt $((rss_growth_mib * 1024)) ]; then
        echo "FAIL: RSS grew more than ${rss_growth_mib} MiB after warm-up"; fail=1
    fi
else
    echo "FAIL: no RSS sample after the warm-up"; fail=1
fi
[ "$fail" = 0 ] && echo "soak: PASS" || echo "soak: FAIL"
exit "$fail"
