#!/usr/bin/env bash
# The adversity campaign: `tightlink estimate` (the default method) on a
# quiet path whose truth is known, under what makes an answer hard to
# trust: CPU hogs on the measuring host, token buckets from 3 KB to
# 64 KB, each kind of far end (a tightlink server, tightlink's reflector,
# a user-space STAMP reflector: scripts/stamp-reflector.py) and both
# directions. It counts the silent misses (more than 10 % off, `exact`, a
# range that misses the truth, no warning) and how many answers within
# 5 % lost their `exact`.
#
#   sudo scripts/adversity.sh [RUNS] [OUT.jsonl]     # RUNS per cell (7: 210 runs)
#
# Three namespaces (sender -> router -> receiver, prefix tla): the router
# shapes the forward direction with tbf at 200 Mbit/s (the bucket varies)
# and the reverse at 150 Mbit/s (12 KB). The truth of each cell is the
# smaller of the configured rate and what a 1 s flood through the same
# tbf, beside the same hogs, got through (the tbf's own byte counter),
# since a starved host's tbf falls short of its rate. TIGHTLINK=path
# picks the binary (default target/release/tightlink). Root only; the
# namespaces are removed at exit.
set -euo pipefail
runs=${1:-7}
out=${2:-adversity.jsonl}
bin=$(realpath "${TIGHTLINK:-target/release/tightlink}")
here=$(cd "$(dirname "$0")" && pwd)
p=tla; s=${p}s; r=${p}r; d=${p}d
hogs=()
stop_hogs() { for h in "${hogs[@]}"; do kill "$h" 2>/dev/null || true; done; hogs=(); }
down() {
  stop_hogs
  for n in $s $r $d; do ip netns pids $n 2>/dev/null | xargs -r kill 2>/dev/null || true; done
  for n in $s $r $d; do ip netns del $n 2>/dev/null || true; done
}
trap down EXIT
down
. "$here/three-namespaces.sh"
three_namespaces 203
far=10.203.2.2
ip netns exec $r sh -c "echo 2 > /sys/class/net/${p}b/queues/rx-0/rps_cpus; echo 2 > /sys/class/net/${p}c/queues/rx-0/rps_cpus"
ip netns exec $r tc qdisc add dev ${p}b root tbf rate 150mbit burst 12000 limit 100000
ip netns exec $d "$bin" server --bind $far >/dev/null 2>&1 &
ip netns exec $d "$bin" reflector --bind $far --port 862 >/dev/null 2>&1 &
ip netns exec $d python3 "$here/stamp-reflector.py" $far 8620 &
ip netns exec $d "$bin" cross --sink $far:9000 --duration 1h >/dev/null 2>&1 &
ip netns exec $s "$bin" cross --sink 10.203.1.1:9001 --duration 1h >/dev/null 2>&1 &
sleep 0.5
: > "$out"

# Bytes the tbf on DEV (in the router) has sent.
tbf_bytes() { ip netns exec $r tc -s -j qdisc show dev "$1" | python3 -c 'import json,sys; print([q for q in json.load(sys.stdin) if q["kind"]=="tbf"][0]["bytes"])'; }
# What a 1 s flood from namespace NS to ADDR got through the tbf on DEV, bit/s.
flood() {
  local ns=$1 addr=$2 dev=$3 before after
  before=$(tbf_bytes "$dev")
  ip netns exec "$ns" "$bin" cross "$addr" --traffic cbr:1G --duration 1s >/dev/null 2>&1
  after=$(tbf_bytes "$dev")
  echo $(( (after - before) * 8 ))
}

for hog in 0 2; do
  stop_hogs
  for _ in $(seq 1 $hog); do yes > /dev/null & hogs+=($!); done
  for bucket in 3000 12000 64000; do
    ip netns exec $r tc qdisc replace dev ${p}c root tbf rate 200mbit burst $bucket limit 100000
    sleep 0.2
    fwd=$(flood $s $far:9000 ${p}c)
    rev=$(flood $d 10.203.1.1:9001 ${p}b)
    for far_end in server server-R reflector reflector-R userspace; do
      case $far_end in
        server) target=$far; flags=(); truth=$fwd; rate=200e6 ;;
        server-R) target=$far; flags=(-R); truth=$rev; rate=150e6 ;;
        reflector) target=twamp:$far; flags=(); truth=$fwd; rate=200e6 ;;
        reflector-R) target=twamp:$far; flags=(-R); truth=$rev; rate=150e6 ;;
        userspace) target=stamp:$far:8620; flags=(); truth=$fwd; rate=200e6 ;;
      esac
      for i in $(seq 1 "$runs"); do
        # A refusal is a result too: `--json` prints it as an error object.
        { ip netns exec $s "$bin" estimate "$target" "${flags[@]}" --json 2>/dev/null || true; } |
          HOG=$hog BUCKET=$bucket FAR=$far_end FLOOD=$truth RATE=$rate python3 -c '
import json, os, sys
line = sys.stdin.read().strip()
v = json.loads(line) if line else {"error": "no output"}
rate, flood = float(os.environ["RATE"]), float(os.environ["FLOOD"])
v["cell"] = {"hogs": int(os.environ["HOG"]), "bucket": int(os.environ["BUCKET"]),
             "far_end": os.environ["FAR"], "rate_bps": rate, "flood_bps": flood,
             "truth_bps": min(rate, flood)}
print(json.dumps(v))' >> "$out"
      done
      echo "hogs $hog, bucket $bucket B, $far_end: $runs runs (flood $((truth / 1000000)) Mbit/s)" >&2
    done
  done
done
stop_hogs
python3 "$here/adversity-summary.py" "$out"
