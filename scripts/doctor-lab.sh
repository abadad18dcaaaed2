#!/usr/bin/env bash
# `tightlink doctor --peer` across two namespaces joined by one veth (no
# router, no shaper): the backends side by side over a real link, which
# loopback cannot give (frames injected below IP on lo are martians). The
# server (keyed, so its limits reach 10 Gbit/s) runs in the far namespace
# pinned to CPU 1, doctor in the near one pinned to CPU 0; GRO is off on
# both ends; RPS steers each end's receive work to its own CPU. Root only;
# namespaces tldoc-a/-b are removed at exit.
#   scripts/doctor-lab.sh [--quick]
set -euo pipefail
bin=${TIGHTLINK:-target/release/tightlink}
a=tldoc-a; b=tldoc-b
key=$(mktemp); head -c 32 /dev/urandom > "$key"
down() { ip netns del $a 2>/dev/null || true; ip netns del $b 2>/dev/null || true; rm -f "$key"; }
trap down EXIT
ip netns del $a 2>/dev/null || true; ip netns del $b 2>/dev/null || true
ip netns add $a; ip netns add $b
ip link add tldoca type veth peer name tldocb
ip link set tldoca netns $a; ip link set tldocb netns $b
ip -n $a addr add 10.203.0.1/24 dev tldoca
ip -n $b addr add 10.203.0.2/24 dev tldocb
for n in $a $b; do ip -n $n link set lo up; done
ip -n $a link set tldoca up; ip -n $b link set tldocb up
ip netns exec $a ethtool -K tldoca gro off tso off gso off >/dev/null 2>&1 || true
ip netns exec $b ethtool -K tldocb gro off tso off gso off >/dev/null 2>&1 || true
ip netns exec $a sh -c 'echo 1 > /sys/class/net/tldoca/queues/rx-0/rps_cpus'
ip netns exec $b sh -c 'echo 2 > /sys/class/net/tldocb/queues/rx-0/rps_cpus'
ip netns exec $b taskset -c 1 "$bin" server --bind 10.203.0.2 --key-file "$key" 2>/dev/null &
server=$!
trap 'kill $server 2>/dev/null; down' EXIT
for _ in $(seq 50); do
  ip netns exec $b ss -ltn | grep -q 10.203.0.2:7447 && break; sleep 0.1
done
ip netns exec $a taskset -c 0 "$bin" doctor --peer 10.203.0.2 --key-file "$key" "$@"
