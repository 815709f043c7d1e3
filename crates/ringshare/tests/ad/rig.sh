#!/bin/bash
# A Samba Active Directory domain in a network namespace, with two member file servers joined
# to it the way admins join them, for tests and by hand.
#
#   rig.sh up DIR RINGSHARE_BIN   provision AD.RS.TEST (NetBIOS RSAD) and start its DC; join
#                                 RSMEMBER with `net ads join` (keytab written by Samba's
#                                 `sync machine password to keytab`); start the member's winbindd
#                                 (NSS: winbind, idmap rid 100000-199999), Samba's smbd on
#                                 rsmember.ad.rs.test and ringshare on rsalt.ad.rs.test (an SPN
#                                 of the same computer account), both reading DIR/member/smb.conf
#                                 (ringshare's copy adds where it listens); users rsalice and
#                                 rscarol (group rsproj) and rsbob, each with a ticket in
#                                 DIR/USER.cc
#   rig.sh autorid DIR RINGSHARE_BIN
#                                 the member's second configuration: winbindd, smbd and
#                                 ringshare stopped, `idmap config * : backend = autorid`
#                                 (1000000-19999999) instead of tdb and rid, winbind's caches
#                                 emptied, and the three started again
#   rig.sh sssd DIR RINGSHARE_BIN a second member, RSSSSD, without winbind: joined with `adcli
#                                 join` (keytab DIR/sssd/krb5.keytab), sssd answering NSS
#                                 (names RSAD\user, ids by ldap_id_mapping), and ringshare on
#                                 rssssd.ad.rs.test (127.0.0.5) with no idmap config (its id
#                                 source: sssd), reading DIR/ringshare-sssd.conf; beside it
#                                 Samba's smbd on rssmbsss.ad.rs.test (127.0.0.6, joined with
#                                 `net ads join`), its winbindd taking sssd's ids (`idmap
#                                 config * : backend = sss`)
#   rig.sh member DIR CMD...      run CMD where the member's tools work (its netns, its
#                                 /run/samba and an nsswitch.conf with winbind)
#   rig.sh sssd-member DIR CMD... run CMD where the sssd member's tools work (its netns; its
#                                 own /var/lib/sss, /run, krb5.conf and an nsswitch.conf with
#                                 sss, in a mount namespace: the machine's are not touched)
#   rig.sh dc DIR CMD...          run CMD beside the DC
#   rig.sh down DIR               stop everything the rig started and remove its netns
#
# Addresses in the netns: DC 127.0.0.2 (dc1.ad.rs.test), Samba member 127.0.0.3
# (rsmember.ad.rs.test), ringshare 127.0.0.4 (rsalt.ad.rs.test). Nothing outside DIR,
# /etc/netns/NS and the netns is touched. Needs root, samba-ad-dc, winbind, libnss-winbind,
# smbclient, krb5-user (and for `sssd`: sssd-common, sssd-ldap, adcli, libnss-sss).
set -euo pipefail

cmd=${1:?usage: rig.sh up|member|dc|down DIR ...}
DIR=${2:?DIR}
shift 2
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
NS_FILE="$DIR/netns"
REALM=AD.RS.TEST
DOMAIN=RSAD
ADMINPASS='Adm1n!pass-rig'
export KRB5_CONFIG="$DIR/krb5.conf"
SELF=$(realpath "$0")

ns() { cat "$NS_FILE"; }

# Run "$@" in the netns with /run/samba bound to RUN (each Samba daemon family needs its own:
# clients find winbindd at the compiled-in /run/samba/winbindd).
in_ns() {
    local run=$1 nss=$2
    shift 2
    ip netns exec "$(ns)" unshare -m sh -c '
        mount --bind "$1" /run/samba && { [ -z "$2" ] || mount --bind "$2" /etc/nsswitch.conf; } &&
        shift 2 && exec "$@"' sh "$run" "$nss" "$@"
}
in_member() { in_ns "$DIR/member-run" "$DIR/nsswitch.conf" "$@"; }
in_dc() { in_ns "$DIR/dc-run" "" "$@"; }
# The sssd member's mount namespace: sssd's paths are fixed at build time (/var/lib/sss for its
# pipes, caches and database, /run/sssd.pid), so the rig's own are mounted over them (and
# over /run, where the sssd member's winbindd puts its socket, /run/samba/winbindd).
in_sssd() {
    ip netns exec "$(ns)" unshare -m sh -c '
        mount --bind "$1/lib" /var/lib/sss && mount --bind "$1/nsswitch.conf" /etc/nsswitch.conf &&
        mount --bind "$2" /etc/krb5.conf && mount --bind "$1/run" /run &&
        shift 2 && exec "$@"' sh "$DIR/sssd" "$KRB5_CONFIG" "$@"
}

# Start a daemon in the background beside the DC or the member (WHERE: dc|member), its output
# in DIR/NAME.log.
spawn() {
    local name=$1 where=$2
    shift 2
    setsid bash "$SELF" "$where" "$DIR" "$@" >>"$DIR/$name.log" 2>&1 </dev/null &
}

wait_port() {
    local addr=$1 port=$2 what=$3
    for _ in $(seq 1 200); do
        if ip netns exec "$(ns)" ss -ltn "( sport = :$port )" | grep -q "$addr:$port"; then
            return 0
        fi
        sleep 0.1
    done
    echo "rig: $what did not listen on $addr:$port; its log:" >&2
    tail -n 20 "$DIR"/*.log >&2 || true
    return 1
}

up() {
    local bin=${1:?RINGSHARE_BIN}
    local n="rsad$$"
    echo "$n" >"$NS_FILE"
    ip netns add "$n"
    ip netns exec "$n" ip link set lo up
    for a in 2 3 4; do ip netns exec "$n" ip addr add "127.0.0.$a/8" dev lo; done
    # /run/samba is where the daemons' private runs are mounted (in_ns); systemd makes it when
    # Samba's services start, and a machine where they never ran has none.
    mkdir -p "/etc/netns/$n" "$DIR"/{dc-run,member-run} /run/samba
    cat >"/etc/netns/$n/hosts" <<EOF
127.0.0.1 localhost
127.0.0.2 dc1.ad.rs.test dc1
127.0.0.3 rsmember.ad.rs.test rsmember
127.0.0.4 rsalt.ad.rs.test rsalt
127.0.1.1 $(hostname)
EOF
    # The machine's own name is in the hosts file, as on any server: Samba's smbd looks it up at
    # every logon, and the DC's DNS (whose forwarder is itself) took 1.6 s to say it did not
    # know it, four times per logon. The DC's own DNS answers for the domain (SRV records: how
    # Samba's tools find the DC and its kpasswd service).
    echo "nameserver 127.0.0.2" >"/etc/netns/$n/resolv.conf"
    cat >"$KRB5_CONFIG" <<EOF
[libdefaults]
 default_realm = $REALM
 dns_lookup_kdc = false
 dns_lookup_realm = false
 rdns = false
 dns_canonicalize_hostname = false
[realms]
 $REALM = {
  kdc = 127.0.0.2
  admin_server = 127.0.0.2
 }
EOF
    sed -E 's/^(passwd|group):.*/\1: files winbind/' /etc/nsswitch.conf >"$DIR/nsswitch.conf"

    # The domain controller.
    samba-tool domain provision --targetdir="$DIR/dc" --realm=$REALM --domain=$DOMAIN \
        --server-role=dc --dns-backend=SAMBA_INTERNAL --adminpass="$ADMINPASS" --host-name=dc1 \
        --host-ip=127.0.0.2 --option="interfaces=127.0.0.2/8" \
        --option="bind interfaces only=yes" --option="prefork children=1" \
        --option="dns forwarder=127.0.0.2" \
        >"$DIR/provision.log" 2>&1
    sed -i "s|^\s*log file = .*|\tlog file = $DIR/dc/log.%m\n\tpid directory = $DIR/dc-run\n\tncalrpc dir = $DIR/dc-run/ncalrpc\n\twinbindd socket directory = $DIR/dc-run/winbindd|" \
        "$DIR/dc/etc/smb.conf"
    spawn dc dc samba -F --no-process-group --debug-stdout -s "$DIR/dc/etc/smb.conf"
    wait_port 127.0.0.2 88 "the DC's KDC"
    wait_port 127.0.0.2 389 "the DC's LDAP"
    local S=(-s "$DIR/dc/etc/smb.conf")
    in_dc samba-tool user create rsalice 'Al1ce!pass' "${S[@]}" >/dev/null
    in_dc samba-tool user create rscarol 'C4rol!pass' "${S[@]}" >/dev/null
    in_dc samba-tool user create rsbob 'B0b!pass' "${S[@]}" >/dev/null
    in_dc samba-tool group add rsproj "${S[@]}" >/dev/null
    in_dc samba-tool group addmembers rsproj rsalice,rscarol "${S[@]}" >/dev/null

    # The member, as an admin would configure and join it.
    local M="$DIR/member"
    mkdir -p "$M"/{state,cache,lock,private,log} "$DIR/samba-share" "$DIR/ringshare-share"
    chmod 1777 "$DIR/samba-share" "$DIR/ringshare-share"
    cat >"$M/smb.conf" <<EOF
[global]
	workgroup = $DOMAIN
	realm = $REALM
	security = ads
	netbios name = RSMEMBER
	interfaces = 127.0.0.3/8
	bind interfaces only = yes
	kerberos method = dedicated keytab
	dedicated keytab file = $M/krb5.keytab
	sync machine password to keytab = "$M/krb5.keytab:spn_prefixes=host,cifs:account_name:sync_kvno:machine_password"
	idmap config * : backend = tdb
	idmap config * : range = 3000-7999
	idmap config $DOMAIN : backend = rid
	idmap config $DOMAIN : range = 100000-199999
	winbind use default domain = no
	state directory = $M/state
	cache directory = $M/cache
	lock directory = $M/lock
	private dir = $M/private
	pid directory = $DIR/member-run
	ncalrpc dir = $DIR/member-run/ncalrpc
	log file = $M/log/log.%m
	smb passwd file = $M/smbpasswd
	vfs objects = acl_xattr
[share]
	path = $DIR/samba-share
	read only = no
EOF
    in_member net ads join -U "administrator%$ADMINPASS" -s "$M/smb.conf" >"$DIR/join.log" 2>&1 ||
        { cat "$DIR/join.log" >&2; return 1; }
    in_dc samba-tool spn add cifs/rsalt.ad.rs.test 'RSMEMBER$' "${S[@]}"
    member_winbindd "$M" "" || return 1
    spawn smbd member smbd -F --no-process-group --debug-stdout -s "$M/smb.conf"
    # ringshare reads the same file; where it listens is all it adds.
    sed -e "s|^\[global\]|[global]\n\tlisten = 127.0.0.4:445\n\tcontrol socket = $DIR/ringshare.sock|" \
        -e "s|interfaces = 127.0.0.3/8|interfaces = 127.0.0.4/8|" \
        -e "s|path = $DIR/samba-share|path = $DIR/ringshare-share|" \
        -e "s|smb passwd file = .*|smb passwd file = $DIR/ringshare-smbpasswd|" \
        "$M/smb.conf" >"$DIR/ringshare.conf"
    touch "$DIR/ringshare-smbpasswd" "$M/smbpasswd"
    # One I/O thread unless RIG_THREADS says otherwise (bench/logons --ad: one per CPU; it also
    # sets RIG_LOG=warn, as a logon's INFO line is not what it measures): every
    # client shares it, so a logon that waited on winbind in it would stall them all
    # (ad_member's stopped-winbindd step shows it does not).
    member_ringshare "$bin" ""
    for u in rsalice:'Al1ce!pass' rscarol:'C4rol!pass' rsbob:'B0b!pass'; do
        echo "${u#*:}" | KRB5CCNAME="$DIR/${u%%:*}.cc" in_member kinit "${u%%:*}@$REALM" >/dev/null
    done
    echo "rig: up in netns $n"
}

# Starts the member's winbindd (smb.conf in directory M) and waits until it answers for a
# domain user; WHAT qualifies the error (" (autorid)").
member_winbindd() {
    local M=$1 what=$2
    spawn winbindd member winbindd -F --no-process-group --debug-stdout -s "$M/smb.conf"
    for _ in $(seq 1 100); do
        in_member wbinfo -p >/dev/null 2>&1 && break
        sleep 0.1
    done
    in_member getent passwd 'RSAD\rsalice' >/dev/null ||
        { echo "rig: winbind$what does not answer for RSAD\\rsalice" >&2; return 1; }
}

# Starts ringshare BIN on the member's configuration and waits for it and the member's smbd
# (started before); WHAT qualifies the names in a timeout's message.
member_ringshare() {
    local bin=$1 what=$2
    spawn ringshare member env RINGSHARE_LOG="${RIG_LOG:-info}" "$bin" serve --threads "${RIG_THREADS:-1}" \
        --config "$DIR/ringshare.conf"
    wait_port 127.0.0.3 445 "Samba's smbd$what"
    wait_port 127.0.0.4 445 "ringshare$what"
}

# The pids of the member's daemons in the netns whose command line names FILE.
member_pids() {
    local file=$1 p
    for p in $(ip netns pids "$(ns)" 2>/dev/null); do
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$file" && echo "$p"
    done
    return 0
}

# The member again with winbind's autorid backend for every domain (one id per SID, serving
# as uid and gid, as rid gives; but no arithmetic ringshare could do itself).
autorid() {
    local bin=${1:?RINGSHARE_BIN} M="$DIR/member" pids
    for sig in TERM KILL; do
        pids="$(member_pids "$M/smb.conf") $(member_pids "$DIR/ringshare.conf")"
        [ -z "${pids// /}" ] && break
        kill -s $sig $pids 2>/dev/null || true
        for _ in $(seq 1 30); do
            pids="$(member_pids "$M/smb.conf") $(member_pids "$DIR/ringshare.conf")"
            [ -z "${pids// /}" ] && break
            sleep 0.1
        done
    done
    for f in "$M/smb.conf" "$DIR/ringshare.conf"; do
        sed -i -e '/idmap config/d' \
            -e 's|^\[global\]|[global]\n\tidmap config * : backend = autorid\n\tidmap config * : range = 1000000-19999999|' "$f"
    done
    rm -f "$M"/lock/gencache.tdb "$M"/state/winbindd_cache.tdb "$M"/state/winbindd_idmap.tdb \
        "$M"/cache/netsamlogon_cache.tdb "$DIR"/member-run/*.pid
    member_winbindd "$M" " (autorid)" || return 1
    spawn smbd member smbd -F --no-process-group --debug-stdout -s "$M/smb.conf"
    member_ringshare "$bin" " (autorid)"
    echo "rig: member on idmap autorid"
}

# The sssd member: RSSSSD joined with adcli, sssd, and ringshare on 127.0.0.5 (its id source:
# sssd, as it has no idmap config). sssd's id provider is `ldap` with the AD schema: Debian 12's
# sssd-ad (2.8) cannot be installed beside Samba 4.22's libraries (samba-libs Breaks sssd-ad <<
# 2.9.4); the ids are the same ldap_id_mapping slices `id_provider = ad` gives.
sssd_member() {
    local bin=${1:?RINGSHARE_BIN} S="$DIR/sssd" n
    n=$(ns)
    mkdir -p "$S" "$DIR/sssd-share"
    chmod 1777 "$DIR/sssd-share"
    install -d -m 0755 "$S/lib" "$S/lib/pipes" "$S/lib/mc" "$S/lib/pubconf" "$S/lib/gpo_cache" \
        "$S/run"
    install -d -m 0700 "$S/lib/db" "$S/lib/pipes/private" "$S/lib/secrets"
    ip netns exec "$n" ip addr add 127.0.0.5/8 dev lo
    echo "127.0.0.5 rssssd.ad.rs.test rssssd" >>"/etc/netns/$n/hosts"
    echo "$ADMINPASS" | ip netns exec "$n" adcli join --domain=ad.rs.test --domain-realm=$REALM \
        --domain-controller=dc1.ad.rs.test --computer-name=RSSSSD \
        --host-fqdn=rssssd.ad.rs.test --host-keytab="$S/krb5.keytab" \
        --login-user=Administrator --stdin-password --service-name=host --service-name=cifs \
        >"$DIR/adcli.log" 2>&1 || { cat "$DIR/adcli.log" >&2; return 1; }
    sed -E 's/^(passwd|group):.*/\1: files sss/' /etc/nsswitch.conf >"$S/nsswitch.conf"
    # Names as winbind spells them (RSAD\user), so both members know users by the same names.
    install -m 0600 /dev/null "$S/sssd.conf"
    cat >"$S/sssd.conf" <<EOF
[sssd]
domains = $DOMAIN
services = nss

[nss]

[domain/$DOMAIN]
id_provider = ldap
auth_provider = none
sudo_provider = none
autofs_provider = none
ldap_uri = ldap://dc1.ad.rs.test
ldap_schema = ad
ldap_id_mapping = True
ldap_sasl_mech = GSSAPI
ldap_sasl_authid = RSSSSD\$@$REALM
ldap_krb5_keytab = $S/krb5.keytab
ldap_search_base = DC=ad,DC=rs,DC=test
ldap_referrals = false
krb5_realm = $REALM
krb5_server = dc1.ad.rs.test
cache_credentials = false
use_fully_qualified_names = True
EOF
    cat >>"$S/sssd.conf" <<'EOF'
full_name_format = %2$s\%1$s
re_expression = (((?P<domain>[^\\]+)\\(?P<name>.+$))|((?P<name>[^@]+)@(?P<domain>.+$))|(^(?P<name>[^@\\]+)$))
EOF
    spawn sssd sssd-member sssd -i -c "$S/sssd.conf" --logger=stderr -d 2
    for _ in $(seq 1 100); do
        in_sssd getent passwd "$DOMAIN\\rsalice" >/dev/null 2>&1 && break
        sleep 0.1
    done
    in_sssd getent passwd "$DOMAIN\\rsalice" >/dev/null || {
        echo "rig: sssd does not answer for $DOMAIN\\rsalice" >&2
        tail -n 20 "$DIR/sssd.log" >&2
        return 1
    }
    # ringshare as an sssd member is configured: no idmap config, the keytab adcli wrote.
    cat >"$DIR/ringshare-sssd.conf" <<EOF
[global]
	listen = 127.0.0.5:445
	control socket = $DIR/ringshare-sssd.sock
	workgroup = $DOMAIN
	realm = $REALM
	security = ads
	netbios name = RSSSSD
	kerberos method = dedicated keytab
	dedicated keytab file = $S/krb5.keytab
	smb passwd file = $DIR/ringshare-sssd-smbpasswd
	vfs objects = acl_xattr
[share]
	path = $DIR/sssd-share
	read only = no
EOF
    touch "$DIR/ringshare-sssd-smbpasswd"
    spawn ringshare-sssd sssd-member env RINGSHARE_LOG="${RIG_LOG:-info}" "$bin" serve \
        --threads 1 --config "$DIR/ringshare-sssd.conf"
    wait_port 127.0.0.5 445 "ringshare (sssd member)"
    # Samba's smbd on an sssd member, for comparison: Samba needs winbindd for `security =
    # ads`, and takes sssd's ids through it with `idmap config * : backend = sss` (idmap_sss,
    # shipped by sssd-common); its own computer account, RSSMBSSS, joined with `net ads join`
    # (Samba keeps its machine password in secrets.tdb, which adcli does not write).
    local M="$DIR/sssd-samba"
    mkdir -p "$M"/{state,cache,lock,private,log} "$DIR/sssd-samba-share" "$S/run/samba"
    chmod 1777 "$DIR/sssd-samba-share"
    ip netns exec "$n" ip addr add 127.0.0.6/8 dev lo
    echo "127.0.0.6 rssmbsss.ad.rs.test rssmbsss" >>"/etc/netns/$n/hosts"
    cat >"$M/smb.conf" <<EOF2
[global]
	workgroup = $DOMAIN
	realm = $REALM
	security = ads
	netbios name = RSSMBSSS
	interfaces = 127.0.0.6/8
	bind interfaces only = yes
	kerberos method = secrets and keytab
	idmap config * : backend = sss
	idmap config * : range = 200000-2147483647
	winbind use default domain = no
	state directory = $M/state
	cache directory = $M/cache
	lock directory = $M/lock
	private dir = $M/private
	pid directory = $M
	ncalrpc dir = $M/ncalrpc
	log file = $M/log/log.%m
	vfs objects = acl_xattr
[share]
	path = $DIR/sssd-samba-share
	read only = no
EOF2
    in_sssd net ads join -U "administrator%$ADMINPASS" -s "$M/smb.conf" >"$DIR/join-sssd-samba.log" 2>&1 ||
        { cat "$DIR/join-sssd-samba.log" >&2; return 1; }
    in_dc samba-tool spn add cifs/rssmbsss.ad.rs.test 'RSSMBSSS$' -s "$DIR/dc/etc/smb.conf"
    spawn winbindd-sssd sssd-member winbindd -F --no-process-group --debug-stdout -s "$M/smb.conf"
    for _ in $(seq 1 100); do
        in_sssd wbinfo -p >/dev/null 2>&1 && break
        sleep 0.1
    done
    spawn smbd-sssd sssd-member smbd -F --no-process-group --debug-stdout -s "$M/smb.conf"
    wait_port 127.0.0.6 445 "Samba's smbd (sssd member)"
    echo "rig: sssd member up"
}

down() {
    [ -f "$NS_FILE" ] || return 0
    local n
    n=$(ns)
    # Every process of the rig runs in its netns.
    for sig in TERM KILL; do
        pids=$(ip netns pids "$n" 2>/dev/null || true)
        [ -z "$pids" ] && break
        kill -s $sig $pids 2>/dev/null || true
        sleep 0.5
    done
    # The wrappers that started them run outside it (a stopped one would hold on forever).
    pkill -CONT -f "rig.sh (sssd-)?member $DIR " 2>/dev/null || true
    pkill -KILL -f "rig.sh (sssd-)?member $DIR " 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
    rm -rf "/etc/netns/$n" "$NS_FILE"
}

case $cmd in
up)
    trap 'down' ERR
    up "$@"
    ;;
autorid) autorid "$@" ;;
sssd) sssd_member "$@" ;;
member) in_member "$@" ;;
sssd-member) in_sssd "$@" ;;
dc) in_dc "$@" ;;
down) down ;;
*)
    echo "rig.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
