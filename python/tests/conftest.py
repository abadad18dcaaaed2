"""Shared by the tests: where the repository and the built CLI are."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    """The `tightlink` binary of this checkout (`cargo build --release -p
    tightlink` makes it; TIGHTLINK_BIN overrides)."""
    path = pathlib.Path(os.environ.get("TIGHTLINK_BIN", ROOT / "target" / "release" / "tightlink"))
    if not path.exists():
        pytest.fail(f"{path}: no tightlink binary; run `cargo build --release -p tightlink` first")

    def run(*args, check=True):
        p = subprocess.run([str(path), *args], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"tightlink {' '.join(args)}: {p.stderr}")
        return p

    return run


@pytest.fixture(scope="session")
def samples():
    return ROOT / "samples"
