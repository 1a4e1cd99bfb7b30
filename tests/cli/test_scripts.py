"""scripts/: output folders default to a temporary one, torch loads without torchao's chatter
or pytree's LeafSpec warning, bad net names are refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from toolkit.console_capture import quiet_torch_import

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TEMPORARY = "keep the compiled {} here (default: a temporary folder, removed at the end)"


@pytest.mark.parametrize(
    "script, kept",
    [("bench_cycle_truth.py", "models"), ("bench_accuracy.py", "programs")],
)
def test_help_names_a_temporary_default_output_and_prints_nothing_else(tmp_path, script, kept):
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS.parent), "COLUMNS": "200"}
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / script), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (run.returncode, run.stderr) == (0, "")  # bench_accuracy loads torch and torchao
    assert f"--out DIR {TEMPORARY.format(kept)}" in " ".join(run.stdout.split())
    assert list(tmp_path.iterdir()) == []


def test_quiet_import_is_silent_and_shows_the_chatter_of_a_failed_one(tmp_path, monkeypatch, capfd):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "chatty_ok.py").write_text("import os\nos.write(2, b'Failed to load _C.so\\n')\n")
    (tmp_path / "chatty_broken.py").write_text(
        "import os\nos.write(2, b'Failed to load _C.so\\n')\nraise ImportError('no kernels')\n"
    )
    quiet_torch_import("chatty_ok")
    assert capfd.readouterr().err == ""
    with pytest.raises(ImportError, match="^no kernels$"):
        quiet_torch_import("chatty_broken")
    assert capfd.readouterr().err == "Failed to load _C.so\n"


# copying a treespec makes torch's pytree warn about its own LeafSpec (as every compile does)
COPY_TREESPEC = "import copy, torch.utils._pytree as p; copy.deepcopy(p.tree_flatten([1])[1])"
LEAFSPEC_WARNING = (
    "FutureWarning: `isinstance(treespec, LeafSpec)` is deprecated, use "
    "`isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead."
)


def test_quiet_import_hides_torchs_pytree_leafspec_warning():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env["PYTHONPATH"] = str(SCRIPTS.parent)
    quiet = "from toolkit.console_capture import quiet_torch_import as q; q('torch.utils._pytree')"
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        for code in (COPY_TREESPEC, f"{quiet}; {COPY_TREESPEC}")
    ]
    assert [r.returncode for r in runs] == [0, 0]
    assert LEAFSPEC_WARNING in runs[0].stderr  # torch still warns without it
    assert runs[1].stderr == ""


def test_bench_sim_refuses_an_unknown_collection_net_naming_the_table_and_its_nets(tmp_path):
    table = SCRIPTS.parent / "tests" / "collection" / "nets.toml"
    nets = tomllib.loads(table.read_text())
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS.parent)}
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "bench_sim.py"), "--collection", "collection:nope"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.startswith("usage: bench_sim.py")  # nothing printed before argparse's usage
    assert run.stderr.splitlines()[-1] == (
        f"bench_sim.py: error: no net 'nope' in {table}: it lists {', '.join(nets)}"
    )
    assert list(tmp_path.iterdir()) == []
