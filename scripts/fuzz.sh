#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) with cargo-fuzz on the
# nightly toolchain, starting from the seed corpora in fuzz/corpus (read
# only; new inputs go to fuzz/work). Prints per target: executions, time,
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
status=0
for t in "${targets[@]}"; do
  mkdir -p "work/$t"
  log="work/$t.log"
  extra=()
  asan="${ASAN_OPTIONS:-}"
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
    status=1
  fi
  execs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 || true)
  [ -n "$execs" ] || execs="$(grep -o '#[0-9]*' "$log" | tail -1 | tr -d '#') runs"
  corpus=$(find "work/$t" -type f | wc -l)
  echo "$t: $result, ${execs#Done }s, corpus $corpus inputs"
  if [ "$result" = CRASH ]; then
    grep -m5 -E 'panicked|ERROR|SUMMARY' "$log" || true
  fi
done
exit $status
