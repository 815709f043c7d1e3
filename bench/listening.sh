# bench/listening.sh: sourced by bench/limit and bench/profile-plain-sender.

# The address a `ringshare limit` helper (sink, recv, quic-send) started as PID says it listens
# on, read from ERR (its stderr, created empty before it started): waited for up to 5 s while
# the helper runs; empty when it never says.
listening_on() { # err pid
    local a="" _
    for _ in $(seq 1 100); do
        a=$(sed -n 's/.*listening on //p' "$1" 2>/dev/null | head -1)
        [ -n "$a" ] && break
        kill -0 "$2" 2>/dev/null || break
        sleep 0.05
    done
    printf '%s' "$a"
}
