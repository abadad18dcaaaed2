#!/usr/bin/env bash
# Runs `tightlink lab run` on every shipped scenario (root) and prints the
# tables one after the other; the figures in docs/evaluation.md.
# Usage: sudo scripts/lab-all.sh [REPEAT] [METHODS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-10}
methods=${2:-multirate,multirate-prcmt-dp2,pathload,imr-avg,prcmt}
cargo build --release -q -p tightlink
for s in quiet cbr30 cbr60 bursty40 onoff4x smoothed two-hop lossy; do
  target/release/tightlink lab run "$s" --repeat "$repeat" --method "$methods" 2>/dev/null
  echo
done
