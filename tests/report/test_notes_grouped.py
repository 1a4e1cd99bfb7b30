"""Notes a user can read: a module that runs on the CPU as several float operators is a warning,
the same a16w8 fusion note is said once for every block it applies to, and the table says what
a16w8 fusion means.

On main Mish ran as 6 float CPU operators with no warning, and at a16w8 a 5-line note was printed
once per block (9 times for 9 blocks) beside "activations fused 9 | 0" and "CLAMP ops 9 | 9".
"""

from __future__ import annotations

import pytest
import torch
from rich.console import Console
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.job import Job
from toolkit.pipeline import run_job
from toolkit.report.tables import notes, print_result, rows


class ConvMish(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.Mish()
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.head(self.act(self.conv(x)))


class ConvRelus(nn.Module):
    def __init__(self, blocks: int = 4):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 3, padding=1) for _ in range(blocks))

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return x


def _run(tmp_path_factory, module: nn.Module, shape, **job) -> object:
    torch.manual_seed(0)
    name = type(module).__name__
    loaded = LoadedModel(f"test:{name}", name, module.eval(), (torch.randn(shape),), name)
    out = tmp_path_factory.mktemp(name)
    return run_job(Job(model=f"test:{name}", out_dir=out, eval_samples=2, **job), model=loaded)


@pytest.fixture(scope="module")
def mish(tmp_path_factory):
    return _run(tmp_path_factory, ConvMish(), (1, 3, 8, 8), variants=("fused",))


@pytest.fixture(scope="module")
def a16w8(tmp_path_factory):
    return _run(tmp_path_factory, ConvRelus(), (1, 8, 8, 8), quant="a16w8")


def test_a_module_run_as_several_float_cpu_operators_is_a_warning(mish):
    warnings = [n for n in notes(mish) if n.startswith("WARNING") and "float" in n]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "WARNING fused: act (Mish) at test_notes_grouped.py:30 runs on the CPU in float as "
        "6 operators (exp, gt, log1p, where, tanh, mul)"
    )
    report_warnings = mish.to_dict()["warnings"]
    assert warnings[0].removeprefix("WARNING ") in report_warnings


def test_the_a16w8_note_is_said_once_for_all_its_blocks(a16w8):
    lines = [n for n in notes(a16w8, terse=True) if "symmetric int16" in n]
    assert len(lines) == 1
    assert lines[0].startswith(
        "fused: relu after conv2d, conv2d_1, conv2d_2, conv2d_3 (4 blocks): symmetric int16: "
        "zero point 0 is not qmin -32767"
    )
    console = Console(record=True, width=100)
    print_result(a16w8, console)
    assert console.export_text().count("symmetric int16") == 1


def test_the_table_says_what_a16w8_fusion_means(a16w8):
    _, table = rows(a16w8)
    labels = [row[0] for row in table]
    assert "activations fused" not in labels
    fused_row = next(row for row in table if row[0].startswith("activations fused"))
    assert fused_row == [
        "activations fused (a16w8: one range per block, the CLAMP stays)",
        "4",
        "0",
        "",
    ]
    assert ["TOSA CLAMP ops", "4", "4", ""] in table
