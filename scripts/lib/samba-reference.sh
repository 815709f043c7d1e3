# shellcheck shell=bash
# The Samba every comparison runs against: 4.22 (smbd, smbclient, smbtorture). On Debian 12
# (bookworm) it comes from bookworm-backports, pinned so that only Samba's own packages come from
# there and the rest of the machine stays on bookworm; on later Debian releases from the release
# itself. Upgrades an existing 4.17 install. The host's name service stays as it was: libnss-winbind
# (the AD member test loads it in a network namespace of its own) adds winbind to
# /etc/nsswitch.conf when installed, and the file is put back as it was; without recommends,
# libpam-winbind (which would add winbind to PAM) is not installed.
#
# Source it, then: samba_reference_install [SUDO]   (SUDO: "sudo" when not root, else empty)
# Idempotent; needs no terminal (CI=true, no stdin).

# The lowest version accepted as the reference.
SAMBA_REFERENCE_MIN=2:4.22
# What the tests run: smbd, smbclient/smbcacls/smbpasswd/testparm, smbtorture; and for the AD
# member test (crates/ringshare/tests/ad_member.rs) a domain controller, winbindd and its NSS module;
# samba-ad-provision (the schema files `samba-tool domain provision` reads) is only recommended by
# samba-ad-dc, and recommends are not installed.
SAMBA_REFERENCE_PKGS=(samba smbclient samba-testsuite samba-ad-dc samba-ad-provision winbind
    libnss-winbind python3-samba)
SAMBA_BACKPORTS_SOURCES=/etc/apt/sources.list.d/ringshare-bookworm-backports.sources
SAMBA_BACKPORTS_PREFS=/etc/apt/preferences.d/ringshare-samba-backports
# Every binary package that bookworm-backports builds from Samba's source (samba 4.22 builds
# talloc, tdb, tevent and ldb too): any of them installed must move with the others, since they
# depend on each other's exact versions.
SAMBA_BACKPORTS_BINARIES=(ctdb ldb-tools libldb-dev libldb2 libnss-winbind libpam-winbind
    libsmbclient libsmbclient-dev libtalloc-dev libtalloc2 libtdb-dev libtdb1 libtevent-dev
    libtevent0 libwbclient-dev libwbclient0 python3-ldb python3-samba python3-talloc python3-tdb
    registry-tools samba samba-ad-dc samba-ad-provision samba-common samba-common-bin samba-dev
    samba-dsdb-modules samba-libs samba-testsuite samba-vfs-ceph samba-vfs-glusterfs
    samba-vfs-modules smbclient tdb-tools winbind)

# samba_reference_ok: true when every package of SAMBA_REFERENCE_PKGS is installed at
# SAMBA_REFERENCE_MIN or later.
samba_reference_ok() {
    local p v
    for p in "${SAMBA_REFERENCE_PKGS[@]}"; do
        v=$(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null) || return 1
        case "$v" in "install ok installed "*) ;; *) return 1 ;; esac
        dpkg --compare-versions "${v##* }" ge "$SAMBA_REFERENCE_MIN~" || return 1
    done
}

# samba_reference_write FILE SUDO: writes standard input to FILE when its content differs.
samba_reference_write() {
    local file=$1 sudo=$2 tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if ! cmp -s "$tmp" "$file" 2>/dev/null; then
        $sudo install -m 0644 "$tmp" "$file"
    fi
    rm -f "$tmp"
}

# samba_reference_sources SUDO: on bookworm, the backports source and the pin.
samba_reference_sources() {
    local sudo=$1 codename=
    # shellcheck disable=SC1091
    [ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ "$codename" = bookworm ] || return 0
    # A machine that already has bookworm-backports in its sources keeps its own entry.
    if ! grep -rqs --exclude="$(basename "$SAMBA_BACKPORTS_SOURCES")" 'bookworm-backports' \
        /etc/apt/sources.list /etc/apt/sources.list.d/; then
        samba_reference_write "$SAMBA_BACKPORTS_SOURCES" "$sudo" <<'EOF'
# Added by ringshare's scripts/install-deps.sh --test: Samba 4.22, the reference its tests
# compare with. Only Samba's packages are taken from here (ringshare-samba-backports).
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    # Backports stay below bookworm (100) except Samba's own packages, which are then picked at
    # their higher version.
    samba_reference_write "$SAMBA_BACKPORTS_PREFS" "$sudo" <<EOF
# Added by ringshare's scripts/install-deps.sh --test.
Package: *
Pin: release n=bookworm-backports
Pin-Priority: 100

Package: ${SAMBA_BACKPORTS_BINARIES[*]}
Pin: release n=bookworm-backports
Pin-Priority: 500
EOF
}

# samba_reference_install [SUDO]: installs or upgrades SAMBA_REFERENCE_PKGS to the reference.
samba_reference_install() {
    local sudo=${1:-} nss_saved rc=0
    samba_reference_sources "$sudo" || return 1
    samba_reference_ok && return 0
    $sudo apt-get update -qq || return 1
    nss_saved=$(mktemp)
    cp -p /etc/nsswitch.conf "$nss_saved" 2>/dev/null || : >"$nss_saved"
    # (`|| rc=`: under the caller's set -e a failure must still reach the nsswitch.conf check)
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${SAMBA_REFERENCE_PKGS[@]}" >/dev/null </dev/null || rc=$?
    if [ -s "$nss_saved" ] && ! cmp -s "$nss_saved" /etc/nsswitch.conf; then
        echo "install-deps: a Samba package changed /etc/nsswitch.conf; putting it back" >&2
        $sudo cp "$nss_saved" /etc/nsswitch.conf
    fi
    rm -f "$nss_saved"
    [ "$rc" -eq 0 ] || return "$rc"
    if ! samba_reference_ok; then
        echo "install-deps: ${SAMBA_REFERENCE_PKGS[*]} are not at $SAMBA_REFERENCE_MIN or later:" >&2
        dpkg-query -W "${SAMBA_REFERENCE_PKGS[@]}" >&2
        return 1
    fi
}
