#!/usr/bin/env bash
# Builds tightlink's packages into dist/ (no Rust toolchain needed to use them):
#   tightlink                              the static x86_64 binary alone
#   tightlink-VERSION-x86_64-linux.tar.gz  a static x86_64 binary (musl: runs on
#                                          any Linux, whatever its glibc), with
#                                          man pages, completions, sample config
#                                          and systemd units
#   tightlink_VERSION-1_amd64.deb          the same as a Debian package
#   tightlink-VERSION-cp39-abi3-manylinux2014_x86_64...whl
#                                          the Python package for CPython >= 3.9
#                                          on glibc >= 2.17 (zig as the linker)
#   tightlink-VERSION.tar.gz               its sdist (builds with Rust >= 1.85)
# Needs rustup and Python 3 with pip; installs the rest where missing: the
# musl target, ziglang, cargo-zigbuild, maturin and auditwheel from PyPI (into
# target/dist-venv), cargo-deb from crates.io: scripts/dist-tools.sh installs
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/dist"
assets="$PWD/target/dist-assets"
venv="$PWD/target/dist-venv"
target=x86_64-unknown-linux-musl
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
mkdir -p "$out"
step() { echo "== $* [$(date +%T)]"; }

step "tools"
scripts/dist-tools.sh
export PATH="$venv/bin:$PATH"

step "static binary ($target, zig as the C compiler for SQLite)"
cargo zigbuild --release -p tightlink --target "$target"
bin="target/$target/release/tightlink"

step "man pages, completions, systemd units (tightlink generate)"
rm -rf "$assets"
mkdir -p "$assets/completions" "$assets/systemd"
"$bin" generate man "$assets/man"
"$bin" generate completions bash > "$assets/completions/tightlink.bash"
"$bin" generate completions zsh > "$assets/completions/_tightlink"
"$bin" generate completions fish > "$assets/completions/tightlink.fish"
for unit in deploy/tightlink-agent.service deploy/tightlink-server.service; do
  sed 's|/usr/local/bin/tightlink|/usr/bin/tightlink|' "$unit" > "$assets/systemd/$(basename "$unit")"
done

step "tarball, and the bare binary (what Containerfile copies)"
cp "$bin" "$out/tightlink"
stage="$PWD/target/dist-stage/tightlink-$version-x86_64-linux"
rm -rf "$stage" && mkdir -p "$stage"
cp "$bin" README.md "$stage/"
cp -r "$assets/man" "$assets/completions" "$assets/systemd" "$stage/"
cp deploy/agent.toml deploy/prometheus.yml deploy/grafana-dashboard.json \
  deploy/mesh.toml deploy/prometheus-mesh.yml deploy/grafana-mesh-dashboard.json "$stage/"
tar -C "$(dirname "$stage")" -czf "$out/tightlink-$version-x86_64-linux.tar.gz" "$(basename "$stage")"

step "Debian package (cargo-deb)"
cargo deb -p tightlink --target "$target" --no-build --no-strip -o "$out/"

step "Python: manylinux2014 abi3 wheel (maturin --zig) and sdist"
CARGO_TARGET_DIR="$PWD/target" maturin build --release --zig --compatibility manylinux2014 \
  -m python/Cargo.toml -o "$out"
maturin sdist -m python/Cargo.toml -o "$out"
for w in "$out"/tightlink-"$version"-*manylinux*.whl; do
  auditwheel show "$w"
done

step "done"
ls -l "$out"
