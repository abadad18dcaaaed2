#!/usr/bin/env bash
# Every closed-loop method on six simulated paths, looking for answers
# that are off without saying so: per method and path, the exact answers'
# median |error|, how many answers hold the truth (an exact answer's range
# holds it, or a bound is on the right side with 10 % slack), how many
# runs carried a warning, and "silent": answers more than 15 % off (or a
# bound on the wrong side) whose range misses the truth, with no warning.
#   scripts/method-survey.sh [SEEDS] [METHODS...]
set -euo pipefail
seeds=${1:-10}
shift || true
methods=("$@")
bin=${TIGHTLINK:-target/release/tightlink}
if [ ${#methods[@]} -eq 0 ]; then
  methods=(multirate multirate-single-pass multirate-prcmt-dp1 multirate-prcmt-dp2 prcmt prcmt-pba
    pathload imr-avg imr-wavelet topp pathchirp bart igi ptr spruce)
fi
paths=(
  "sim:"
  "sim:cross=smoothed:2.5G"
  "sim:hops=100G+100G,cross=none+bursty:25G"
  "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2"
  "sim:coalescence=off"
  "sim:loss=0.01"
)
printf '%-22s %-44s %5s %7s %6s %6s %6s\n' method path exact median holds warned silent
for m in "${methods[@]}"; do
  for p in "${paths[@]}"; do
    for s in $(seq 1 "$seeds"); do
      "$bin" estimate "$p,seed=$s" --json --method "$m" 2>/dev/null || echo '{}'
    done | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
exact = holds = warned = silent = 0
err = []
for r in rows:
    t, e = r.get("truth_bps"), r.get("available_bandwidth_bps")
    if t is None or e is None or r.get("bound") == "none":
        continue
    w = bool(r.get("warnings"))
    warned += w
    if r["bound"] == "exact":
        exact += 1
        x = abs(e / t - 1)
        err.append(x)
        h = r["low_bps"] <= t <= r["high_bps"]
        bad = x > 0.15 and not h
    else:
        h = t >= 0.9 * e if r["bound"] == "at_least" else t <= 1.1 * e
        bad = not h
    holds += h
    silent += bad and not w
med = f"{100 * statistics.median(err):.1f}%" if err else "-"
print(f"{sys.argv[1]:<22} {sys.argv[2][:44]:<44} {exact:>2}/{len(rows):<2} {med:>7} {holds:>6} {warned:>6} {silent:>6}")
' "$m" "$p"
  done
done
