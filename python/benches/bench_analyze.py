"""The Python package's analysis speed against the library's, in one run:
a million simulated packets (3125 multi-rate streams of 5 x 64 through
sim:seed=1) through `multirate`, median of 5, from numpy arrays in and
columns out; then the same packets timed in-process in Rust
(crates/measure/examples/analyze_speed.rs, built by this script).

    python python/benches/bench_analyze.py
"""

import json
import pathlib
import statistics
import subprocess
import time

import tightlink

ROOT = pathlib.Path(__file__).resolve().parents[2]

packets, truth = tightlink.simulate("sim:seed=1", streams=3125, kind="multi", rates=5, per_rate=64, range=0.3)
send, recv, size, ids = (packets[k].copy() for k in ("send_ns", "recv_ns", "size_bytes", "stream_id"))
times = []
for _ in range(5):
    t = time.perf_counter()
    r = tightlink.analyze(send, recv, size, stream_id=ids, kind="multi", method="multirate")
    times.append(time.perf_counter() - t)
    assert len(r["stream_id"]) == 3125
py = len(packets) / statistics.median(times)
subprocess.run(
    ["cargo", "build", "--release", "-q", "-p", "tightlink-measure", "--example", "analyze_speed"], cwd=ROOT, check=True
)
out = subprocess.run([str(ROOT / "target/release/examples/analyze_speed")], capture_output=True, text=True, check=True)
rust = json.loads(out.stdout)["packets_per_s"]
print(f"packets {len(packets)}")
print(f"python analyze(): {py / 1e6:.1f} M packets/s (median of 5)")
print(f"rust analyze_streams(): {rust / 1e6:.1f} M packets/s (median of 5)")
print(f"rust / python: {rust / py:.2f}")
