#!/bin/sh
# Runs a command as root in a QEMU guest booted with Debian 12's own kernel (linux-image-amd64,
# 6.1), whose ext4 keeps quotas (CONFIG_QFMT_V2) and which has xfs, for the quota tests this machine's kernel cannot
# run (docs/limits.md, "Quotas"). The guest's root is this machine's root file system, read-only
# over 9p under a tmpfs overlay (what the guest writes is gone when it stops), so the command sees
# the same binaries, test programs and Samba; /vmout in the guest is OUT here (writable).
#   scripts/quota-vm.sh [--out OUT] COMMAND...     prints the command's output; exits with its status
# The kernel package is downloaded once (apt-get download) into QVM_DIR (default /var/cache/ringshare-quota-vm).
# The guest runs under QEMU's own emulation (TCG): on this project's machines KVM guests hang at
# boot (nested virtualisation), and TCG boots in seconds; QVM_ACCEL=-enable-kvm QVM_CPU_MODEL=
# "-cpu host" to try KVM. QVM_MEM (3G), QVM_CPUS (2), QVM_TIMEOUT (900 s).
# Needs root, qemu-system-x86 and busybox-static (scripts/install-deps.sh --test).
set -eu
OUT=""
if [ "${1:-}" = "--out" ]; then OUT=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [--out OUT] COMMAND..." >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || { echo "quota-vm: needs qemu-system-x86" >&2; exit 2; }
[ -x /bin/busybox ] || { echo "quota-vm: needs busybox-static" >&2; exit 2; }
DIR=${QVM_DIR:-/var/cache/ringshare-quota-vm}
mkdir -p "$DIR"
PKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
KVER=${PKG#linux-image-}
ROOT="$DIR/$KVER"
if [ ! -f "$ROOT/boot/vmlinuz-$KVER" ]; then
    (cd "$DIR" && apt-get download "$PKG" >/dev/null 2>&1)
    mkdir -p "$ROOT" && dpkg-deb -x "$DIR"/"$PKG"_*.deb "$ROOT"
    depmod -b "$ROOT" "$KVER"
fi
MODS="$ROOT/lib/modules/$KVER"
grep -q '^CONFIG_QFMT_V2=' "$ROOT/boot/config-$KVER" || { echo "quota-vm: $PKG has no QFMT_V2" >&2; exit 2; }
# The initramfs: busybox, the modules (with what they need, in order) and /init.
WORK=$(mktemp -d /tmp/quota-vm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
I="$WORK/initrd"
mkdir -p "$I/bin" "$I/mods" "$I/proc" "$I/sys" "$I/dev" "$I/tmp"
cp /bin/busybox "$I/bin/busybox"
order=""
add() { # module name: its dependencies first, each once
    local dep path d
    dep=$(grep -E "/$1\.ko:" "$MODS/modules.dep" | head -1)
    [ -n "$dep" ] || { echo "quota-vm: no module $1" >&2; exit 1; }
    for d in ${dep#*:}; do add "$(basename "$d" .ko)"; done
    path=${dep%%:*}
    case " $order " in *" $path "*) ;; *) order="$order $path"; cp "$MODS/$path" "$I/mods/" ;; esac
}
for m in virtio_pci 9pnet_virtio 9p overlay loop crc32c_generic ext4 quota_v2 xfs; do add "$m"; done
for p in $order; do echo "$(basename "$p")"; done > "$I/mods/order"
cat > "$I/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m || echo "insmod $m failed"; done
for i in 1 2 3 4 5 6 7 8 9 10; do grep -qs hostroot /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag && break; sleep 0.2; done
mkdir -p /host /rw /new
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro hostroot /host
mount -t tmpfs -o size=1500m tmpfs /rw; mkdir -p /rw/up /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/up,workdir=/rw/work /new
mount -t proc proc /new/proc; mount -t sysfs sys /new/sys; mount -t devtmpfs dev /new/dev
mkdir -p /new/dev/pts /new/dev/shm; mount -t devpts devpts /new/dev/pts; mount -t tmpfs tmpfs /new/dev/shm
mount -t tmpfs -o size=1g tmpfs /new/tmp; mount -t tmpfs tmpfs /new/run
mkdir -p /new/vmout; mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmout /new/vmout
# The guest's /tmp is its own: the host's directories the command lives in under /tmp (a CI clone
# in /tmp, its test binaries) are laid over it as the root is (the host's files read-only, what
# the guest writes there, e.g. smbtorture's output directory in the working directory, in tmpfs).
i=0
for p in $(cat /new/vmout/binds 2>/dev/null); do
    i=$((i+1)); mkdir -p "/new$p" "/rw/b$i/up" "/rw/b$i/work"
    mount -t overlay overlay -o "lowerdir=/host$p,upperdir=/rw/b$i/up,workdir=/rw/b$i/work" "/new$p"
done
chroot /new /bin/sh -c 'ip link set lo up; cd /vmout; exec sh /vmout/cmd' > /new/vmout/log 2>&1
echo $? > /new/vmout/rc
sync
poweroff -f
INIT
chmod +x "$I/init"
(cd "$I" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$WORK/initrd.gz"
[ -n "$OUT" ] || OUT="$WORK/out"
mkdir -p "$OUT"
{
    echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root'
    printf 'cd %s\n' "$(pwd)"
    for a in "$@"; do printf "'%s' " "$(printf '%s' "$a" | sed "s/'/'\\\\''/g")"; done
    echo
} > "$OUT/cmd"
# What of the command's directory and arguments lies under /tmp, which the guest mounts afresh:
# each such top directory (/tmp/X) is bound into the guest from the host.
for a in "$(pwd)" "$@"; do
    case "$a" in /tmp/?*) r=${a#/tmp/}; echo "/tmp/${r%%/*}" ;; esac
done | sort -u > "$OUT/binds"
rm -f "$OUT/rc" "$OUT/log"
timeout "${QVM_TIMEOUT:-900}" qemu-system-x86_64 ${QVM_ACCEL--accel tcg} ${QVM_CPU_MODEL--cpu max} -m "${QVM_MEM:-3G}" -smp "${QVM_CPUS:-2}" \
    -kernel "$ROOT/boot/vmlinuz-$KVER" -initrd "$WORK/initrd.gz" \
    -append "console=ttyS0 ${QVM_QUIET-quiet} panic=-1 rdinit=/init" -nographic -no-reboot \
    -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on \
    -virtfs "local,path=$OUT,mount_tag=vmout,security_model=passthrough" >"$WORK/console" 2>&1 || true
if [ ! -f "$OUT/rc" ]; then
    echo "quota-vm: the guest did not finish; its console:" >&2
    tail -c 3000 "$WORK/console" >&2
    exit 1
fi
cat "$OUT/log"
exit "$(cat "$OUT/rc")"
