#!/usr/bin/env bash
# Repeats `tightlink estimate` across three namespaces (sender -> router ->
# receiver, veth, a 200 Mbit/s tbf with a 3000-byte burst on the router's
# egress, RPS on the router) and prints one line per run: method, estimate
# (Mbit/s), bound, streams, MB of probes, wall seconds. Root only; the
# namespaces (prefix tlr) are removed at exit. Until `tightlink lab`
# exists, this is how the README's real-packet figures are made:
#   sudo scripts/netns-200m.sh [RUNS] [METHOD...]
# FAR_END=twamp measures against `tightlink reflector` (TWAMP-light, UDP
# 862) with `estimate twamp:10.201.2.2` instead of `tightlink server`.
set -euo pipefail
far=${FAR_END:-server}
runs=${1:-10}; shift || true
methods=("${@:-multirate}")
bin=${TIGHTLINK:-target/release/tightlink}
p=tlr; s=${p}s; r=${p}r; d=${p}d
down() { for n in $s $r $d; do ip netns del $n 2>/dev/null || true; done; }
trap down EXIT
down
ip netns add $s; ip netns add $r; ip netns add $d
ip link add ${p}a type veth peer name ${p}b
ip link add ${p}c type veth peer name ${p}e
ip link set ${p}a netns $s; ip link set ${p}b netns $r
ip link set ${p}c netns $r; ip link set ${p}e netns $d
ip -n $s addr add 10.201.1.1/24 dev ${p}a
ip -n $r addr add 10.201.1.2/24 dev ${p}b
ip -n $r addr add 10.201.2.1/24 dev ${p}c
ip -n $d addr add 10.201.2.2/24 dev ${p}e
for n in $s $r $d; do ip -n $n link set lo up; done
ip -n $s link set ${p}a up; ip -n $r link set ${p}b up
ip -n $r link set ${p}c up; ip -n $d link set ${p}e up
ip -n $s route add default via 10.201.1.2
ip -n $d route add default via 10.201.2.1
ip netns exec $r sysctl -qw net.ipv4.ip_forward=1
ip netns exec $r sh -c "echo 2 > /sys/class/net/${p}b/queues/rx-0/rps_cpus; echo 2 > /sys/class/net/${p}c/queues/rx-0/rps_cpus"
ip netns exec $r tc qdisc add dev ${p}c root tbf rate 200mbit burst 3000 limit 100000
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
  for i in $(seq 1 "$runs"); do
    ip netns exec $s "$bin" estimate "$target" --json --method "$m" |
      python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["target"], v["method"], round(v["available_bandwidth_bps"]/1e6,1), v["bound"], v["streams"], round(v["probe_bytes"]/1e6,2), round(v["wall_s"],2))'
  done
done
