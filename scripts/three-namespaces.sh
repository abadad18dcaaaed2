# Sourced by the scripts that need a real path: three namespaces, sender
# ($s) -> router ($r) -> receiver ($d), joined by veth pairs ${p}a-${p}b
# and ${p}c-${p}e, on 10.$net.1.0/24 and 10.$net.2.0/24; the router
# forwards. The caller sets p, s, r, d and removes the namespaces itself.
#   three_namespaces NET
three_namespaces() {
  local net=$1
  ip netns add $s; ip netns add $r; ip netns add $d
  ip link add ${p}a type veth peer name ${p}b
  ip link add ${p}c type veth peer name ${p}e
  ip link set ${p}a netns $s; ip link set ${p}b netns $r
  ip link set ${p}c netns $r; ip link set ${p}e netns $d
  ip -n $s addr add 10.$net.1.1/24 dev ${p}a
  ip -n $r addr add 10.$net.1.2/24 dev ${p}b
  ip -n $r addr add 10.$net.2.1/24 dev ${p}c
  ip -n $d addr add 10.$net.2.2/24 dev ${p}e
  for n in $s $r $d; do ip -n $n link set lo up; done
  ip -n $s link set ${p}a up; ip -n $r link set ${p}b up
  ip -n $r link set ${p}c up; ip -n $d link set ${p}e up
  ip -n $s route add default via 10.$net.1.2
  ip -n $d route add default via 10.$net.2.1
  ip netns exec $r sysctl -qw net.ipv4.ip_forward=1
}
