#!/usr/bin/env bash
# session 43: 1 MiB overwrites from 4 connections, A/B, interleaved rounds
set -euo pipefail
cd /work/main
ROOT=/work/main
OUT=${OUT:-/tmp/w34/signed-$(date +%H%M%S)}
mkdir -p "$OUT"
. bench/lib.sh
BASE=/tmp/w34base2
PORT0=24591
DUR=5s
BINS=("$@")
RS=${BINS[0]#*=}
lib_data; rm -rf "$BASE"; mkdir -p "$BASE"
lib_start_servers "$PORT0" 0 0 "${BINS[@]}"
RESULTS=$OUT/results.jsonl; : >"$RESULTS"
for r in 1 2 3 4 5; do
  order=("${SERVERS[@]}"); [ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${SERVERS[@]}" | tac))
  for s in "${order[@]}"; do
    lib_bench "$s" "seq-write 1m overwrite 4 conns" seq-write --file rsover.bin --file-size 2g --io-size 1m --queue-depth 16 --connections 4
  done
done
python3 - "$RESULTS" <<'PY'
import json,sys,statistics as st
d={}
for l in open(sys.argv[1]):
    j=json.loads(l); r=j['result']; d.setdefault(j['server'],[]).append((r['gb_per_s'],r['server_cpu_s_per_gib'],r['client_cpu_s_per_gib']))
for s,v in d.items():
    f=lambda i:"%.3f (%.3f-%.3f)"%(st.median([x[i] for x in v]),min(x[i] for x in v),max(x[i] for x in v))
    print("%-6s GB/s %s  server s/GiB %s  client s/GiB %s"%(s,f(0),f(1),f(2)))
    print("       per round:", "  ".join("%.2f/%.3f/%.3f"%x for x in v))
PY
