# shellcheck shell=bash
# A FUSE share for the scripts that measure one (scripts/fuse-stall-demo.sh,
# scripts/fuse-read-bench.sh): an ext4 file system on a loop device at $W/under, owned by the
# Unix user $USER_NAME (made when missing), served through scripts/stall-fuse.py at $W/share;
# the server's configuration; and its clean-up. The caller sets W, USER_NAME, PY, PIDS=() and
# LOOP="" first (and PORT, PASS for the configuration).

# $W/under: a 512 MiB ext4 image on a loop device, and the user.
fuse_share_under() {
    mkdir -p "$W/under" "$W/share"
    truncate -s 512M "$W/img"
    mkfs.ext4 -q -F "$W/img"
    LOOP=$(losetup -f --show "$W/img")
    mount "$LOOP" "$W/under"
    getent passwd "$USER_NAME" >/dev/null || useradd -M -s /usr/sbin/nologin "$USER_NAME"
}

# $W/under through stall-fuse.py (its further arguments: "$@") at $W/share, once mounted.
fuse_share_mount() {
    setsid "$PY" scripts/stall-fuse.py "$W/under" "$W/share" "$@" >"$W/fuse.out" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1 50); do mountpoint -q "$W/share" && break; sleep 0.1; done
    mountpoint -q "$W/share" || { cat "$W/fuse.out" >&2; exit 1; }
}

# $W/rs.conf: a server on 127.0.0.1:$PORT with one share, `share`, of $W/share (its further
# lines: "$2"), and $USER_NAME added with the password $PASS by ringshare binary "$1".
fuse_share_config() {
    cat >"$W/rs.conf" <<CONF
[global]
smb passwd file = $W/smbpasswd
listen = 127.0.0.1:$PORT
[share]
path = $W/share
read only = no
${2:-}
CONF
    printf '%s\n%s\n' "$PASS" "$PASS" | "$1" user add --config "$W/rs.conf" --password-stdin "$USER_NAME" >/dev/null
}

# The processes in PIDS stopped (waited for up to 5 s each), both mounts gone, the loop device
# freed, $W removed.
fuse_share_cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    done
    mountpoint -q "$W/share" && umount "$W/share"
    mountpoint -q "$W/under" && umount "$W/under"
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
    rm -rf "$W"
}
