"""The pytest plugin: options, deploy fixture, tolerance marker, JUnit XML; and that it costs
nothing in sessions that do not use it."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest

@pytest.mark.etk_tolerance(lsb=0, sqnr_db=10)
def test_within(etk_deploy):
    result = etk_deploy("zoo:linear_relu6")
    assert result.runner == "sim" and result.cycles.kind == "simulated"
    assert result.cycles.npu_cycles > 0 and result.max_diff_lsb == 0

@pytest.mark.etk_tolerance(sqnr_db=200)
def test_demands_too_much(etk_deploy):
    etk_deploy("zoo:linear_relu6")
"""


# labgrid's pytest plugin (the farm extra installs it) starts its step logger once per process;
# pytester runs the inner session in this one
NO_LABGRID = ("-p", "no:labgrid")


def test_deploy_fixture_marker_and_junit(pytester):
    pytester.makepyfile(test_device=SUITE)
    result = pytester.runpytest(
        *NO_LABGRID,
        "--etk-target",
        "corstone-300",
        "--etk-runner",
        "sim",
        "--junitxml",
        "device.xml",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*SQNR vs the float model is * dB (at least 200 dB required)*"])
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "device.xml").iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_within"].iter("property")}
    assert int(props["etk zoo:linear_relu6 fused npu_cycles (simulated)"]) > 0
    assert props["etk zoo:linear_relu6 fused runner"] == "sim"
    assert cases["test_demands_too_much"].find("failure") is not None


def test_without_target_the_device_tests_skip(pytester):
    pytester.makepyfile(test_device=SUITE)
    result = pytester.runpytest(*NO_LABGRID, "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*pass --etk-target TARGET*"])


def test_a_tflite_model_is_refused_with_what_it_lacks(monkeypatch, tmp_path):
    """A .tflite model's run has no host reference and no float model to score against: a
    UserError says so (it was an AttributeError on the missing accuracy)."""
    from toolkit import pytest_plugin
    from toolkit.errors import UserError
    from toolkit.evaluation.evaluate import Evaluation
    from toolkit.results import RunnerRun

    runs = (SimpleNamespace(cycles=None),)
    run = RunnerRun(Evaluation((), (), (), runs, None), None, None, None)  # as run_job makes it
    result = SimpleNamespace(variants={"tflite": SimpleNamespace(run=run)})
    monkeypatch.setattr("toolkit.pipeline.run_resolved", lambda resolved, *_, **__: result)
    runner = SimpleNamespace(name="sim")
    monkeypatch.setattr(pytest_plugin, "resolve_runner", lambda *_, **__: (runner, ""))
    options = {"--etk-target": "corstone-300", "--etk-runner": "sim"}
    deployer = pytest_plugin._Deployer(SimpleNamespace(getoption=options.get), tmp_path)
    with pytest.raises(UserError, match="a .tflite model has neither"):
        deployer.deploy("model.tflite", "fused")


def test_plugin_import_is_light():
    code = (
        "import sys, toolkit.pytest_plugin; "
        "heavy = [m for m in ('torch', 'executorch', 'toolkit.pipeline') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
