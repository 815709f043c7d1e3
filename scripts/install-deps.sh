#!/usr/bin/env bash
# Install what ringshare needs on a fresh Debian machine: a Rust toolchain (rustup,
# if cargo is missing) and, for the tests, Debian's SMB clients and Samba.
#   scripts/install-deps.sh          build dependencies only
#   scripts/install-deps.sh --test   plus Samba 4.22 (samba, smbclient, smbtorture from
#                                    samba-testsuite; samba-ad-dc, winbind and libnss-winbind
#                                    for the AD member test), the reference every comparison runs
#                                    against: on Debian 12 from bookworm-backports, pinned to
#                                    Samba's packages (scripts/lib/samba-reference.sh), sssd
#                                    (sssd-common, sssd-ldap, libnss-sss, adcli: the AD member
#                                    test's second member; scripts/lib/sssd-member.sh), and
#                                    what the package test needs (dpkg-dev for
#                                    scripts/build-deb.sh, systemd for systemd-analyze),
#                                    prometheus (the metrics test scrapes with it) and
#                                    fail2ban (its fail2ban-regex tests the shipped filter; where
#                                    systemd runs, the package also starts its sshd jail) and
#                                    etcd-server (the cluster tests run their own members on
#                                    free loopback ports, never the packaged service) and MIT
#                                    Kerberos (krb5-kdc, krb5-admin-server, krb5-user: the
#                                    Kerberos tests run their own KDC in a temp dir; python3-gssapi
#                                    makes raw tokens, faketime moves a process's clock;
#                                    libkrb5-dev and python3-dev build pykrb5 for smbprotocol)
#                                    and dissect.util from PyPI in ~/.cache/ringshare/venv-compress
#                                    (the independent decompressors ringshare-compress's
#                                    differential test checks its streams against) and
#                                    btrfs-progs (mkfs.btrfs and read-only subvolume snapshots on
#                                    a loop-mounted image, for Previous Versions, issue 31) and
#                                    xfsprogs (mkfs.xfs -m reflink=1: block cloning on xfs,
#                                    tests/block_clone.rs) and
#                                    wsdd (its discovery mode is the independent WS-Discovery
#                                    client of tests/wsd.rs; its own service is disabled) and
#                                    python3-impacket (the sealed DCE/RPC client of the Witness
#                                    test, tests/py/witness_client.py) and qemu-system-x86,
#                                    busybox-static and quota (scripts/quota-vm.sh boots Debian's
#                                    own kernel, whose ext4 keeps quotas, for the kernel quota test;
#                                    it downloads linux-image-amd64 once)
set -euo pipefail
want_test=0
[ "${1:-}" = "--test" ] && want_test=1
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
pkgs=(ca-certificates curl gcc pkg-config)
[ "$want_test" -eq 1 ] && pkgs+=(python3 python3-venv acl attr
    prometheus dpkg-dev systemd iproute2 util-linux fail2ban etcd-server
    krb5-kdc krb5-admin-server krb5-user python3-gssapi faketime libkrb5-dev python3-dev btrfs-progs xfsprogs wsdd python3-impacket
    qemu-system-x86 busybox-static quota)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "$want_test" -eq 1 ]; then
    # shellcheck source=scripts/lib/samba-reference.sh
    . "$(dirname "$0")/lib/samba-reference.sh"
    samba_reference_install "$SUDO"
    # shellcheck source=scripts/lib/sssd-member.sh
    . "$(dirname "$0")/lib/sssd-member.sh"
    sssd_member_install "$SUDO"
fi
# Where systemd runs, the etcd-server package starts a single-member etcd on 2379; the tests do
# not use it and it is not wanted on a build machine.
if [ "$want_test" -eq 1 ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true
    # Likewise wsdd, which would announce the machine on its networks.
    $SUDO systemctl disable --now wsdd >/dev/null 2>&1 || true
fi
if [ "$want_test" -eq 1 ]; then
    venv="$HOME/.cache/ringshare/venv-compress"
    if ! "$venv/bin/python" -c 'import dissect.util.compression' >/dev/null 2>&1; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q 'dissect.util==3.24'
    fi
fi
if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy,rustfmt
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
# The SMB-over-QUIC interop test's client (crates/ringshare/tests/quic.rs): the smb-rs harness,
# a cargo workspace of its own (smb needs Rust 1.89), built once here (about 1.5 minutes cold, 2
# cores, unoptimised: interop/smb-rs/Cargo.toml) so that the test only finds it up to date.
if [ "$want_test" -eq 1 ]; then
    root=$(cd "$(dirname "$0")/.." && pwd)
    (cd "$root/interop/smb-rs" &&
        CARGO_TARGET_DIR="${INTEROP_TARGET:-$root/target/interop-smb-rs}" cargo build --release --quiet) ||
        echo "install-deps: the smb-rs harness did not build; tests/quic.rs will print SKIPPED" >&2
fi
