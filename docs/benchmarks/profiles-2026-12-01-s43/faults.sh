#!/usr/bin/env bash
# session 43: what each copy-mode new-file run costs in page faults and mmap-family calls (whole process, /proc/PID/stat minflt; perf stat -p). Run as: flock -o /tmp/rs-heavy.lock ./faults.sh splice=/tmp/bins/rs-810171c copy=/tmp/bins/copy-810171c (servers from bench/lib.sh; 2 rounds)
# per server: minor faults (whole process, /proc/PID/stat) and mmap/munmap/madvise/brk calls during one new-file row
set -euo pipefail
cd /work/main
ROOT=/work/main
OUT=${OUT:-/tmp/w34/faults-$(date +%H%M%S)}
mkdir -p "$OUT"
. bench/lib.sh
BASE=/tmp/w34base
PORT0=24561
DUR=5s
RUNS=${RUNS:-2}
ROWS=${ROWS:-new}
BINS=("$@")
RS=${BINS[0]#*=}
lib_data; rm -rf "$BASE"; mkdir -p "$BASE"; lib_warm_memory
lib_start_servers "$PORT0" 0 1 "${BINS[@]}"
RESULTS=$OUT/results.jsonl; : >"$RESULTS"
minflt() { awk '{print $10}' /proc/$1/stat; }
for r in $(seq 1 $RUNS); do
for s in "${SERVERS[@]}"; do
  for row in ${ROWS//,/ }; do
    pid=${PID_OF[$s]}
    [ "$row" = new ] && lib_fresh rsnew.bin
    perf stat -x, -e page-faults,syscalls:sys_enter_mmap,syscalls:sys_enter_munmap,syscalls:sys_enter_madvise,syscalls:sys_enter_brk,syscalls:sys_enter_mremap -p $pid -o $OUT/$s-$row-$r.stat &
    pp=$!
    f0=$(minflt $pid)
    case $row in
      new) SETTLE=0 lib_row "$s" new ;;
      *) lib_row "$s" "$row" ;;
    esac
    f1=$(minflt $pid)
    kill -INT $pp; wait $pp || true
    res=$(tail -n1 $RESULTS | python3 -c 'import json,sys;r=json.load(sys.stdin)["result"];print("%.3f GB/s srv %.3f cli %.3f bytes %d"%(r["gb_per_s"],r["server_cpu_s_per_gib"],r["client_cpu_s_per_gib"],r["bytes"]))')
    bytes=$(tail -n1 $RESULTS | python3 -c 'import json,sys;print(json.load(sys.stdin)["result"]["bytes"])')
    echo "$s $row run$r: $res; minflt $((f1-f0)) = $(python3 -c "print('%.0f'%(($f1-$f0)/($bytes/2**30)))") per GiB; $(grep -v '^#' $OUT/$s-$row-$r.stat | grep . | awk -F, '{printf "%s=%s ", $3, $1}')"
  done
done
done
