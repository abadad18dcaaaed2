#!/usr/bin/env bash
# Capacity methods on the simulator (docs/evaluation.md, "Capacity and per hop"): a 10 Gbit/s
# narrow link behind a 40 Gbit/s first hop, cross traffic on the narrow
# link, no receiver coalescence; 10 seeds per row. Prints one Markdown row
# per cross-traffic load and method: median and worst error, pairs sent,
# probe MB and simulated time per estimate (medians).
# Usage: scripts/capacity-sim.sh [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-10}
cargo build --release -q -p tightlink
echo "| cross traffic on the 10G hop | method | median error | worst error | pairs sent | trains | probe MB | path time |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for cross in bursty:3G poisson:3G cbr:3G bursty:6G bursty:8G; do
  for seed in $(seq 1 "$seeds"); do
    target/release/tightlink capacity --json "sim:hops=40G+10G,cross=none+$cross,coalescence=off,seed=$seed"
  done | python3 -c "
import json, sys, statistics as st
rows = {}
for l in sys.stdin:
    j = json.loads(l)
    rows.setdefault(j['method'], []).append(j)
for m, rs in rows.items():
    err = [abs(r['capacity_bps'] / r['truth_bps'] - 1) * 100 if r['capacity_bps'] else float('inf') for r in rs]
    med = lambda k: st.median(r[k] for r in rs)
    print(f\"| $cross | {m} | {st.median(err):.2f} % | {max(err):.2f} % | {med('pairs_sent'):.0f} | {med('trains'):.0f} | {med('probe_bytes')/1e6:.2f} | {med('duration_s')*1e3:.1f} ms |\")
"
done
