#!/bin/bash
# Runs smbtorture suites against ringshare and, in the same run, against Debian's Samba smbd, and
# compares them test by test.
#
# Usage: scripts/conformance.sh [--quick] [--out DIR] [--no-samba] [--no-ringshare] [SUITE ...]
#   SUITE ...       smbtorture suites (default: the foundation set below)
#   --quick         only smb2.connect and smb2.read (a smoke test)
#   --multichannel  only smb2.session and smb2.multichannel
#   --identity      only the ACL and access-check suites (smb2.acls, smb2.sdread,
#                   smb2.maximum_allowed, smb2.delete-on-close-perms, smb2.create)
#   --durable       only the durable-handle and replay suites (smb2.durable-open,
#                   smb2.durable-open-disconnect, smb2.durable-v2-open, smb2.durable-v2-delay,
#                   smb2.replay) and smb2.lock (its replay tests)
#   --notify        only smb2.notify and smb2.notify-inotify (change notification)
#   --streams       only the named-stream suites (smb2.streams, smb2.create_no_streams,
#                   smb2.ioctl-on-stream, smb2.fileid); both servers keep streams in xattrs
#                   (streams_xattr); smb2.create_no_streams runs on a second share without them
#   --fruit         only the macOS suites (vfs.fruit, vfs.fruit_netatalk, vfs.fruit_file_id,
#                   vfs.fruit_timemachine), each on a share with the fruit options Samba's own
#                   selftest gives it (see extra_shares below)
#   --twrp          only smb2.twrp (Previous Versions), on a share with `vfs objects =
#                   shadow_copy2` whose snapshot is a plain directory `.snapshots/@GMT-…` laid out
#                   before the suite runs (snapper's layout; see lay_out_twrp below)
#   --rpc           only the DCE/RPC suites over named pipes (rpc.lsa.lookupsids,
#                   rpc.lsa.lookupnames: names in ACL editors; rpc.samr.handletype: the
#                   object picker's samr), run as ncacn_np:127.0.0.1
#   --out DIR       where logs, summary.tsv and tests.tsv go
#                   (default: target/conformance/YYYYmmdd-HHMMSS in the repository)
#   --no-samba      skip the Samba reference run
#   --no-ringshare  skip the ringshare run (e.g. to check this script against Samba alone)
#
# Env (all optional):
#   RINGSHARE_BIN   ringshare binary to test; when unset the script runs
#                   `cargo build --release -p ringshare` and uses target/release/ringshare
#   SUITE_TIMEOUT   per-suite timeout in seconds (default 300)
#   TORTURE_USER    account used on both servers (default rstorture; created with useradd when it
#                   does not exist, and deleted again at exit); TORTURE_PASS its SMB password
#   TORTURE_TARGET  smbtorture --target for both servers (default samba3: the tests then expect
#                   Samba's documented behaviour where it differs from Windows)
#   TORTURE_EXTRA   extra smbtorture arguments for both servers, split on spaces
#   RINGSHARE_GLOBAL_EXTRA  lines added to ringshare's [global] (e.g. `fs calls off io thread =
#                   yes`: every share's file system calls made in jobs, as on FUSE or CephFS)
#   KEEP_SHARES=1   leave the share directories in /dev/shm for inspection
#   SHARE_ROOT      where the share directories go instead of /dev/shm (a mounted btrfs image for
#                   the block-cloning tests: scripts/clone-conformance.sh)
#   SAMBA_VFS_OBJECTS  smbd's `vfs objects` on the main share (default streams_xattr acl_xattr;
#                   "btrfs streams_xattr acl_xattr" for FSCTL_DUPLICATE_EXTENTS_TO_FILE)
#
# Needs: root, and Samba 4.22's `samba smbclient samba-testsuite` packages (the reference;
# scripts/install-deps.sh --test installs them, from bookworm-backports on Debian 12).
#
# Output: a table per suite (pass/fail per server), OUT/summary.tsv, OUT/tests.tsv (one line per
# test: name, ringshare result, samba result), OUT/samba-only.txt (tests Samba passes and ringshare
# does not), and per-suite smbtorture logs in OUT/ringshare/ and OUT/samba/.
# Exit status: 0 when every suite ran (failing tests do not change it), 1 on a setup error,
# 2 on bad usage or missing tools.
set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$SCRIPT_DIR/lib/servers.sh"

DEFAULT_SUITES=(smb2.connect smb2.read smb2.rw smb2.dir smb2.getinfo smb2.setinfo smb2.lock
    smb2.create smb2.compound smb2.credits smb2.ioctl smb2.session smb2.multichannel
    smb2.oplock smb2.lease smb2.acls smb2.sdread smb2.maximum_allowed smb2.delete-on-close-perms
    smb2.durable-open smb2.durable-open-disconnect smb2.durable-v2-open smb2.durable-v2-delay
    smb2.replay smb2.notify smb2.notify-inotify smb2.streams smb2.create_no_streams
    smb2.ioctl-on-stream smb2.fileid smb2.timestamps
    smb2.dirlease smb2.durable-v2-regressions smb2.name-mangling smb2.stream-inherit-perms
    smb2.winattr2 smb2.openattr smb2.winattr smb2.twrp smb2.kernel-oplocks smb2.samba3misc
    rpc.lsa.lookupsids rpc.lsa.lookupnames rpc.samr.handletype)
# DCE/RPC over the IPC$ named pipes: `--rpc` (the target is ncacn_np:HOST, not a share).
RPC_SUITES=(rpc.lsa.lookupsids rpc.lsa.lookupnames rpc.samr.handletype)
# Change notification: `--notify`.
NOTIFY_SUITES=(smb2.notify smb2.notify-inotify)
# Named streams: `--streams`.
STREAMS_SUITES=(smb2.streams smb2.create_no_streams smb2.ioctl-on-stream smb2.fileid)
# Suites that need a share without named streams, and its name on both servers.
NO_STREAMS_SHARE=nostreams
# macOS (vfs_fruit): `--fruit`.
# SUITE@LABEL runs SUITE on another share and records its tests as NAME@LABEL: vfs.fruit@stream
# is vfs.fruit on a share with fruit:metadata = stream and fruit:resource = stream.
FRUIT_SUITES=(vfs.fruit vfs.fruit@stream vfs.fruit_netatalk vfs.fruit_file_id vfs.fruit_timemachine)
# Durable, resilient and replayed opens: `--durable` (smb2.lock holds the lock replay tests).
DURABLE_SUITES=(smb2.durable-open smb2.durable-open-disconnect smb2.durable-v2-open
    smb2.durable-v2-delay smb2.replay smb2.lock)
# Acting as the user, ACLs and access checks: `--identity`.
IDENTITY_SUITES=(smb2.acls smb2.sdread smb2.maximum_allowed smb2.delete-on-close-perms smb2.create)
# Sessions and multichannel (binding, channel signing, channel sequence): `--multichannel`.
MULTICHANNEL_SUITES=(smb2.session smb2.multichannel)
QUICK_SUITES=(smb2.connect smb2.read)
# Previous Versions: `--twrp`; the share of its snapshot, and the snapshot smbtorture is told of.
TWRP_SUITES=(smb2.twrp)
TWRP_SHARE=twrp
TWRP_SNAPSHOT=@GMT-2026.11.01-10.00.00

usage() {
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

SUITES=()
OUT=
RUN_SAMBA=1
RUN_RINGSHARE=1
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) SUITES=("${QUICK_SUITES[@]}") ;;
    --multichannel) SUITES=("${MULTICHANNEL_SUITES[@]}") ;;
    --identity) SUITES=("${IDENTITY_SUITES[@]}") ;;
    --durable) SUITES=("${DURABLE_SUITES[@]}") ;;
    --notify) SUITES=("${NOTIFY_SUITES[@]}") ;;
    --streams) SUITES=("${STREAMS_SUITES[@]}") ;;
    --fruit) SUITES=("${FRUIT_SUITES[@]}") ;;
    --rpc) SUITES=("${RPC_SUITES[@]}") ;;
    --twrp) SUITES=("${TWRP_SUITES[@]}") ;;
    --out)
        [ $# -ge 2 ] || { echo "--out needs a directory" >&2; exit 2; }
        OUT=$2
        shift
        ;;
    --out=*) OUT=${1#--out=} ;;
    --no-samba) RUN_SAMBA=0 ;;
    --no-ringshare) RUN_RINGSHARE=0 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    *) SUITES+=("$1") ;;
    esac
    shift
done
[ ${#SUITES[@]} -gt 0 ] || SUITES=("${DEFAULT_SUITES[@]}")

SUITE_TIMEOUT=${SUITE_TIMEOUT:-300}
TORTURE_USER=${TORTURE_USER:-rstorture}
TORTURE_PASS=${TORTURE_PASS:-Conformance-Pw-1}
TORTURE_TARGET=${TORTURE_TARGET:-samba3}
TORTURE_EXTRA=${TORTURE_EXTRA:-}
SHARE=torture
OUT=${OUT:-$REPO/target/conformance/$(date -u +%Y%m%d-%H%M%S)}

die() { echo "conformance: $*" >&2; exit 1; }

if [ "$(id -u)" != 0 ]; then
    echo "conformance: must run as root (it creates a Unix account for Samba and runs smbd)" >&2
    exit 2
fi
MISSING=()
for tool in smbtorture smbd smbpasswd testparm ss setsid timeout useradd setfattr; do
    command -v "$tool" >/dev/null 2>&1 || MISSING+=("$tool")
done
if [ ${#MISSING[@]} -gt 0 ]; then
    echo "conformance: missing ${MISSING[*]}; install with:" >&2
    echo "    scripts/install-deps.sh --test   (Samba 4.22: samba smbclient samba-testsuite)" >&2
    exit 2
fi

# ---- state and cleanup ----
WORK=$(mktemp -d /tmp/ringshare-conformance.XXXXXX)
SHM=${SHARE_ROOT:-/dev/shm}/ringshare-conformance-$$
CREATED_USER=0
RS_PID=
SMBD_PID=
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
    lib_stop_tree "$RS_PID"
    LIB_SAMBA_PID=$SMBD_PID lib_samba_stop "$WORK/samba"
    if [ "$CREATED_USER" = 1 ]; then
        userdel "$TORTURE_USER" >/dev/null 2>&1
    fi
    [ "${KEEP_SHARES:-0}" = 1 ] || rm -rf "$SHM"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT/ringshare" "$OUT/samba" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)

# ---- ringshare binary ----
if [ "$RUN_RINGSHARE" = 1 ]; then
    if [ -z "${RINGSHARE_BIN:-}" ]; then
        echo "building: cargo build --release -p ringshare" >&2
        (cd "$REPO" && cargo build --release -p ringshare) >&2 || die "cargo build failed"
        RINGSHARE_BIN=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null ||
            echo "$REPO/target")/release/ringshare
    fi
    [ -x "$RINGSHARE_BIN" ] || die "ringshare binary $RINGSHARE_BIN is not executable"
fi

# ---- the account both servers use ----
if ! getent passwd "$TORTURE_USER" >/dev/null; then
    useradd --no-create-home --no-user-group --shell /usr/sbin/nologin "$TORTURE_USER" ||
        die "useradd $TORTURE_USER failed"
    CREATED_USER=1
fi

CLIENT_CONF=$(lib_client_conf "$WORK/client")

# extra_shares SERVER: the share sections besides the main one: one without named streams, and
# the fruit shares of Samba's selftest (selftest/target/Samba3.pm: vfs_fruit, vfs_wo_fruit on the
# same directory, vfs_fruit_timemachine, vfs_fruit_zero_fileid; without xattr_tdb here).
extra_shares() {
    local d=$SHM/$1
    cat <<EOF
[$NO_STREAMS_SHARE]
    path = $d-nostreams
    read only = no
    vfs objects = acl_xattr
[fruit]
    path = $d-fruit
    read only = no
    vfs objects = catia fruit streams_xattr acl_xattr
    fruit:resource = file
    fruit:metadata = netatalk
    fruit:locking = netatalk
    fruit:encoding = native
    fruit:veto_appledouble = no
[wofruit]
    path = $d-fruit
    read only = no
    vfs objects = streams_xattr acl_xattr
[fruit_stream]
    path = $d-fruit_stream
    read only = no
    vfs objects = fruit streams_xattr acl_xattr
    fruit:resource = stream
    fruit:metadata = stream
    fruit:veto_appledouble = no
[wofruit_stream]
    path = $d-fruit_stream
    read only = no
    vfs objects = streams_xattr acl_xattr
[fruit_tm]
    path = $d-fruit_tm
    read only = no
    vfs objects = fruit streams_xattr acl_xattr
    fruit:resource = file
    fruit:metadata = stream
    fruit:time machine = yes
    fruit:time machine max size = 32K
[fruit_zero]
    path = $d-fruit_zero
    read only = no
    vfs objects = fruit streams_xattr acl_xattr
    fruit:resource = file
    fruit:metadata = stream
    fruit:zero_file_id = yes
[$TWRP_SHARE]
    path = $d-twrp
    read only = no
    vfs objects = shadow_copy2 streams_xattr
    shadow:snapdir = .snapshots
    shadow:snapdirseverywhere = yes
EOF
}

# EXTRA_DIRS: the directories of extra_shares (suffixes of $SHM/SERVER).
EXTRA_DIRS=(nostreams fruit fruit_stream fruit_tm fruit_zero twrp)

# lay_out_twrp DIR: what smb2.twrp's tests open (the options run_suite gives it): file.txt with
# a stream `st` of 3 bytes (streams_xattr's xattr: the data and a NUL), subdir/hardlink (a hard
# link of it), and a snapshot TWRP_SNAPSHOT of both as a plain directory (a copy, hard link and
# xattrs kept), all owned by the torture user. The file's mode gives its owner rwx: both servers
# map that to full control (Samba's `acl map full control`), which smb2.twrp.write asks of the
# snapshot's file (MaximalAccess with WRITE_DAC and WRITE_OWNER); with rw- the user lacks
# WRITE_OWNER and the test fails at its first check on either server.
lay_out_twrp() {
    local dir=$1
    mkdir -p "$dir/subdir" "$dir/.snapshots/$TWRP_SNAPSHOT" || return 1
    printf 'snapshot content\n' >"$dir/file.txt"
    chmod 0744 "$dir/file.txt"
    ln "$dir/file.txt" "$dir/subdir/hardlink"
    setfattr -n 'user.DosStream.st:$DATA' -v 0x61626300 "$dir/file.txt" || return 1
    (cd "$dir" && cp -a --parents file.txt subdir ".snapshots/$TWRP_SNAPSHOT/") || return 1
    printf 'live content\n' >"$dir/file.txt"
    chown -R "$TORTURE_USER" "$dir"
}

# reset_share SERVER: empties the server's share directory. The directory itself stays: a server
# may hold it open (ringshare resolves every path beneath a directory handle opened at start).
reset_share() {
    local dir=$SHM/$1
    [ -n "${2:-}" ] && dir=$SHM/$1-$2
    mkdir -p "$dir"
    find "$dir" -mindepth 1 -delete 2>/dev/null || rm -rf "${dir:?}"/* "${dir:?}"/.[!.]* 2>/dev/null
    chown "$TORTURE_USER" "$dir"
    chmod 0755 "$dir"
}

# ensure_server SERVER: starts the server when it is not running; sets its PID and PORT.
ensure_server() {
    case "$1" in
    samba)
        if [ -n "$SMBD_PID" ] && kill -0 "$SMBD_PID" 2>/dev/null; then return 0; fi
        [ -n "$SMBD_PID" ] && echo "  samba smbd (pid $SMBD_PID) is gone; restarting" >&2
        SMBD_PID=
        SAMBA_PORT=$(lib_free_port) || return 1
        rm -rf "$WORK/samba"
        for d in "${EXTRA_DIRS[@]}"; do reset_share samba "$d"; done
        lib_samba_start "$WORK/samba" "$SAMBA_PORT" "$SHARE" "$SHM/samba" \
            "$TORTURE_USER" "$TORTURE_PASS" "$(extra_shares samba)" || return 1
        SMBD_PID=$LIB_SAMBA_PID
        ;;
    ringshare)
        if [ -n "$RS_PID" ] && kill -0 "$RS_PID" 2>/dev/null; then return 0; fi
        if [ -n "$RS_PID" ]; then
            echo "  ringshare (pid $RS_PID) is gone; restarting. Its last output:" >&2
            tail -n 10 "$WORK/ringshare/serve.log" >&2
        fi
        RS_PID=
        RS_PORT=$(lib_free_port) || return 1
        for d in "${EXTRA_DIRS[@]}"; do reset_share ringshare "$d"; done
        lib_ringshare_start "$RINGSHARE_BIN" "$WORK/ringshare" "$RS_PORT" "$SHARE" \
            "$SHM/ringshare" "$TORTURE_USER" "$TORTURE_PASS" "$(extra_shares ringshare)" ||
            return 1
        RS_PID=$LIB_RINGSHARE_PID
        ;;
    esac
}

# torture_target SUITE SHARE: what smbtorture is pointed at: a binding over the named pipes (on
# the SMB port -p gives) for the DCE/RPC suites, the share for the others.
torture_target() {
    case "$1" in
    rpc.*) echo ncacn_np:127.0.0.1 ;;
    *) echo "//127.0.0.1/$2" ;;
    esac
}

# resume_after_crash SERVER SUITE LOG SHARE [OPTION...]: runs each test of SUITE that LOG has no
# result for, alone, on SHARE with the smbtorture OPTIONs, appending to LOG. Test names may hold
# spaces: one per line.
resume_after_crash() {
    local server=$1 suite=$2 log=$3 share=$4 t port trc
    shift 4
    # --list prints suite.tcase.test; a test alone in its tcase reports as suite.test.
    while IFS= read -r t; do
        grep -q -F -x -e "success: $t" -e "failure: $t [" -e "failure: $t" -e "error: $t [" \
            -e "error: $t" -e "skip: $t" -e "xfail: $t" -e "uxsuccess: $t" "$log" && continue
        ensure_server "$server" >>"$OUT/$server/server-start.log" 2>&1 || break
        if [ "$server" = samba ]; then port=$SAMBA_PORT; else port=$RS_PORT; fi
        echo "# resuming after a crash: $t alone" >>"$log"
        # shellcheck disable=SC2086
        { (cd "$WORK" && timeout -k 10 "$SUITE_TIMEOUT" smbtorture -s "$CLIENT_CONF" \
            "$(torture_target "$suite" "$share")" -U "$TORTURE_USER%$TORTURE_PASS" -p "$port" --fullname \
            --target="$TORTURE_TARGET" "$@" $TORTURE_EXTRA "$t") >>"$log" 2>&1 </dev/null; } 2>/dev/null
        trc=$?
        echo "# $t -> rc $trc" >>"$log"
    done < <(smbtorture --list "$suite" 2>/dev/null | grep "^$suite\\." |
        sed -E 's/\.([^.]+)\.\1$/.\1/')
}

# run_suite SERVER SUITE: runs one suite; writes OUT/SERVER/SUITE.log and appends per-test lines
# to OUT/SERVER/tests.tsv; sets RESULT to "pass fail error skip incomplete rc wall". Runs in the
# main shell (not in a subshell) so that the server PIDs it may set stay known to the trap.
run_suite() {
    local server=$1 suite=$2 port log rc t0 t1 share=$SHARE opts=() torture=${2%@*} tag=
    [ "$torture" != "$suite" ] && tag=@${suite#*@}
    log=$OUT/$server/$suite.log
    reset_share "$server"
    # Suites that run on one of extra_shares, with the options Samba's selftest gives them.
    case "$suite" in
    smb2.create_no_streams) share=$NO_STREAMS_SHARE ;;
    vfs.fruit)
        share=fruit
        opts=(--option=torture:localdir="$SHM/$server-fruit" --option=torture:share2=wofruit)
        ;;
    vfs.fruit@stream)
        share=fruit_stream
        opts=(--option=torture:localdir="$SHM/$server-fruit_stream"
            --option=torture:share2=wofruit_stream)
        ;;
    vfs.fruit_netatalk) share=fruit opts=(--option=torture:localdir="$SHM/$server-fruit") ;;
    vfs.fruit_timemachine)
        share=fruit_tm
        opts=(--option=torture:localdir="$SHM/$server-fruit_tm")
        ;;
    vfs.fruit_file_id) share=fruit_zero ;;
    # These reach the share's files as a local program would (a kernel lease, a POSIX lock):
    # smbtorture needs the share's directory on this machine, and skips them without it.
    smb2.kernel-oplocks | smb2.samba3misc) opts=(--option=torture:localdir="$SHM/$server") ;;
    smb2.twrp)
        share=$TWRP_SHARE
        opts=(--option=torture:twrp_file=file.txt --option=torture:twrp_snapshot="$TWRP_SNAPSHOT"
            --option=torture:twrp_stream=st --option=torture:twrp_stream_size=3)
        ;;
    # A standalone server's SAM domain is its NetBIOS name (RSREF on both servers); the
    # rpc.samr suites look up smbtorture's workgroup.
    rpc.samr*) opts=(--workgroup=RSREF) ;;
    esac
    if [ "$share" != "$SHARE" ]; then
        reset_share "$server" "${share/$NO_STREAMS_SHARE/nostreams}"
    fi
    if ! ensure_server "$server" >>"$OUT/$server/server-start.log" 2>&1; then
        echo "server did not start; see $OUT/$server/server-start.log" >"$log"
        RESULT="0 0 0 0 0 255 0"
        return
    fi
    # (after the server start, which empties extra_shares' directories)
    if [ "$share" = "$TWRP_SHARE" ] && ! lay_out_twrp "$SHM/$server-twrp"; then
        echo "could not lay out the snapshot share" >"$log"
        RESULT="0 0 0 0 0 255 0"
        return
    fi
    if [ "$server" = samba ]; then port=$SAMBA_PORT; else port=$RS_PORT; fi
    # shellcheck disable=SC2206
    local cmd=(smbtorture -s "$CLIENT_CONF" "$(torture_target "$torture" "$share")"
        -U "$TORTURE_USER%$TORTURE_PASS"
        -p "$port" --fullname --target="$TORTURE_TARGET" "${opts[@]}" $TORTURE_EXTRA "$torture")
    t0=$(date +%s)
    # (the braces keep bash's "Aborted" notice about a crashed smbtorture off the terminal; the
    # crash is in the log and in rc)
    { (cd "$WORK" && timeout -k 10 "$SUITE_TIMEOUT" "${cmd[@]}") >"$log" 2>&1 </dev/null; } 2>/dev/null
    rc=$?
    t1=$(date +%s)
    echo "# ${cmd[*]} -> rc $rc" >>"$log"
    # smbtorture itself crashed (a signal other than the timeout's): run the tests it did not get
    # to one by one, so that one crash does not hide the rest of the suite.
    if [ "$rc" -gt 128 ] && [ "$rc" != 137 ]; then
        resume_after_crash "$server" "$torture" "$log" "$share" "${opts[@]}"
    fi
    # One line per started test: its last result, or "incomplete" when it never reported one
    # (timeout or a dropped connection).
    awk -v suite="$suite" -v tag="$tag" '
        # Test names may hold spaces (vfs.fruit): the name is the rest of the line, less a
        # trailing " [" that opens a failure message.
        /^test: / { name = $0; sub(/^test: /, "", name)
            if (!(name in res)) { order[n++] = name; res[name] = "incomplete" } }
        /^(success|failure|error|skip|xfail|uxsuccess): / {
            r = $1; sub(/:$/, "", r); name = $0; sub(/^[a-z]+: /, "", name); sub(/ \[$/, "", name)
            if (!(name in res)) { order[n++] = name }
            res[name] = r
        }
        END { for (i = 0; i < n; i++) printf "%s\t%s%s\t%s\n", suite, order[i], tag, res[order[i]] }
    ' "$log" >>"$OUT/$server/tests.tsv"
    local p f e s inc
    p=$(grep -c '^success: ' "$log")
    f=$(grep -c '^failure: ' "$log")
    e=$(grep -c '^error: ' "$log")
    s=$(grep -c -E '^(skip|xfail): ' "$log")
    inc=$(awk -F'\t' -v suite="$suite" '$1 == suite && $3 == "incomplete"' "$OUT/$server/tests.tsv" | wc -l)
    RESULT="$p $f $e $s $inc $rc $((t1 - t0))"
}

SERVERS=()
[ "$RUN_RINGSHARE" = 1 ] && SERVERS+=(ringshare)
[ "$RUN_SAMBA" = 1 ] && SERVERS+=(samba)
[ ${#SERVERS[@]} -gt 0 ] || { echo "nothing to run" >&2; exit 2; }

for server in "${SERVERS[@]}"; do : >"$OUT/$server/tests.tsv"; done
SUM=$OUT/summary.tsv
printf 'suite\tserver\tpass\tfail\terror\tskip\tincomplete\trc\twall_s\n' >"$SUM"

echo "smbtorture $(smbtorture --version 2>&1 | head -n 1 | awk '{print $2}'), target $TORTURE_TARGET," \
    "timeout ${SUITE_TIMEOUT}s per suite, output in $OUT"
for suite in "${SUITES[@]}"; do
    for server in "${SERVERS[@]}"; do
        run_suite "$server" "$suite"
        read -r p f e s inc rc wall <<<"$RESULT"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$suite" "$server" "$p" "$f" "$e" "$s" \
            "$inc" "$rc" "$wall" >>"$SUM"
        printf '  %-16s %-9s pass %3d  fail %3d  error %3d  skip %3d  incomplete %2d  rc %3d  %4ss\n' \
            "$suite" "$server" "$p" "$f" "$e" "$s" "$inc" "$rc" "$wall"
    done
done
# ringshare's own log, for post-mortems
[ "$RUN_RINGSHARE" = 1 ] && cp "$WORK/ringshare/serve.log" "$OUT/ringshare/serve.log" 2>/dev/null
[ "$RUN_SAMBA" = 1 ] && cp "$WORK/samba/log/log.smbd" "$OUT/samba/log.smbd" 2>/dev/null

# ---- per-test comparison ----
# tests.tsv: test, ringshare result, samba result ("-" where that server did not run the test)
TESTS=$OUT/tests.tsv
FILES=()
for server in "${SERVERS[@]}"; do FILES+=("$OUT/$server/tests.tsv"); done
awk -F'\t' '
    { key = $2; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
      if (FILENAME ~ /\/ringshare\/tests\.tsv$/) rs[key] = $3; else sb[key] = $3 }
    END {
        print "test\tringshare\tsamba"
        for (i = 0; i < n; i++) {
            k = order[i]
            printf "%s\t%s\t%s\n", k, (k in rs) ? rs[k] : "-", (k in sb) ? sb[k] : "-"
        }
    }
' "${FILES[@]}" >"$TESTS"
awk -F'\t' 'NR > 1 && $3 == "success" && $2 != "success" { print $1 "\t" $2 }' "$TESTS" \
    >"$OUT/samba-only.txt"

# ---- table ----
cell() { # cell SUITE SERVER -> "P/F" (F counts failure + error + incomplete) or "-" / "down"
    awk -F'\t' -v s="$1" -v v="$2" '
        $1 == s && $2 == v { found = 1
            if ($8 == 255 && $3 + $4 + $5 + $6 == 0) print "down"
            else printf "%d/%d\n", $3, $4 + $5 + $7 }
        END { if (!found) print "-" }' "$SUM"
}
echo
echo "| suite | ringshare pass/fail | samba pass/fail |"
echo "|---|---|---|"
for suite in "${SUITES[@]}"; do
    echo "| $suite | $(cell "$suite" ringshare) | $(cell "$suite" samba) |"
done
TOTAL() { awk -F'\t' -v v="$1" '$2 == v { p += $3; f += $4 + $5 + $7; r = 1 }
    END { if (r) printf "%d/%d\n", p, f; else print "-" }' "$SUM"; }
echo "| **total** | $(TOTAL ringshare) | $(TOTAL samba) |"
echo
echo "(fail = failure + error + incomplete; skips are not counted)"
if [ "$RUN_RINGSHARE" = 1 ] && [ "$RUN_SAMBA" = 1 ]; then
    n=$(wc -l <"$OUT/samba-only.txt")
    echo
    echo "$n tests Samba passes that ringshare does not (test, ringshare result):"
    sed 's/^/  /' "$OUT/samba-only.txt"
fi
echo
echo "per-test results: $TESTS; summary: $SUM; logs: $OUT/{ringshare,samba}/"
exit 0
