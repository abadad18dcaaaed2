#!/usr/bin/env bash
# Per-hop capacity on the simulator (docs/evaluation.md, "Capacity and per hop"): REPEAT
# seeds of `tightlink hops` on the default pathchar-era path (1G, OC-3 with
# 20 % Poisson cross traffic, T3 with 10 %, 100M; lone probes) and on the
# lab's chain (600/400/200M token buckets on 10G links; --behind 16).
# Prints one Markdown row per target and link: error against the link's
# sustained rate (median, worst), runs that answered a number.
# Usage: scripts/hops-sim.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-10}
cargo build --release -q -p tightlink
tl=target/release/tightlink
echo "| path | mode | link | truth | runs measured | median error | worst error | probes, MB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for case in "default|lone|" "sim:hops=10G+10G+10G+10G,shaper=none+600M/3000B+400M/3000B+200M/3000B,cross=none|behind|--behind 16"; do
  IFS='|' read -r target mode extra <<<"$case"
  t=$target; [ "$t" = default ] && t=""
  for i in $(seq "$repeat"); do
    # shellcheck disable=SC2086
    $tl hops $t $extra --json --seed "$i" 2>/dev/null | sed "s/\"target\"/\"seedrun\":$i,\"target\"/"
  done | python3 -c "
import json, sys, statistics as st
rs = [json.loads(l) for l in sys.stdin]
name = '$target' if '$target' == 'default' else 'chain 600/400/200M'
for ttl in sorted({l['ttl'] for r in rs for l in r['links']}):
    ls = [l for r in rs for l in r['links'] if l['ttl'] == ttl]
    truth = ls[0]['truth_bps']
    got = [l['capacity_bps'] for l in ls if l['status'] == 'measured']
    err = [abs(g / truth - 1) * 100 for g in got]
    e = (f'{st.median(err):.1f} %', f'{max(err):.1f} %') if err else ('-', '-')
    p = f\"{rs[0]['probes']}, {rs[0]['probe_bytes']/1e6:.2f}\"
    print(f'| {name} | $mode | {ttl} | {truth/1e6:.0f}M | {len(got)}/{len(ls)} | {e[0]} | {e[1]} | {p} |')
"
done
