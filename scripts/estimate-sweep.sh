#!/usr/bin/env bash
# The closed-loop estimate over 20 seeds per simulated path: median and
# p90 of |error| against the simulator's truth, share within +-10 %,
# share whose answer holds the truth (inside an exact answer's range, or
# on the right side of a bound with 10 % slack), stop reasons, median
# probe MB and streams per estimate. The closed-loop table in docs/evaluation.md
# comes from it. The last path is one ON/OFF source whose 25 Gbit/s
# peaks saturate the link for milliseconds.
#   scripts/estimate-sweep.sh [SEEDS] [METHOD]
# EXTRA=",coalescence=off" appends settings to every path; FIRST_SEED=201
# starts the seeds there instead of at 1. queue-fit is
# given each path's tight link capacity (10G, or 100G on the 100G paths).
set -euo pipefail
seeds=${1:-20}
method=${2:-multirate}
extra=${EXTRA:-}
bin=${TIGHTLINK:-target/release/tightlink}
paths=(
  "sim:"
  "sim:cross=smoothed:2.5G"
  "sim:hops=100G+100G,cross=none+bursty:25G"
  "sim:hops=100G+100G,cross=none+smoothed:25G"
  "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2"
)
printf '%-58s %6s %6s %7s %6s %6s %8s %8s  %s\n' path exact "+-10%" "median" p90 holds "MB" streams stops
for p in "${paths[@]}"; do
  flags=()
  if [ "$method" = queue-fit ]; then
    case $p in *100G*) flags=(--capacity 100G) ;; *) flags=(--capacity 10G) ;; esac
  fi
  for s in $(seq "${FIRST_SEED:-1}" $(( ${FIRST_SEED:-1} + seeds - 1 ))); do
    "$bin" estimate "$p$extra,seed=$s" --json --method "$method" "${flags[@]}" 2>/dev/null || echo '{}'
  done | python3 -c '
import collections, json, statistics, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
def holds(r):
    t, e = r.get("truth_bps"), r.get("available_bandwidth_bps")
    if t is None or e is None:
        return False
    if r["bound"] == "exact":
        return r["low_bps"] <= t <= r["high_bps"]
    return t >= 0.9 * e if r["bound"] == "at_least" else r["bound"] == "at_most" and t <= 1.1 * e
stops = collections.Counter(r.get("stop", "error") for r in rows)
stop_text = " ".join(k + " " + str(v) for k, v in sorted(stops.items()))
ok = [r for r in rows if r.get("bound") == "exact" and r.get("truth_bps")]
err = sorted(abs(r["available_bandwidth_bps"] / r["truth_bps"] - 1) for r in ok)
# Linear between order statistics (type 7), as in core::stats.
q = lambda v, p: statistics.quantiles(v, n=10, method="inclusive")[int(p * 10) - 1] if len(v) > 1 else float("nan")
mb = statistics.median(r["probe_bytes"] / 1e6 for r in rows if "probe_bytes" in r)
st = statistics.median(r["streams"] for r in rows if "streams" in r)
med = 100 * statistics.median(err) if err else float("nan")
print(f"{sys.argv[1]:<58} {len(ok):>3}/{len(rows):<2} {sum(e <= 0.10 for e in err):>3}/{len(rows):<2} {med:6.1f}% {100*q(err, 0.9):5.1f}% {sum(map(holds, rows)):>3}/{len(rows):<2} {mb:8.1f} {st:8.0f}  {stop_text}")
' "$p"
done
