# shellcheck shell=bash
# Shared shell for scripts that start private SMB servers on loopback: free ports, waiting for a
# port, stopping a process tree by PID, a private Samba smbd and a ringshare server.
#
# Source it; it defines functions only and changes no shell options. Every server started here is
# started in its own session (setsid) with stdin from /dev/null, and is stopped by PID, never by
# name.

# Prints a TCP port on 127.0.0.1 that nothing listens on (from an ephemeral bind when python3 is
# there, else by probing a range with ss).
lib_free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
        return
    fi
    local p
    for p in $(seq $((40000 + RANDOM % 10000)) 60000); do
        if ! ss -Htln "sport = :$p" | grep -q .; then
            echo "$p"
            return
        fi
    done
    return 1
}

# lib_port_listening PORT: true when something listens on 127.0.0.1:PORT.
lib_port_listening() {
    ss -Htln "sport = :$1" | grep -q .
}

# lib_wait_port PID PORT SECONDS: waits until PORT listens; fails when PID dies or time runs out.
lib_wait_port() {
    local pid=$1 port=$2 secs=$3 i
    for ((i = 0; i < secs * 10; i++)); do
        lib_port_listening "$port" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# lib_descendants PID: prints all descendant PIDs of PID, children first.
lib_descendants() {
    local kids k
    kids=$(ps -o pid= --ppid "$1" 2>/dev/null)
    for k in $kids; do
        echo "$k"
        lib_descendants "$k"
    done
}

# lib_stop_tree PID [GRACE_SECONDS]: SIGTERM to PID, SIGKILL after the grace period (default 5),
# then SIGKILL to any descendant still there (smbd forks one child per connection).
lib_stop_tree() {
    local pid=$1 grace=${2:-5} kids i k
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kids=$(lib_descendants "$pid")
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < grace * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    for k in $kids; do
        kill -0 "$k" 2>/dev/null && kill -KILL "$k" 2>/dev/null
    done
    wait "$pid" 2>/dev/null
    return 0
}

# lib_samba_stop BASE: stops the smbd lib_samba_start started in BASE and the RPC helpers it
# started on demand (samba-dcerpcd, rpcd_*: Samba 4.22 runs them in a session of their own, so
# they are not smbd's descendants), found by their --configfile.
lib_samba_stop() {
    local base=$1
    lib_stop_tree "$LIB_SAMBA_PID"
    LIB_SAMBA_PID=
    pkill -TERM -f -- "--configfile=$base/smb.conf" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pgrep -f -- "--configfile=$base/smb.conf" >/dev/null || return 0
        sleep 0.1
    done
    pkill -KILL -f -- "--configfile=$base/smb.conf" 2>/dev/null
    return 0
}

# lib_client_conf DIR: writes DIR/smb.conf, a private client configuration that keeps smbclient
# and smbtorture away from the machine's /etc/samba/smb.conf and state directories.
# Prints the file's path.
lib_client_conf() {
    local d=$1
    mkdir -p "$d"/{lock,state,cache,private,log,ncalrpc}
    cat >"$d/smb.conf" <<EOF
[global]
    lock directory = $d/lock
    state directory = $d/state
    cache directory = $d/cache
    private dir = $d/private
    ncalrpc dir = $d/ncalrpc
    log file = $d/log/log.%m
    client min protocol = SMB2_02
EOF
    echo "$d/smb.conf"
}

# lib_samba_start BASE PORT SHARE_NAME SHARE_DIR USER PASS [EXTRA_SHARE_LINES]
# Starts a private Debian smbd: its own smb.conf and state directories under BASE, listening on
# 127.0.0.1:PORT only, one share SHARE_NAME at SHARE_DIR with NT ACLs and named streams in xattrs
# (acl_xattr, streams_xattr), EAs and DOS attributes stored, and USER (an existing Unix account) given PASS in a private passdb.
# Sets LIB_SAMBA_PID. Logs are in BASE/log.
lib_samba_start() {
    local base=$1 port=$2 share=$3 dir=$4 user=$5 pass=$6 extra=${7:-}
    mkdir -p "$base"/{private,lock,state,cache,pid,ncalrpc,log,bind-dns}
    chmod 700 "$base/private"
    cat >"$base/smb.conf" <<EOF
# private smbd for ringshare's scripts; generated, do not edit
[global]
    netbios name = RSREF
    workgroup = WORKGROUP
    server role = standalone server
    security = user
    map to guest = never
    passdb backend = tdbsam:$base/private/passdb.tdb
    private dir = $base/private
    lock directory = $base/lock
    state directory = $base/state
    cache directory = $base/cache
    pid directory = $base/pid
    ncalrpc dir = $base/ncalrpc
    binddns dir = $base/bind-dns
    log file = $base/log/log.smbd
    log level = 1
    max log size = 0
    smb ports = $port
    interfaces = 127.0.0.1
    bind interfaces only = yes
    disable netbios = yes
    load printers = no
    printing = bsd
    printcap name = /dev/null
    disable spoolss = yes
    usershare path =
    server min protocol = SMB2_02
    # a global option of vfs_fruit (shares with fruit only), as Samba's selftest sets it
    fruit:copyfile = yes

[$share]
    path = $dir
    read only = no
    browseable = yes
    vfs objects = ${SAMBA_VFS_OBJECTS:-streams_xattr acl_xattr}
    ea support = yes
    store dos attributes = yes
$extra
EOF
    if ! testparm -s "$base/smb.conf" >"$base/testparm.out" 2>&1; then
        cat "$base/testparm.out" >&2
        return 1
    fi
    if ! printf '%s\n%s\n' "$pass" "$pass" |
        smbpasswd -c "$base/smb.conf" -a -s "$user" >"$base/smbpasswd.out" 2>&1; then
        cat "$base/smbpasswd.out" >&2
        return 1
    fi
    setsid smbd --foreground --no-process-group --configfile="$base/smb.conf" \
        </dev/null >"$base/log/smbd.stdout" 2>&1 &
    LIB_SAMBA_PID=$!
    if ! lib_wait_port "$LIB_SAMBA_PID" "$port" 20; then
        echo "smbd did not start listening on 127.0.0.1:$port; its log:" >&2
        tail -n 30 "$base/log/log.smbd" "$base/log/smbd.stdout" >&2 2>/dev/null
        lib_stop_tree "$LIB_SAMBA_PID"
        LIB_SAMBA_PID=
        return 1
    fi
}

# lib_ringshare_start BIN BASE PORT SHARE_NAME SHARE_DIR USER PASS [EXTRA_SHARE_LINES]
# Writes BASE/ringshare.conf (with the lines of RINGSHARE_GLOBAL_EXTRA, if set, in [global]),
# adds USER with PASS through `ringshare user add --password-stdin`,
# and starts `ringshare serve --config`. Sets LIB_RINGSHARE_PID. Output is in BASE/serve.log.
lib_ringshare_start() {
    local bin=$1 base=$2 port=$3 share=$4 dir=$5 user=$6 pass=$7 extra=${8:-}
    mkdir -p "$base"
    cat >"$base/ringshare.conf" <<EOF
# ringshare server for ringshare's scripts; generated, do not edit
[global]
    listen = 127.0.0.1:$port
    # the private smbd's name too: a standalone server's SAM domain is named by it
    netbios name = RSREF
    smb passwd file = $base/smbpasswd
    server signing = auto
    server min protocol = SMB2_02
    server max protocol = SMB3_11
    map to guest = never
    log level = 1
${RINGSHARE_GLOBAL_EXTRA:-}
    # a global option of vfs_fruit (shares with fruit only), as Samba's selftest sets it
    fruit:copyfile = yes

[$share]
    path = $dir
    read only = no
    guest ok = no
    vfs objects = streams_xattr acl_xattr
$extra
EOF
    if [ ! -s "$base/smbpasswd" ]; then
        if ! printf '%s\n%s\n' "$pass" "$pass" |
            "$bin" user add "$user" --password-stdin --config "$base/ringshare.conf" \
                >"$base/user-add.log" 2>&1; then
            echo "ringshare user add failed:" >&2
            cat "$base/user-add.log" >&2
            return 1
        fi
    fi
    setsid "$bin" serve --config "$base/ringshare.conf" </dev/null >>"$base/serve.log" 2>&1 &
    LIB_RINGSHARE_PID=$!
    if ! lib_wait_port "$LIB_RINGSHARE_PID" "$port" 10; then
        echo "ringshare did not start listening on 127.0.0.1:$port; its output:" >&2
        tail -n 30 "$base/serve.log" >&2
        lib_stop_tree "$LIB_RINGSHARE_PID"
        LIB_RINGSHARE_PID=
        return 1
    fi
}
