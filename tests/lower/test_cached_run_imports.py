"""A deploy whose programs come from the compile cache imports neither the quantizer (torchao) nor
ExecuTorch's exir: seconds of every cached run (lower/compiler.py, lower/host_graph.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHECK = """
import json, sys
from toolkit.cli import main
status = main(sys.argv[1:])
heavy = ("torchao", "executorch.exir", "executorch.backends.arm", "toolkit.lower.compiler")
print(json.dumps([status, [m for m in heavy if m in sys.modules]]))
"""


def test_a_cached_deploy_loads_no_compiler(compiled, tmp_path):
    compiled("zoo:conv2d_relu")  # both variants into the session's compile cache
    argv = ["deploy", "zoo:conv2d_relu", "--runner", "sim", "--compare-fusion", "-o", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-c", CHECK, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=300,
    )
    status, loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert (status, loaded) == (0, []), result.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert all(v["run"]["outputs_match_reference"] for v in report["variants"].values())
