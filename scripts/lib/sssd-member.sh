# shellcheck shell=bash
# What the AD member test's second member needs (crates/ringshare/tests/ad/rig.sh sssd): sssd
# answering NSS (sssd-common, sssd-ldap, libnss-sss, libsss-nss-idmap0), adcli to join, and
# winbind's idmap_sss (shipped by sssd-common) for Samba's smbd beside it. The
# machine's own name service and logins stay as they were: libnss-sss adds sss to
# /etc/nsswitch.conf and libpam-sss (a dependency of sssd-common) adds pam_sss to PAM when
# installed; both are put back as they were (the test mounts an nsswitch.conf with sss in a
# mount namespace of its own). Where systemd runs, the packaged sssd service is disabled and
# stopped: the test runs its own sssd with a private configuration.
#
# Debian 12's sssd-ad (2.8) is not installed: Samba 4.22's samba-libs (bookworm-backports, the
# reference) Breaks sssd-ad and sssd-ad-common << 2.9.4, so the rig's sssd uses the ldap
# provider with the AD schema and ldap_id_mapping (the same id slices as id_provider = ad).
#
# Source it after samba-reference.sh, then: sssd_member_install [SUDO]
# Idempotent; needs no terminal (CI=true, no stdin).

SSSD_MEMBER_PKGS=(sssd-common sssd-ldap adcli libnss-sss libsss-nss-idmap0)
# The PAM files pam-auth-update writes.
SSSD_MEMBER_PAM=(common-account common-auth common-password common-session
    common-session-noninteractive)

# sssd_member_ok: true when every package of SSSD_MEMBER_PKGS is installed.
sssd_member_ok() {
    local p
    for p in "${SSSD_MEMBER_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
    done
}

# sssd_member_install [SUDO]: installs SSSD_MEMBER_PKGS, keeping nsswitch.conf and PAM as they were.
sssd_member_install() {
    local sudo=${1:-} saved rc=0 f
    sssd_member_ok && return 0
    saved=$(mktemp -d)
    cp -p /etc/nsswitch.conf "$saved/" 2>/dev/null || true
    for f in "${SSSD_MEMBER_PAM[@]}"; do
        cp -p "/etc/pam.d/$f" "$saved/" 2>/dev/null || true
    done
    $sudo apt-get update -qq || rc=$?
    [ "$rc" -eq 0 ] && { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends -o Dpkg::Options::=--force-confdef \
        -o Dpkg::Options::=--force-confold "${SSSD_MEMBER_PKGS[@]}" >/dev/null </dev/null || rc=$?; }
    for f in nsswitch.conf "${SSSD_MEMBER_PAM[@]}"; do
        local to=/etc/pam.d/$f
        [ "$f" = nsswitch.conf ] && to=/etc/nsswitch.conf
        if [ -s "$saved/$f" ] && ! cmp -s "$saved/$f" "$to"; then
            echo "install-deps: an sssd package changed $to; putting it back" >&2
            $sudo cp -p "$saved/$f" "$to"
        fi
    done
    rm -rf "$saved"
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        $sudo systemctl disable --now sssd >/dev/null 2>&1 || true
    fi
    return "$rc"
}
