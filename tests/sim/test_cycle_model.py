"""Our cycle model next to Vela's per-operation estimate: agreement where Vela is unbiased, and an
explanation for every disagreement over 10%."""

from __future__ import annotations

import pytest

from toolkit.npu import npu_config
from toolkit.sim import load_payload, simulate
from toolkit.sim.memory_system import memory_system
from toolkit.sim.vela_estimate import compare_cycles, vela_estimates

UNBIASED = ("conv5x5_s2_valid", "conv2x2_c40_c70", "fc_256_10")
LUT_BOOKED = ("conv3x3_same_relu", "dw3x3_same", "maxpool2", "avgpool3_s1")


def _compare(cases, name: str, accelerator: str):
    case = cases.get(name, accelerator)
    result = simulate(load_payload(case.npz[accelerator]), [case.input], accelerator)
    npu = npu_config(accelerator)
    memory = memory_system(accelerator, npu.system_config, npu.memory_mode)
    return compare_cycles(
        result.operations, vela_estimates(case.tosa, accelerator), accelerator, memory
    )


@pytest.mark.parametrize("accelerator", ("ethos-u55-128", "ethos-u55-32"))
@pytest.mark.parametrize("name", UNBIASED)
def test_agrees_with_vela_where_vela_is_unbiased(cases, name, accelerator):
    (row,) = [r for r in _compare(cases, name, accelerator) if r.operator != "Transpose"]
    assert not row.disagrees, (row.ours, row.vela)


@pytest.mark.parametrize("name", LUT_BOOKED)
def test_activation_booking_explains_the_gap(cases, name):
    """Vela books a table-lookup cost on operations with no fused activation; ours follows the
    ACTIVATION register (clip), and with Vela's booking it lands within 10% of Vela."""
    (row,) = [r for r in _compare(cases, name, "ethos-u55-128") if r.operator != "Transpose"]
    assert row.ours < row.vela and row.disagrees
    assert "no fused operation" in row.note
    as_vela = int(row.note.split("ours would be ")[1].split()[0])
    assert abs(as_vela / row.vela - 1) <= 0.10, row.note


def test_every_disagreement_is_explained(cases):
    rows = [
        r
        for name in ("maxpool2", "dw3x3_mult2_s2", "conv1x1_c3_c8")
        for r in _compare(cases, name, "ethos-u55-128")
    ]
    assert any(r.operator == "Transpose" and r.npu_ops > 1 for r in rows)
    unexplained = [(r.operator, r.ours, r.vela) for r in rows if r.disagrees and not r.note]
    assert not unexplained


def test_convs_scale_with_the_mac_array(cases):
    """The same conv on a 4x wider MAC array takes fewer cycles (u-blocks, output stage)."""

    def conv(accelerator):
        (row,) = [
            r for r in _compare(cases, "conv3x3_same_relu", accelerator) if r.operator == "Conv2D"
        ]
        return row.ours

    assert conv("ethos-u55-128") < conv("ethos-u55-32") / 2
