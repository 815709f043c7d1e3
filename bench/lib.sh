# bench/lib.sh: what bench/compare and bench/writes share, sourced by both: the data set, the
# benchmark user, the memory warm-up, starting ringshare and smbd on loopback ports, one
# `ringshare bench` run, an `smbclient get|put` timed with the server's CPU, and stopping
# every server started here on exit.
#
# The sourcing script sets ROOT (the repository) and OUT (its results directory) before
# calling anything, and RS (the `ringshare bench` client) and DUR (a run's duration) before
# `lib_bench`. Rows go to $RESULTS, one JSON object a line:
# {"server", "label", "client", "result"}.

DATA=${DATA:-/dev/shm/rscompare-data}
USER_NAME=rsbench
PASS=bench
HOST=127.0.0.1
# Writes into a new file allocate their pages, and on a virtual machine memory the guest never
# touched since boot costs far more to touch first (here 2.0 CPU s/GiB against 1.2 for memory
# touched before and handed back, docs/benchmarks.md, issue 34): whichever server wrote a new
# file first would pay it alone. `lib_warm_memory` touches what the write rows need once, before
# any server runs; before each new-file row wait SETTLE seconds after removing the last one
# (this VM hands freed memory back to its host after about 2 s), so that every server writes
# into memory in the same state.
SETTLE=${SETTLE:-4}

# Put before every server's start and every client's run (bench/rows --split-cpus: `taskset -c`
# with a CPU for the servers and another for the clients); empty: no placement.
SERVER_PIN=()
CLIENT_PIN=()

PIDS=()
SERVERS=()
declare -A PORT_OF PID_OF CERT_OF
# QUIC=1: ringshare servers also serve SMB over QUIC on the UDP port of their TCP port's number
# (rows *-quic), with the self-signed certificate they make at start (CERT_OF).
QUIC=${QUIC:-0}

lib_cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
}
trap lib_cleanup EXIT INT TERM

say() { echo "== $*" >&2; }

# The CPU the figures were measured on.
. "$(dirname "${BASH_SOURCE[0]}")/cpu.sh"

# The data set: a 2 GiB random file (big) and a 2 GiB file the overwrite rows write (rsover.bin)
# in the tmpfs directory $DATA, owned by the benchmark user (created when missing).
lib_data() {
    mkdir -p "$DATA"
    if [ ! -f "$DATA/big" ] || [ "$(stat -c %s "$DATA/big")" != 2147483648 ]; then
        say "creating $DATA/big (2 GiB random)"
        head -c 2G /dev/urandom >"$DATA/big"
    fi
    if [ ! -f "$DATA/rsover.bin" ] || [ "$(stat -c %s "$DATA/rsover.bin")" != 2147483648 ]; then
        say "creating $DATA/rsover.bin (2 GiB, overwritten by the write workload)"
        cp "$DATA/big" "$DATA/rsover.bin"
    fi
    rm -f "$DATA"/rsbench-* "$DATA"/rsmeta-* "$DATA/put.bin" "$DATA/rsnew.bin"
    if ! getent passwd "$USER_NAME" >/dev/null; then
        useradd -M -s /bin/false "$USER_NAME" 2>/dev/null ||
            { echo "cannot create user $USER_NAME (run as root)" >&2; exit 1; }
    fi
    chown -R "$USER_NAME" "$DATA"
}

# 10,000 small files in $DATA/many (the list row), created when missing.
lib_many() {
    [ -f "$DATA/many/f09999" ] && return 0
    say "creating $DATA/many (10,000 small files)"
    python3 - "$DATA/many" <<'EOF'
import os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
for i in range(10000):
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(512))
EOF
}

# Touches 6 GiB of memory once (2 GiB new file + 2 GiB put + room), see SETTLE above.
lib_warm_memory() {
    say "touching 6 GiB of memory once (a scratch file in $DATA, removed)"
    head -c 6G /dev/zero >"$DATA/rswarm.bin" 2>/dev/null || true
    rm -f "$DATA/rswarm.bin"
}

# Removes FILE in $DATA and waits SETTLE seconds (before a row that writes a new file).
lib_fresh() {
    rm -f "$DATA/$1"
    sleep "$SETTLE"
}

wait_port() { # port pid
    for _ in $(seq 1 100); do
        ss -Htln "sport = :$1" | grep -q . && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

port_free() { ! ss -Htln "sport = :$1" | grep -q .; }

# Starts ringshare binary BIN as server NAME on PORT, its files in DIR, sharing $DATA as "share".
lib_start_ringshare() { # name bin port dir
    local name=$1 bin=$2 port=$3 b=$4 pid
    mkdir -p "$b"
    port_free "$port" || { echo "port $port is taken" >&2; return 1; }
    local quic=""
    [ "$QUIC" = 1 ] && quic="server smb transports = tcp, quic:$port"
    cat >"$b/rs.conf" <<EOF
[global]
smb passwd file = $b/smbpasswd
listen = $HOST:$port
$quic
[share]
path = $DATA
read only = no
EOF
    printf '%s\n%s\n' "$PASS" "$PASS" | "$bin" user add --config "$b/rs.conf" --password-stdin "$USER_NAME" >/dev/null
    setsid "${SERVER_PIN[@]}" "$bin" serve --config "$b/rs.conf" </dev/null >"$b/log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_port "$port" "$pid" || { cat "$b/log" >&2; return 1; }
    SERVERS+=("$name"); PORT_OF[$name]=$port; PID_OF[$name]=$pid
    [ "$QUIC" = 1 ] && CERT_OF[$name]=$b/tls/cert.pem
    return 0
}

# Starts the installed smbd as server NAME on PORT, its files in DIR, with the share's extra
# line VFS (e.g. "vfs objects = io_uring", or empty).
lib_start_smbd() { # name port dir vfs
    local name=$1 port=$2 b=$3 vfs=$4 pid
    mkdir -p "$b"/{private,lock,state,cache,pid,ncalrpc,log,bind-dns}
    chmod 700 "$b/private"
    port_free "$port" || { echo "port $port is taken" >&2; return 1; }
    cat >"$b/smb.conf" <<EOF
[global]
    netbios name = RSCMP$port
    workgroup = WORKGROUP
    server role = standalone server
    security = user
    map to guest = never
    passdb backend = tdbsam:$b/private/passdb.tdb
    private dir = $b/private
    lock directory = $b/lock
    state directory = $b/state
    cache directory = $b/cache
    pid directory = $b/pid
    ncalrpc dir = $b/ncalrpc
    binddns dir = $b/bind-dns
    log file = $b/log/log.smbd
    log level = 0
    smb ports = $port
    interfaces = $HOST
    bind interfaces only = yes
    disable netbios = yes
    load printers = no
    printing = bsd
    printcap name = /dev/null
    disable spoolss = yes
[share]
    path = $DATA
    read only = no
    $vfs
EOF
    printf '%s\n%s\n' "$PASS" "$PASS" | smbpasswd -c "$b/smb.conf" -a -s "$USER_NAME" >"$b/smbpasswd.out" 2>&1 ||
        { cat "$b/smbpasswd.out" >&2; return 1; }
    setsid "${SERVER_PIN[@]}" smbd --foreground --no-process-group --configfile="$b/smb.conf" </dev/null >"$b/log/stdout" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_port "$port" "$pid" || { tail -n 20 "$b/log/log.smbd" "$b/log/stdout" >&2; return 1; }
    SERVERS+=("$name"); PORT_OF[$name]=$port; PID_OF[$name]=$pid
}

# Starts rocketsmbd (installed with `cargo install` into target/rocketsmbd on first use, or
# ROCKET_ROOT, or found on PATH) as server NAME on PORT, its files in DIR.
lib_start_rocketsmbd() { # name port dir
    local name=$1 port=$2 b=$3
    mkdir -p "$b"
    # Installed once, outside $BASE (which every run empties).
    local inst=${ROCKET_ROOT:-$ROOT/target/rocketsmbd}
    if ! command -v rocketsmbd >/dev/null && [ ! -x "$inst/bin/rocketsmbd" ]; then
        say "cargo install rocketsmbd (into $inst)"
        cargo install -q --root "$inst" rocketsmbd >"$b/install.log" 2>&1 ||
            { echo "rocketsmbd: cargo install failed; skipped (see $b/install.log)" >&2; return 1; }
    fi
    local bin
    bin=$(command -v rocketsmbd || echo "$inst/bin/rocketsmbd")
    # rocketsmbd 1.4 reads a TOML file (its rocketsmbd.toml.example): listen address,
    # [[share]] and [[user]] sections. Same share and user as the other servers.
    cat >"$b/rocketsmbd.toml" <<TOML
listen = "$HOST:$port"
workers = 0
log_level = 0
require_signing = false
encrypt = false

[[share]]
name = "share"
path = "$DATA"
read_only = false

[[user]]
name = "$USER_NAME"
password = "$PASS"
TOML
    setsid "${SERVER_PIN[@]}" "$bin" --config "$b/rocketsmbd.toml" </dev/null >"$b/log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    if ! wait_port $port "$pid"; then
        echo "rocketsmbd: did not start (see $b/log); skipped" >&2
        return 1
    fi
    SERVERS+=("$name"); PORT_OF[$name]=$port; PID_OF[$name]=$pid
}

# Starts, from port PORT0 on, each ringshare binary LABEL=PATH under its label, then with SMBD=1
# smbd (default vfs) and smbd-io_uring, then with ROCKET=1 rocketsmbd; their files under $BASE.
# bench/rows and bench/profile start their servers this way.
lib_start_servers() { # port0 smbd rocket LABEL=PATH...
    local port=$1 smbd=$2 rocket=$3 spec name
    shift 3
    for spec in "$@"; do
        name=${spec%%=*}
        lib_start_ringshare "$name" "${spec#*=}" "$port" "$BASE/$name" || exit 1
        port=$((port + 1))
    done
    if [ "$smbd" = 1 ]; then
        lib_start_smbd smbd "$port" "$BASE/smbd" "" || exit 1
        lib_start_smbd smbd-io_uring $((port + 1)) "$BASE/smbd-io_uring" "vfs objects = io_uring" || exit 1
        port=$((port + 2))
    fi
    if [ "$rocket" = 1 ]; then
        lib_start_rocketsmbd rocketsmbd "$port" "$BASE/rocketsmbd" || exit 1
    fi
}

# One `ringshare bench` run against SERVER; its JSON line goes to $RESULTS under LABEL.
lib_bench() { # server label workload extra-args...
    local s=$1 label=$2 w=$3 line
    shift 3
    # Let the previous run's connections go (smbd's per-connection child must be gone, or its
    # CPU is counted at the start of this run and missing at the end).
    sleep 0.5
    if ! line=$("${CLIENT_PIN[@]}" "$RS" bench "//$HOST:${PORT_OF[$s]}/share" -U "$USER_NAME%$PASS" "$w" \
        --duration "$DUR" --server-pid "${PID_OF[$s]}" --json "$@" 2>"$OUT/last.err"); then
        say "$s $label: errors ($(head -c 300 "$OUT/last.err"))"
    fi
    [ -n "$line" ] || return 0
    echo "{\"server\":\"$s\",\"label\":\"$label\",\"client\":\"ringshare-bench\",\"result\":$line}" >>"$RESULTS"
}

# `smbclient get big` (to /dev/null) or `put big put.bin` against SERVER, timed around the
# process; server CPU is the server process's and all its descendants' (smbd forks one per
# connection) user + system time from /proc, with reaped children's, around the transfer.
lib_smbclient() { # server get|put
    local s=$1 op=$2 cmd
    case $op in
    get) cmd="get big /dev/null" ;;
    put) cmd="put $DATA/big put.bin" ;;
    esac
    python3 - "$s" "$op" "$RESULTS" "${PID_OF[$s]}" "${CLIENT_PIN[@]}" smbclient "//$HOST/share" -p "${PORT_OF[$s]}" \
        -U "$USER_NAME%$PASS" -c "$cmd" <<'EOF'
import json, os, resource, subprocess, sys, time
server, op, results, pid = sys.argv[1:5]
cmd = sys.argv[5:]
def stat(p):
    try:
        f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
        return int(f[1]), sum(int(x) for x in f[11:15]) / 100.0
    except Exception:
        return None
def cpu(root):
    procs = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            st = stat(e)
            if st:
                procs[int(e)] = st
    if int(root) not in procs:
        return None
    tree, total, i = [int(root)], 0.0, 0
    while i < len(tree):
        total += procs[tree[i]][1]
        tree += [p for p, (pp, _) in procs.items() if pp == tree[i] and p not in tree]
        i += 1
    return total
s0 = cpu(pid)
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.monotonic()
p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
t = time.monotonic() - t0
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
time.sleep(0.3)  # let smbd reap its per-connection child, so that its CPU shows in cutime
s1 = cpu(pid)
n = 2 << 30
gib = n / (1 << 30)
c = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
res = {"workload": "seq-read" if op == "get" else "seq-write", "io_size": 0,
       "gb_per_s": n / t / 1e9, "elapsed_s": t, "bytes": n,
       "client_cpu_s_per_gib": c / gib,
       "server_cpu_s_per_gib": (s1 - s0) / gib if s0 is not None and s1 is not None else None,
       "errors": 0 if p.returncode == 0 else 1}
if p.returncode != 0:
    print("smbclient %s on %s failed: %s" % (op, server, p.stderr.decode()[-300:]), file=sys.stderr)
with open(results, "a") as f:
    f.write(json.dumps({"server": server, "label": "smbclient " + op, "client": "smbclient",
                        "result": res}) + "\n")
EOF
}

# One row of bench/compare against SERVER, by its short name (bench/rows takes the same names):
# the one place each row's workload and arguments are written, so every script measures the same.
lib_row() { # server row
    local s=$1
    case $2 in
    read64k) lib_bench "$s" "seq-read 64k" seq-read --file big --io-size 64k --queue-depth 16 ;;
    read256k) lib_bench "$s" "seq-read 256k" seq-read --file big --io-size 256k --queue-depth 16 ;;
    read) lib_bench "$s" "seq-read 1m" seq-read --file big --io-size 1m --queue-depth 16 ;;
    read4m) lib_bench "$s" "seq-read 4m" seq-read --file big --io-size 4m --queue-depth 8 ;;
    # 4 MiB READs with as many bytes in flight as the 1m row (16 MiB): the READ's size alone.
    read4m-qd4) lib_bench "$s" "seq-read 4m qd4" seq-read --file big --io-size 4m --queue-depth 4 ;;
    # SMB over QUIC (ringshare servers started with QUIC=1; others have no row) and, to compare
    # with, TCP with SMB encryption (AES-128-GCM, the client's first choice).
    read-quic)
        [ -n "${CERT_OF[$s]:-}" ] || return 0
        lib_bench "$s" "seq-read 1m quic" seq-read --file big --io-size 1m --queue-depth 16 \
            --transport quic --server-cert "${CERT_OF[$s]}" ;;
    over-quic)
        [ -n "${CERT_OF[$s]:-}" ] || return 0
        lib_bench "$s" "seq-write 1m overwrite quic" seq-write --file rsover.bin --file-size 2g \
            --io-size 1m --queue-depth 16 --transport quic --server-cert "${CERT_OF[$s]}" ;;
    read-sign) lib_bench "$s" "seq-read 1m signed" seq-read --file big --io-size 1m --queue-depth 16 --sign --dialect 3.1.1 ;;
    over-sign) lib_bench "$s" "seq-write 1m overwrite signed" seq-write --file rsover.bin --file-size 2g --io-size 1m --queue-depth 16 --sign --dialect 3.1.1 ;;
    read-enc) lib_bench "$s" "seq-read 1m encrypted" seq-read --file big --io-size 1m --queue-depth 16 --encrypt ;;
    over-enc) lib_bench "$s" "seq-write 1m overwrite encrypted" seq-write --file rsover.bin --file-size 2g --io-size 1m --queue-depth 16 --encrypt ;;
    rand4k) lib_bench "$s" "rand-read 4k qd32" rand-read --file big --io-size 4k --queue-depth 32 ;;
    new)
        lib_fresh rsnew.bin
        lib_bench "$s" "seq-write 1m new file" seq-write --file rsnew.bin --file-size 2g --bytes 2g --io-size 1m --queue-depth 16
        rm -f "$DATA/rsnew.bin" ;;
    over) lib_bench "$s" "seq-write 1m overwrite" seq-write --file rsover.bin --file-size 2g --io-size 1m --queue-depth 16 ;;
    meta) lib_bench "$s" "metadata" metadata --queue-depth 16 ;;
    list) lib_bench "$s" "list" list --dir many ;;
    # Four clients that keep the 10,000-entry listing cached under an RH lease while another
    # client adds a file to the directory twice a second (crates/ringshare/src/bench/dircache.rs).
    list-lease) lib_bench "$s" "list leased, 2 changes/s" list --dir many --dir-lease --dir-changes 2 --connections 4 ;;
    echo) lib_bench "$s" "echo" echo --queue-depth 32 ;;
    get) lib_smbclient "$s" get ;;
    put)
        lib_fresh put.bin
        lib_smbclient "$s" put
        rm -f "$DATA/put.bin" ;;
    *) echo "lib_row: unknown row $2" >&2; return 1 ;;
    esac
}
