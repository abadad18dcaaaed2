#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) with cargo-fuzz on the
# nightly toolchain, starting from the seed corpora in fuzz/corpus (read
# only; new inputs go to fuzz/work), one target per core at a time
# (FUZZ_JOBS=N to change). Prints per target: executions, time,
# and any crash (its input lands in fuzz/artifacts/TARGET/).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# Needs `cargo +nightly` and `cargo install cargo-fuzz`.
# FUZZ_PROFILE=dev builds without optimisation but with overflow checks
# and debug assertions: it builds in about 60 % of the release build's time
# and runs each input several times slower, the better trade for a smoke of
# a few seconds a target (CI); the default, release, suits long runs.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
case "${FUZZ_PROFILE:-release}" in
  release) profile=-O ;;
  dev) profile=-D ;;
  *) echo "FUZZ_PROFILE must be release or dev, not '$FUZZ_PROFILE'" >&2; exit 2 ;;
esac
cargo +nightly fuzz build "$profile" >/dev/null 2>&1 || cargo +nightly fuzz build "$profile"
# One target: its libFuzzer log in work/T.log, its summary in work/T.result.
fuzz_one() {
  local t=$1 log="work/$1.log" result execs corpus asan="${ASAN_OPTIONS:-}"
  local extra=()
  mkdir -p "work/$t"
  # A real server's session threads outlive each input: not leaks.
  if [ "$t" = server_session ]; then
    extra=(-detect_leaks=0)
    asan="detect_leaks=0"
  fi
  if ASAN_OPTIONS="$asan" cargo +nightly fuzz run "$profile" "$t" "work/$t" "corpus/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 "${extra[@]}" >"$log" 2>&1; then
    result=ok
  else
    result=CRASH
  fi
  execs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 || true)
  if [ -n "$execs" ]; then
    execs="${execs#Done }s"
  else
    execs="$(grep -o '#[0-9]*' "$log" | tail -1 | tr -d '#') runs"
  fi
  corpus=$(find "work/$t" -type f | wc -l)
  {
    echo "$t: $result, $execs, corpus $corpus inputs"
    if [ "$result" = CRASH ]; then
      grep -m5 -E 'panicked|ERROR|SUMMARY' "$log" || true
    fi
  } >"work/$t.result"
}
# Targets run side by side, one per core (FUZZ_JOBS to change): each is
# one process that fills its core.
jobs_max="${FUZZ_JOBS:-$(nproc)}"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
    wait -n || true
  done
  fuzz_one "$t" &
done
wait
status=0
for t in "${targets[@]}"; do
  cat "work/$t.result"
  grep -q "^$t: ok," "work/$t.result" || status=1
done
exit $status
