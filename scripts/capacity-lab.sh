#!/usr/bin/env bash
# Capacity methods on real packets (README "Capacity", BENCHMARKS.md): the
# shipped `shaper500` lab (a 500 Mbit/s tbf, 3000-byte bucket), server in
# the receiver namespace, REPEAT runs of `tightlink capacity`. Prints one
# Markdown row per method: median and worst error against 500 Mbit/s, how
# often the shaper was found, median probe MB and time.
# Usage: sudo scripts/capacity-lab.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-10}
cargo build --release -q -p tightlink
tl=target/release/tightlink
name=capbench
$tl lab up shaper500 --name $name >/dev/null
trap '$tl lab down shaper500 --name $name >/dev/null; kill $srv 2>/dev/null || true' EXIT
ip netns exec tllab-$name-rcv $tl server --bind 10.77.2.2 >/dev/null 2>&1 &
srv=$!
sleep 1
echo "| method | runs | median error | worst error | shaper found | bucket (median) | probe MB | time |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for i in $(seq 1 "$repeat"); do
  ip netns exec tllab-$name-snd $tl capacity 10.77.2.2 --json || echo '{"failed": true}'
done | python3 -c "
import json, sys, statistics as st
rows = {}
for l in sys.stdin:
    j = json.loads(l)
    rows.setdefault(j.get('method', 'failed run'), []).append(j)
for m, rs in rows.items():
    if m == 'failed run':
        print(f'| (failed runs) | {len(rs)} | | | | | | |'); continue
    err = [abs(r['capacity_bps'] / 500e6 - 1) * 100 if r['capacity_bps'] and r['bound'] == 'exact' else float('inf') for r in rs]
    shaped = sum(1 for r in rs if r['shaper_rate_bps'])
    buckets = [r['shaper_bucket_bytes'] for r in rs if r['shaper_bucket_bytes']]
    med = lambda k: st.median(r[k] for r in rs)
    print(f\"| {m} | {len(rs)} | {st.median(err):.1f} % | {max(err):.1f} % | {shaped}/{len(rs)} | {st.median(buckets) if buckets else 0:.0f} B | {med('probe_bytes')/1e6:.1f} | {med('duration_s'):.2f} s |\")
"
