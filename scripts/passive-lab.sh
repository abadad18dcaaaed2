#!/usr/bin/env bash
# Passive estimators on real CUBIC transfers (docs/evaluation.md, "Passive
# TCP"): REPEAT runs of `tightlink lab tcp` on the
# shipped `quiet` (200 Mbit/s tbf, 100 KB queue) and `tcp-random-loss`
# (the same behind 0.05 % random drops) labs. Prints one Markdown row per
# scenario: capacity and buffer errors (median, worst), losses called
# right by true cause (summed over runs), spurious events left out.
# Usage: sudo scripts/passive-lab.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-10}
cargo build --release -q -p tightlink
tl=target/release/tightlink
echo "| scenario | runs | capacity error median / worst | buffer error median / worst | overflows called congestion | random drops called random | spurious events left out |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in quiet tcp-random-loss; do
  $tl lab tcp $s --name passbench --repeat "$repeat" --json | python3 -c "
import json, sys, statistics as st
rs = [json.loads(l) for l in sys.stdin]
def pair(k):
    v = [abs(r[k]) * 100 for r in rs if r[k] is not None]
    return f'{st.median(v):.1f} % / {max(v):.1f} %' if v else '-'
t = lambda k: sum(r['truth'][k] for r in rs)
oc, orr, rr, rc = t('overflow_as_congestion'), t('overflow_as_random'), t('random_as_random'), t('random_as_congestion')
frac = lambda a, n: f'{a}/{n} ({100*a/n:.0f} %)' if n else '0/0'
print(f\"| $s | {len(rs)} | {pair('capacity_error')} | {pair('buffer_error')} | {frac(oc, oc+orr)} | {frac(rr, rr+rc)} | {sum(r['spurious_events'] for r in rs)} |\")
"
done
