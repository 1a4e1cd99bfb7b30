"""A small benchmark (2 tiny zoo models x fused/unfused x 2 NPUs, simulator, -j 2) run once per
session; tests read its results.jsonl and reports."""

from __future__ import annotations

import pytest

from toolkit.cli import main

from .helpers import write_suite


@pytest.fixture(scope="session")
def tiny_bench(tmp_path_factory):
    """(suite path, output folder, exit code) of `etk bench -j 2` and `etk report --html`."""
    root = tmp_path_factory.mktemp("bench")
    suite = write_suite(root / "tiny.toml")
    out = root / "out"
    code = main(["bench", str(suite), "-j", "2", "--out", str(out)])
    assert main(["report", str(out), "--html"]) == 0
    return suite, out, code
