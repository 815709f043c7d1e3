# bench/cpu.sh: `lib_cpu`, the CPU a run measured on; sourced by bench/lib.sh, bench/limit,
# bench/cluster, bench/metrics-overhead, bench/notify-overhead and bench/quic-libs/run.
# The CPU model, its count, and the vector features AES-GCM and copies depend on (VAES, AVX-512):
# one model name covers EPYCs with and without them, so each compare run says which it had.
# Also the TCP congestion control and default qdisc: with BBR over a qdisc other than fq, TCP
# paces itself with a timer, on loopback too; that path was 19 % of a seq-read's server samples,
# and seq-read cost every server about 40 % less CPU under cubic (docs/benchmarks.md, session 67).
lib_cpu() {
    local flags feats="" f
    flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1) "
    for f in vaes avx512f avx2 aes; do
        case "$flags" in *" $f "*) feats="$feats $f" ;; *) feats="$feats no-$f" ;; esac
    done
    local tcp
    tcp="tcp $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo '?')"
    tcp="$tcp/$(cat /proc/sys/net/core/default_qdisc 2>/dev/null || echo '?')"
    echo "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) ($(nproc) CPUs;$feats; $tcp)"
}
