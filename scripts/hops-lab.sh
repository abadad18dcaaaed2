#!/usr/bin/env bash
# Per-hop capacity on real packets (docs/evaluation.md, "Capacity and per
# hop"): the shipped `chain3` lab (tbf 600, 400 then 200 Mbit/s on
# routers 1-3), REPEAT runs of `tightlink hops --behind 16 --cpu 0` from the
# sender and REPEAT of lone probes (classic pathchar). Prints one Markdown
# row per mode and link: the links' readings against their tbf (median and
# worst error, runs that answered a number).
# Usage: sudo scripts/hops-lab.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-10}
cargo build --release -q -p tightlink
tl=$PWD/target/release/tightlink
$tl lab up chain3 --name hopsbench >/dev/null
trap '$tl lab down chain3 --name hopsbench >/dev/null' EXIT
echo "| mode | link (ttl) | tbf | runs measured | median error | worst error | median reading | others |"
echo "|---|---|---:|---:|---:|---:|---:|---|"
for mode in behind lone; do
  args=(--cpu 0 --json)
  [ $mode = behind ] && args+=(--behind 16)
  for i in $(seq "$repeat"); do
    ip netns exec tllab-hopsbench-snd $tl hops 10.77.2.2 "${args[@]}" --seed "$i"
  done | python3 -c "
import json, sys, statistics as st
rs = [json.loads(l) for l in sys.stdin]
truth = {2: 600e6, 3: 400e6, 4: 200e6}
for ttl in range(1, 6):
    ls = [l for r in rs for l in r['links'] if l['ttl'] == ttl]
    got = [l['capacity_bps'] for l in ls if l['status'] == 'measured']
    others = {}
    for l in ls:
        if l['status'] != 'measured':
            others[l['status']] = others.get(l['status'], 0) + 1
    t = truth.get(ttl)
    err = [abs(g / t - 1) * 100 for g in got] if t else []
    e = (f'{st.median(err):.1f} %', f'{max(err):.1f} %') if err else ('-', '-')
    med = f'{st.median(got)/1e6:.1f} Mbit/s' if got else '-'
    o = ', '.join(f'{k} {v}' for k, v in sorted(others.items())) or '-'
    print(f\"| $mode | {ttl} | {f'{t/1e6:.0f}M' if t else 'veth'} | {len(got)}/{len(ls)} | {e[0]} | {e[1]} | {med} | {o} |\")
"
done
