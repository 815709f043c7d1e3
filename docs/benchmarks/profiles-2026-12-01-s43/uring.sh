#!/usr/bin/env bash
# session 43: io_uring operations, io-wq hand-offs and context switches per GiB of a row, per server (perf record of io_uring and sched tracepoints; uring.py sums them). Run as: RUNS=2 flock -o /tmp/rs-heavy.lock ./uring.sh LABEL=BIN ...
# a copy of faults.sh with perf record of io_uring and sched tracepoints in place of perf stat (servers from bench/lib.sh of the checkout at /work/main)
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
    perf record -q -a -e io_uring:io_uring_submit_req,io_uring:io_uring_complete,io_uring:io_uring_queue_async_work,io_uring:io_uring_task_work_run,syscalls:sys_enter_io_uring_enter,sched:sched_switch -o $OUT/$s-$row-$r.data -- sleep 100 >/dev/null 2>&1 &
    sleep 1
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
    echo "$s $row run$r: $res; minflt $((f1-f0))"
    perf script -i $OUT/$s-$row-$r.data -F pid,tid,event,trace 2>/dev/null | python3 /tmp/w34/uring.py $pid $bytes
  done
done
done
