"""The two variants compiled at once (lower/parallel.py): same programs, errors carried back."""

from __future__ import annotations

import pytest

from toolkit.errors import UserError
from toolkit.lower import parallel
from toolkit.lower.build_variant import compile_variant
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.targets import load_target

pytestmark = pytest.mark.skipif(not parallel.can_compile_in_parallel(), reason="needs fork, 2 CPUs")


def test_child_error_is_raised_in_the_parent(monkeypatch):
    def fake_compile(model, calibration, variant, *rest):
        if variant == "unfused":
            raise UserError(f"cannot compile {variant}")
        return variant

    monkeypatch.setattr(parallel, "compile_variant", fake_compile)
    with pytest.raises(UserError, match="^cannot compile unfused$"):
        parallel.compile_variants(None, None, ("fused", "unfused"), None, None, (), (), True)


def test_parallel_programs_equal_serial_ones(tmp_path):
    model = load_model("zoo:conv2d_bn_relu")
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu(None, None, None)
    programs = parallel.compile_variants(
        model,
        calibration,
        ("fused", "unfused"),
        npu,
        tmp_path / "parallel",
        (),
        DEFAULT_REWRITES,
        True,
    )
    assert (tmp_path / "parallel" / "unfused" / "program.json").is_file()
    serial = compile_variant(
        model, calibration, "unfused", npu, tmp_path / "serial", (), DEFAULT_REWRITES
    )
    child = programs["unfused"]
    assert [d.payload for d in child.delegates] == [d.payload for d in serial.delegates]
    assert child.npu_ops == serial.npu_ops and child.output_quant == serial.output_quant
    assert programs["fused"].variant == "fused" and programs["fused"].delegates
