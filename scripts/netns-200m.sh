#!/usr/bin/env bash
# Repeats `tightlink estimate` across three namespaces (sender -> router ->
# receiver, veth, a 200 Mbit/s tbf with a 3000-byte burst on the router's
# egress, RPS on the router) and prints one line per run: method, estimate
# (Mbit/s), bound, streams, MB of probes, wall seconds. Root only; the
# namespaces (prefix tlr) are removed at exit. Until `tightlink lab`
# exists, this is how the first real-packet figures were made:
#   sudo scripts/netns-200m.sh [RUNS] [METHOD...]
# FAR_END=twamp measures against `tightlink reflector` (TWAMP-light, UDP
# 862) with `estimate twamp:10.201.2.2` instead of `tightlink server`.
# TBF="rate 200mbit burst 256k limit 400000" replaces the tbf's settings.
# queue-fit is given the tbf's 200 Mbit/s as the capacity.
set -euo pipefail
far=${FAR_END:-server}
runs=${1:-10}; shift || true
methods=("${@:-multirate}")
bin=${TIGHTLINK:-target/release/tightlink}
p=tlr; s=${p}s; r=${p}r; d=${p}d
down() { for n in $s $r $d; do ip netns del $n 2>/dev/null || true; done; }
trap down EXIT
down
. "$(dirname "$0")/three-namespaces.sh"
three_namespaces 201
ip netns exec $r sh -c "echo 2 > /sys/class/net/${p}b/queues/rx-0/rps_cpus; echo 2 > /sys/class/net/${p}c/queues/rx-0/rps_cpus"
ip netns exec $r tc qdisc add dev ${p}c root tbf ${TBF:-rate 200mbit burst 3000 limit 100000}
if [ "$far" = twamp ]; then
  ip netns exec $d "$bin" reflector --bind 10.201.2.2 2>/dev/null &
  target=twamp:10.201.2.2
else
  ip netns exec $d "$bin" server --bind 10.201.2.2 2>/dev/null &
  target=10.201.2.2
fi
server=$!
trap 'kill $server 2>/dev/null; down' EXIT
sleep 0.3
for m in "${methods[@]}"; do
  flags=()
  [ "$m" = queue-fit ] && flags=(--capacity 200M)
  for i in $(seq 1 "$runs"); do
    ip netns exec $s "$bin" estimate "$target" --json --method "$m" "${flags[@]}" |
      python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["target"], v["method"], round(v["available_bandwidth_bps"]/1e6,1), v["bound"], v["streams"], round(v["probe_bytes"]/1e6,2), round(v["wall_s"],2))'
  done
done
