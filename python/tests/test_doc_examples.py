"""The Python examples of the README and the guide run: every ```python
block, and every `python3 -c '...'` line of their sh blocks (the Rust
test crates/cli/tests/doc_examples.rs runs the `tightlink` ones)."""

import pathlib
import re
import shlex
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md"] + sorted((REPO / "guide" / "src").glob("*.md"))
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def examples():
    for page in PAGES:
        text = page.read_text()
        for m in BLOCK.finditer(text):
            line = text[: m.start()].count("\n") + 2
            kind, body = m.group(1), m.group(2)
            where = f"{page.relative_to(REPO)}:{line}"
            if kind == "python":
                yield pytest.param([sys.executable, "-c", body], id=where)
            elif kind in ("sh", "console"):
                for i, cmd in enumerate(body.splitlines()):
                    cmd = cmd.removeprefix("$ ").strip()
                    if cmd.startswith("python3 -c "):
                        argv = shlex.split(cmd, comments=True)
                        argv[0] = sys.executable
                        yield pytest.param(argv, id=f"{page.relative_to(REPO)}:{line + i}")


CASES = list(examples())


def test_the_pages_have_python_examples():
    assert len(CASES) >= 3, CASES


@pytest.mark.parametrize("argv", CASES)
def test_example_runs(argv, tmp_path):
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
