#!/usr/bin/env bash
# Installs what scripts/dist.sh built in dist/ the way a user would, with no
# Rust toolchain on PATH, and runs it: the Debian package (root: dpkg -i,
# `tightlink server` and the agent from it, then dpkg -P), the static
# tarball's binary, and the wheel in a fresh venv (an estimate from Python).
# Also checks what each needs of the system: the binary nothing (static),
# the wheel's module no glibc symbol newer than 2.17 and none unversioned.
# Fails on the first check that does not hold.
set -euo pipefail
cd "$(dirname "$0")/.."
dist="$PWD/dist"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# A user's shell: no cargo, no rustc, no build tree.
userpath=/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin
as_user() { env -i HOME="$work/home" PATH="$userpath" "$@"; }
mkdir -p "$work/home"
check() { echo "ok: $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }
# The JSON report's available_bandwidth_bps, which must be a positive number.
abw() { python3 -c 'import json,sys; v=json.load(sys.stdin)["available_bandwidth_bps"]; assert v > 0, v; print(v)'; }

echo "== static binary (tarball)"
tar -C "$work" -xzf "$dist/tightlink-$version-x86_64-linux.tar.gz"
bin="$work/tightlink-$version-x86_64-linux/tightlink"
if readelf -l "$bin" | grep -q INTERP; then fail "the binary asks for a dynamic loader"; fi
check "no dynamic loader, no shared library: $(file -b "$bin" | cut -d, -f1-4)"
as_user "$bin" --version
v=$(as_user "$bin" estimate --json | abw) && check "estimate on the simulated path: $v bit/s"

echo "== Debian package"
deb="$dist/tightlink_${version}-1_amd64.deb"
dpkg-deb -I "$deb" | sed -n '/Package:/,/Description:/p'
if [ "$(id -u)" != 0 ]; then
  echo "skipped: installing the .deb needs root"
else
  dpkg -i "$deb"
  pkg_installed=1
  [ "$(as_user sh -c 'command -v tightlink')" = /usr/bin/tightlink ] || fail "tightlink is not /usr/bin/tightlink"
  as_user tightlink --version
  for f in /usr/share/man/man1/tightlink-estimate.1.gz /usr/share/bash-completion/completions/tightlink \
           /lib/systemd/system/tightlink-agent.service /lib/systemd/system/tightlink-server.service \
           /etc/tightlink/agent.toml; do
    [ -s "$f" ] || fail "$f missing"
  done
  grep -q '^ExecStart=/usr/bin/tightlink agent' /lib/systemd/system/tightlink-agent.service \
    || fail "the agent unit does not run /usr/bin/tightlink"
  check "man pages, completions, systemd units, /etc/tightlink/agent.toml"
  # Started directly (not through a function, whose subshell would be
  # what $! names), so that kill reaches the daemon.
  env -i HOME="$work/home" PATH="$userpath" tightlink server --bind 127.0.0.1 --port 7561 \
    > "$work/server.log" 2>&1 &
  pids+=($!)
  sleep 1
  v=$(as_user tightlink estimate 127.0.0.1:7561 --json | abw) && check "estimate toward the packaged server: $v bit/s"
  env -i HOME="$work/home" PATH="$userpath" tightlink agent --config /etc/tightlink/agent.toml \
    --listen 127.0.0.1:9561 --database "$work/history.db" > "$work/agent.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 40); do
    if curl -fsS http://127.0.0.1:9561/metrics 2>/dev/null | grep -q '^tightlink_available_bandwidth_bps{'; then break; fi
    sleep 0.5
  done
  curl -fsS http://127.0.0.1:9561/metrics | grep '^tightlink_available_bandwidth_bps{' \
    || { cat "$work/agent.log"; fail "the packaged agent exported no estimate"; }
  check "the packaged agent, run on its sample config, measured and exported"
  as_user tightlink history --database "$work/history.db" --limit 3 | tee "$work/history.txt"
  grep -q ' ok$' "$work/history.txt" || fail "the packaged agent stored no result"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pids=()
  dpkg -P tightlink >/dev/null
  [ ! -e /etc/tightlink/agent.toml ] && [ ! -e /usr/bin/tightlink ] || fail "the purge left files behind"
  check "purged again (nothing left behind, /etc/tightlink included)"
fi

echo "== Python wheel"
whl=$(ls "$dist"/tightlink-"$version"-cp39-abi3-manylinux2014_x86_64*.whl)
mkdir -p "$work/whl" && (cd "$work/whl" && python3 -m zipfile -e "$whl" .)
so="$work/whl/tightlink/_native.abi3.so"
unversioned=$(objdump -T "$so" | awk '$2 != "w" && /\*UND\*/ && $NF !~ /^_?Py/ && $(NF-1) !~ /GLIBC_/ {print $NF}')
[ -z "$unversioned" ] || fail "the module needs unversioned symbols: $unversioned"
newest=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
[ "$(printf '%s\nGLIBC_2.17\n' "$newest" | sort -V | tail -1)" = GLIBC_2.17 ] || fail "the module needs $newest"
check "the module needs glibc $newest at most, nothing unversioned"
as_user python3 -m venv "$work/venv"
as_user "$work/venv/bin/pip" install -q "$whl"
if as_user sh -c 'command -v cargo || command -v rustc' >/dev/null; then fail "a Rust toolchain is on the user's PATH"; fi
v=$(cd "$work" && as_user "$work/venv/bin/python" -c 'import json, tightlink; print(json.dumps(tightlink.estimate("sim:")))' | abw)
check "estimate from the installed wheel (no cargo on PATH): $v bit/s"
echo "== container (Containerfile, podman)"
if ! command -v podman >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
  echo "skipped: needs root and podman (Debian's podman and runc)"
else
  podman build -q -t tightlink-dist-check -f Containerfile "$dist" >/dev/null
  # crun refuses hosts whose cgroups are in hybrid mode; runc runs there
  # when the limits are given (it cannot take the host's as they are).
  run=(podman run --rm)
  if ! "${run[@]}" tightlink-dist-check --version >/dev/null 2>&1; then
    run=(podman --runtime runc run --rm --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
    echo "(crun could not start it here: with runc and explicit limits)"
  fi
  "${run[@]}" tightlink-dist-check --version
  v=$("${run[@]}" tightlink-dist-check estimate --json | abw) && check "estimate in the container: $v bit/s"
  "${run[@]}" --name tightlink-dist-check-server --network host tightlink-dist-check \
    server --bind 127.0.0.1 --port 7562 > "$work/ctr.log" 2>&1 &
  ctr_pid=$!
  sleep 3
  v=$(as_user "$bin" estimate 127.0.0.1:7562 --json | abw) && check "estimate toward the containerised server: $v bit/s"
  podman rm -f tightlink-dist-check-server >/dev/null
  wait "$ctr_pid" 2>/dev/null || true
  podman rmi -f tightlink-dist-check >/dev/null
fi
echo "== all packages install and run"
