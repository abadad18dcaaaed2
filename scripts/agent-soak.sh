#!/usr/bin/env bash
# The agent for a while (600 s by default) against three simulated targets
# and a tightlink server behind a 200 Mbit/s tbf in namespaces, every 10 s
# each; then every scheduled measurement counted in the history, RSS in
# the first and last minute, and kill -9 in the middle of a measurement
# (integrity_check, no partial rows, the agent resumes). Root only; the
# namespaces (prefix tla) are removed at exit.
#   sudo scripts/agent-soak.sh [SECONDS]
set -euo pipefail
secs=${1:-600}
bin=$(realpath "${TIGHTLINK:-target/release/tightlink}")
work=$(mktemp -d /tmp/tightlink-soak.XXXXXX)
p=tla; s=${p}s; r=${p}r; d=${p}d
pids=()
down() {
  for x in "${pids[@]}"; do kill -9 "$x" 2>/dev/null || true; done
  for n in $s $r $d; do ip netns del $n 2>/dev/null || true; done
}
trap down EXIT
down
. "$(dirname "$0")/three-namespaces.sh"
three_namespaces 202
ip netns exec $r tc qdisc add dev ${p}c root tbf rate 200mbit burst 3000 limit 100000
ip netns exec $d "$bin" server --bind 10.202.2.2 2>"$work/server.log" &
pids+=($!)
sleep 0.3
cat > "$work/agent.toml" <<EOT
listen = "127.0.0.1:9449"
database = "$work/history.db"
interval = "10s"

[[target]]
name = "lab 200M"
target = "10.202.2.2"

[[target]]
name = "sim default"
target = "sim:"

[[target]]
name = "sim cbr"
target = "sim:cross=cbr:3G"

[[target]]
name = "sim 1G"
target = "sim:capacity=1G,cross=poisson:300M"
EOT
start_agent() {
  ip netns exec $s "$bin" agent --config "$work/agent.toml" 2>>"$work/agent.log" &
  agent=$!
  pids+=($agent)
  for _ in $(seq 100); do ip netns exec $s curl -sf http://127.0.0.1:9449/healthz >/dev/null 2>&1 && return; sleep 0.1; done
}
metrics() { ip netns exec $s curl -sf http://127.0.0.1:9449/metrics; }
rss_kb() { awk '/VmRSS/ {print $2}' /proc/$agent/status; }
start_agent
echo "agent pid $agent, $secs s, history $work/history.db"
: > "$work/rss"
t0=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt "$secs" ]; do
  echo "$(( $(date +%s) - t0 )) $(rss_kb)" >> "$work/rss"
  sleep 5
done
metrics > "$work/metrics.txt"
# Stop cleanly first: everything that finished must be in the history.
kill -TERM $agent; wait $agent || true
python3 - "$work" "$secs" <<'EOT'
import re, sqlite3, statistics, sys
work, secs = sys.argv[1], int(sys.argv[2])
m = open(f"{work}/metrics.txt").read()
def total(metric, **want):
    n = 0
    for line in m.splitlines():
        if line.startswith(metric + "{") or line.startswith(metric + " "):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if all(labels.get(k) == v for k, v in want.items()):
                n += float(line.rsplit(" ", 1)[1])
    return int(n)
db = sqlite3.connect(f"{work}/history.db")
print(f"{'target':<12} {'stored':>6} {'ok':>5} {'failed':>6} {'missed runs':>11} {'expected (secs/10)':>18}")
for (name,) in db.execute("SELECT DISTINCT name FROM results ORDER BY name"):
    stored, ok = db.execute("SELECT COUNT(*), SUM(ok) FROM results WHERE name=?", (name,)).fetchone()
    print(f"{name:<12} {stored:>6} {ok:>5} {stored-ok:>6} {total('tightlink_agent_missed_runs_total', name=name):>11} {secs//10:>18}")
finished = total("tightlink_agent_measurements_total")
stored = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
print(f"finished (agent's counter at the last scrape) {finished}, stored {stored}, store errors {total('tightlink_agent_store_errors_total')}")
rss = [tuple(map(int, l.split())) for l in open(f"{work}/rss")]
first = [kb for t, kb in rss if t < 60]
last = [kb for t, kb in rss if t >= secs - 60]
print(f"RSS median first minute {statistics.median(first)/1024:.1f} MB, last minute {statistics.median(last)/1024:.1f} MB (max {max(kb for _, kb in rss)/1024:.1f} MB)")
for name, mean_err in db.execute("SELECT name, AVG(ABS(available_bps/truth_bps-1)) FROM results WHERE ok=1 AND truth_bps IS NOT NULL GROUP BY name"):
    print(f"{name}: mean |error| vs the simulator's truth {100*mean_err:.1f} %")
lab = sorted(v for (v,) in db.execute("SELECT available_bps FROM results WHERE name='lab 200M' AND ok=1"))
if lab:
    print(f"lab 200M (tbf 200 Mbit/s, no cross traffic): median answer {statistics.median(lab)/1e6:.1f} Mbit/s, {lab[0]/1e6:.1f}-{lab[-1]/1e6:.1f}")
EOT
# kill -9 in the middle of a measurement of the lab target.
start_agent
before=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM results').fetchone()[0])" "$work/history.db")
caught=no
for _ in $(seq 3000); do
  if metrics | grep -q '^tightlink_agent_measurements_in_flight 1'; then caught=yes; break; fi
  sleep 0.01
done
kill -9 $agent; wait $agent 2>/dev/null || true
python3 - "$work/history.db" "$caught" <<'EOT'
import sqlite3, sys, json
db = sqlite3.connect(sys.argv[1])
print("kill -9 with a measurement in flight:", sys.argv[2])
print("integrity_check:", db.execute("PRAGMA integrity_check").fetchone()[0])
bad = db.execute("SELECT COUNT(*) FROM results WHERE (ok=1 AND (report IS NULL OR available_bps IS NULL)) OR (ok=0 AND error IS NULL)").fetchone()[0]
for (r,) in db.execute("SELECT report FROM results WHERE ok=1"):
    json.loads(r)
print("partial rows:", bad)
EOT
start_agent
sleep 25
kill -TERM $agent; wait $agent || true
after=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM results').fetchone()[0])" "$work/history.db")
echo "resumed: $before rows before kill -9, $after after 25 s more"
