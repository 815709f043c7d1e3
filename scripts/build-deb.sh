#!/usr/bin/env bash
# Build the Debian package: scripts/build-deb.sh [--out DIR] [--profile P]
#   (default DIR: target/debian; P: release, the build to ship; `dev` packages the test build,
#   which the package test uses to check the packaging without a release build of its own)
# Prints the path of ringshare_<version>_<arch>.deb on its last line.
#
# It installs /usr/sbin/ringshare, the conffile /etc/ringshare/smb.conf (no share until the
# admin adds one), the unit /lib/systemd/system/ringshare.service and the docs; the
# maintainer scripts register the unit without enabling it (packaging/deb/).
#
# A plain `dpkg-deb --build` of a staged tree rather than cargo-deb: nothing to install from
# crates.io (CI reaches only package registries and cargo-deb would be one more tool to build
# and pin), and every byte of the package is visible here and in packaging/deb/. Depends come
# from dpkg-shlibdeps (dpkg-dev), as a debian/rules build would compute ${shlibs:Depends}.
# The release build is cargo's: an up-to-date target/release/ringshare is reused as is.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

out=target/debian
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
    --out)
        [ $# -ge 2 ] || { echo "build-deb.sh: --out needs a directory" >&2; exit 2; }
        out=$2
        shift 2
        ;;
    --profile)
        [ $# -ge 2 ] || { echo "build-deb.sh: --profile needs a cargo profile" >&2; exit 2; }
        profile=$2
        shift 2
        ;;
    -h | --help)
        sed -n '2,5p' "$0"
        exit 0
        ;;
    *)
        echo "build-deb.sh: unknown argument '$1' (usage: scripts/build-deb.sh [--out DIR] [--profile P])" >&2
        exit 2
        ;;
    esac
done

for tool in dpkg-deb dpkg-shlibdeps strip; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build-deb.sh: $tool not found (apt-get install -y dpkg-dev binutils)" >&2
        exit 1
    fi
done
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

# The version of [workspace.package] in Cargo.toml; a semver pre-release (1.0.0-rc.1) sorts
# before its release in Debian only with '~' (1.0.0~rc.1).
version=$(awk '
    /^\[/ { section = $0; next }
    section == "[workspace.package]" && $1 == "version" {
        gsub(/["[:space:]]/, "", $3); print $3; exit
    }' Cargo.toml)
[ -n "$version" ] || { echo "build-deb.sh: no version in Cargo.toml [workspace.package]" >&2; exit 1; }
deb_version=${version//-/\~}
arch=$(dpkg --print-architecture)

cargo build --profile "$profile" -p ringshare
case $profile in
dev | test) bin=target/debug/ringshare ;;
*) bin=target/$profile/ringshare ;;
esac
built=$("$bin" --version)
if [ "$built" != "ringshare $version" ]; then
    echo "build-deb.sh: $bin says '$built', Cargo.toml says $version" >&2
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ringshare-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps wants the layout of a source package: debian/control, debian/PACKAGE/...
stage=$work/debian/ringshare
install -d -m 0755 "$stage/DEBIAN" "$stage/usr/sbin" "$stage/etc/ringshare" \
    "$stage/lib/systemd/system" "$stage/usr/share/doc/ringshare"
install -m 0755 "$bin" "$stage/usr/sbin/ringshare"
# Debian ships binaries without debug information (the release profile keeps line tables).
strip --strip-debug --remove-section=.comment "$stage/usr/sbin/ringshare"
install -m 0644 packaging/deb/smb.conf "$stage/etc/ringshare/smb.conf"
install -m 0644 packaging/deb/ringshare.service "$stage/lib/systemd/system/ringshare.service"
install -m 0644 packaging/deb/copyright "$stage/usr/share/doc/ringshare/copyright"
for doc in README.md docs/security.md; do
    gzip -9n <"$doc" >"$stage/usr/share/doc/ringshare/$(basename "$doc").gz"
done
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
date=$(git log -1 --format=%aD 2>/dev/null || date -R)
printf 'ringshare (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
    "$deb_version" "$commit" "${DEBFULLNAME:-ringshare developers} <${DEBEMAIL:-ringshare@invalid}>" "$date" |
    gzip -9n >"$stage/usr/share/doc/ringshare/changelog.gz"
chmod 0644 "$stage/usr/share/doc/ringshare/"*.gz
for script in postinst prerm postrm; do
    install -m 0755 "packaging/deb/$script" "$stage/DEBIAN/$script"
done
echo /etc/ringshare/smb.conf >"$stage/DEBIAN/conffiles"

printf 'Source: ringshare\n\nPackage: ringshare\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/ringshare/usr/sbin/ringshare 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build-deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
installed_kib=$(du -k -s --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<EOF
Package: ringshare
Version: $deb_version
Architecture: $arch
Maintainer: ${DEBFULLNAME:-ringshare developers} <${DEBEMAIL:-ringshare@invalid}>
Installed-Size: $installed_kib
Depends: $depends
Suggests: avahi-daemon, smbclient
Section: net
Priority: optional
Description: SMB 2/3 file server for Linux on io_uring
 ringshare serves directories to Windows, macOS and Linux clients over SMB 2.0.2 to 3.1.1
 (signing, encryption, multichannel, durable handles, leases, ACLs, Time Machine), reading
 Samba's smb.conf options and smbpasswd file. Run as root it acts as each user's Unix
 account, as Samba does; its data path runs on io_uring.
 .
 The service ringshare.service is installed disabled: add a share to
 /etc/ringshare/smb.conf, then systemctl enable --now ringshare.
EOF

mkdir -p "$out"
deb=$out/ringshare_${deb_version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
case "$deb" in /*) ;; *) deb=$root/$deb ;; esac
echo "$deb"
