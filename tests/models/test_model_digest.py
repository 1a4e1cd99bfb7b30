"""A model's content hash is what it computes, so no two models that compute differently share a
compile cache entry or a reused output folder (issue 45, item 2)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from toolkit.lower.build_variant import cache_key, compile_variant
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.targets import load_target

MODELS = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch import nn

    SETTING = {"alpha": 2.0}

    class MaxP(nn.Module):
        def forward(self, x):
            return F.max_pool2d(x, 2)

    class AvgP(nn.Module):
        def forward(self, x):
            return F.avg_pool2d(x, 2)

    class MaxPool(nn.Module):  # the same computation through a layer
        def __init__(self):
            super().__init__()
            self.pool = nn.MaxPool2d(2)

        def forward(self, x):
            return self.pool(x)

    class AvgPool(MaxPool):
        def __init__(self):
            super().__init__()
            self.pool = nn.AvgPool2d(2)

    class MaxPAgain(MaxP):  # MaxP under another name
        pass

    class Sub(nn.Module):
        def __init__(self, alpha):
            super().__init__()
            self.alpha = alpha

        def forward(self, x):
            return x - self.alpha * x.relu()

    def sub2():
        return Sub(2.0)

    def sub3():
        return Sub(3.0)

    def sub_from_setting():
        return Sub(SETTING["alpha"])

    def strided(stride=1):
        torch.manual_seed(0)
        return nn.Conv2d(4, 4, 3, stride=stride, padding=1)

    def strided_by_two():
        return strided(2)

    class Branchy(nn.Module):  # control flow on a shape: fx cannot trace it, export can
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            if x.shape[-1] > 4:
                return x * self.scale
            return x

    class OnValues(nn.Module):  # control flow on values: no tracer takes it
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x

    def branchy1():
        return Branchy(1.5)

    def branchy2():
        return Branchy(2.5)

    def relu():
        return nn.ReLU()

    def sigmoid():
        return nn.Sigmoid()

    def example_inputs():
        return (torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0)),)
""")


@pytest.fixture(scope="module")
def models_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "several.py"
    path.write_text(MODELS)
    return path


def _hash(path, name):
    return load_model(f"{path}:{name}").content_hash


@pytest.mark.parametrize(
    "first, second",
    [
        ("MaxP", "AvgP"),
        ("MaxPool", "AvgPool"),
        ("sub2", "sub3"),
        ("sub2", "sub_from_setting"),  # equal: the setting is 2.0
        ("strided", "strided_by_two"),
        ("branchy1", "branchy2"),
        ("relu", "sigmoid"),
    ],
)
def test_models_that_compute_differently_have_different_hashes(models_file, first, second):
    same = (first, second) == ("sub2", "sub_from_setting")
    assert (_hash(models_file, first) == _hash(models_file, second)) is same


def test_the_same_model_under_two_names_shares_its_hash_but_not_its_cache_entry(models_file):
    first = load_model(f"{models_file}:MaxP")
    second = load_model(f"{models_file}:MaxPAgain")
    assert first.content_hash == second.content_hash
    calibration = random_calibration(first.example_inputs, 2, 0)
    npu = load_target("corstone-300").npu()
    keys = {cache_key(m, calibration, "fused", npu, (), ()) for m in (first, second)}
    assert len(keys) == 2


def test_the_hash_is_the_same_in_another_process(models_file):
    """The digest names no address or process state: a second process computes the same one."""
    code = (
        "import sys; from toolkit.models.loader import load_model; "
        "print(load_model(sys.argv[1]).content_hash)"
    )
    for name in ("MaxPool", "branchy1"):
        spec = f"{models_file}:{name}"
        other = subprocess.run(
            [sys.executable, "-c", code, spec], capture_output=True, text=True, timeout=300
        )
        assert other.stdout.strip() == _hash(models_file, name), other.stderr[-500:]


def test_an_edit_to_a_module_the_model_imports_changes_its_hash(tmp_path):
    helper = tmp_path / "helper_for_digest_test.py"
    helper.write_text("SCALE = 2.0\n")
    (tmp_path / "net.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn
        import helper_for_digest_test as helper

        class Net(nn.Module):
            def forward(self, x):
                return x * helper.SCALE

        def example_inputs():
            return (torch.ones(1, 4),)
        """)
    )
    before = _hash(tmp_path / "net.py", "Net")
    helper.write_text("SCALE = 3.0\n")
    sys.modules.pop("helper_for_digest_test", None)
    assert _hash(tmp_path / "net.py", "Net") != before


def test_two_pools_in_one_file_get_their_own_programs_from_one_cache(models_file, tmp_path):
    """The issue's case: MaxP then AvgP in one ETK_CACHE_DIR (the session's) and one -o folder;
    AvgP ran MaxP's MAX_POOL2D program before."""
    npu = load_target("corstone-300").npu()
    ops = {}
    for name in ("MaxP", "AvgP"):
        model = load_model(f"{models_file}:{name}")
        calibration = random_calibration(model.example_inputs, 2, 0)
        program = compile_variant(model, calibration, "fused", npu, tmp_path / "out")
        ops[name] = set(program.delegates[0].tosa_ops)
    assert "MAX_POOL2D" in ops["MaxP"] and "AVG_POOL2D" not in ops["MaxP"]
    assert "AVG_POOL2D" in ops["AvgP"] and "MAX_POOL2D" not in ops["AvgP"]


def test_a_layer_setting_that_is_an_object_falls_back_to_export():
    """A torch.nn layer holding something the digest cannot write canonically (here a lambda in
    a plain attribute) is digested from torch.export's graph, not refused."""
    from toolkit.models.model_digest import model_digest

    layer = torch.nn.Identity()
    layer.note = object()
    model = torch.nn.Sequential(layer, torch.nn.ReLU())
    inputs = (torch.ones(1, 2),)
    assert model_digest(model, inputs) == model_digest(model, inputs)


def test_a_model_no_tracer_takes_is_refused_in_one_line(models_file):
    from toolkit.errors import UserError

    with pytest.raises(UserError, match=r"OnValues' failed to export with torch.export: "):
        load_model(f"{models_file}:OnValues")
