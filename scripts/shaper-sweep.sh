#!/usr/bin/env bash
# `tightlink estimate --method auto` on simulated paths with token buckets
# (and FIFO paths beside them, where the shaper trains must change
# nothing), SEEDS seeds each: median and p90 of |error| against the
# simulator's truth, the `at_most` answers (and how many hold the truth),
# the answers that are wrong (an exact range or a bound that misses the
# truth, exact answers within 10 % not counted), `shaped` stops, median
# probe MB. The token-bucket figures in docs/evaluation.md come from it.
#   scripts/shaper-sweep.sh [SEEDS]
# TIGHTLINK=path picks the binary; FIRST_SEED=101 starts the seeds there.
set -euo pipefail
seeds=${1:-100}
first=${FIRST_SEED:-1}
bin=${TIGHTLINK:-target/release/tightlink}
paths=(
  "sim:cross=bursty:2G,shaper=6G/256KB"
  "sim:cross=bursty:1G,shaper=5G/256KB"
  "sim:cross=smoothed:2G,shaper=6G/256KB"
  "sim:cross=cbr:2G,shaper=6G/256KB"
  "sim:cross=none,shaper=5G/256KB"
  "sim:cross=none,shaper=5G/64KB"
  "sim:cross=bursty:2G,shaper=6G/256KB,coalescence=off"
  "sim:cross=smoothed:2G,shaper=6G/256KB,coalescence=off"
  "sim:cross=bursty:1G,shaper=5G/256KB,coalescence=off"
  "sim:cross=cbr:2G,shaper=6G/256KB,coalescence=off"
  "sim:cross=bursty:2G,shaper=8G/256KB"
  "sim:hops=1G,cross=none,shaper=200M/256KB,coalescence=off"
  "sim:"
  "sim:loss=1%"
  "sim:coalescence=off"
  "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2"
  "sim:cross=bursty:2.5G:sources=2:on=2ms:duty=0.1:shape=1.2"
)
printf '%-56s %5s %7s %7s %10s %6s %7s %7s\n' path runs median p90 at_most wrong shaped MB
for p in "${paths[@]}"; do
  sep=","
  [ "$p" = "sim:" ] && sep=""
  for s in $(seq "$first" $((first + seeds - 1))); do
    "$bin" estimate "$p${sep}seed=$s" --json --method auto 2>/dev/null || echo '{}'
  done | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
rows = [r for r in rows if r.get("truth_bps")]
def holds(r):
    t, e = r["truth_bps"], r["available_bandwidth_bps"]
    if r["bound"] == "exact":
        return r["low_bps"] <= t <= r["high_bps"] or abs(e / t - 1) <= 0.10
    return t <= e if r["bound"] == "at_most" else r["bound"] == "at_least" and t >= e
err = sorted(100 * abs(r["available_bandwidth_bps"] / r["truth_bps"] - 1) for r in rows)
# Linear between order statistics (type 7), as in core::stats.
p90 = statistics.quantiles(err, n=10, method="inclusive")[8] if len(err) > 1 else float("nan")
most = [r for r in rows if r["bound"] == "at_most"]
shaped = sum(r["stop"] == "shaped" for r in rows)
mb = statistics.median(r["probe_bytes"] / 1e6 for r in rows)
print(f"{sys.argv[1]:<56} {len(rows):>5} {statistics.median(err):6.1f}% {p90:6.1f}% {len(most):>4} ({sum(map(holds, most))}) {sum(not holds(r) for r in rows):>6} {shaped:>7} {mb:7.1f}")
' "$p"
done
