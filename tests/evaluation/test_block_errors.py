"""Per-block output error, fused against unfused: the explanation a fused-below-unfused report gives."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from toolkit.artifacts import LoadedModel
from toolkit.evaluation.block_errors import (
    BlockError,
    block_errors,
    explain_fused_loss,
    worst_block,
)
from toolkit.quantize.calibration import random_calibration
from toolkit.targets import load_target


class _ThreeBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv_bn = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        x = torch.nn.functional.relu6(self.bn(self.conv_bn(x)))
        return torch.relu(self.fc(x.flatten(1)))


@pytest.fixture(scope="module")
def errors():
    module = _ThreeBlocks().eval()
    example = (torch.randn(1, 3, 8, 8),)
    model = LoadedModel("test:three_blocks", "three_blocks", module, example, "h")
    npu = load_target("corstone-300").npu(None, None, None, None)
    samples = tuple(
        (
            torch.from_numpy(
                np.random.default_rng(k).standard_normal((1, 3, 8, 8)).astype(np.float32)
            ),
        )
        for k in range(8)
    )
    return block_errors(model, random_calibration(example, 8, 0), npu, (), samples)


def test_each_fused_block_measured_in_graph_order(errors):
    assert [e.activation for e in errors] == ["relu", "relu6", "relu"]
    forward = inspect.getsourcelines(_ThreeBlocks.forward)[1]
    lines = [f"test_block_errors.py:{forward + k}" for k in (1, 2, 3)]
    assert [e.source.split(" at ")[1] for e in errors] == lines


def test_fused_block_output_has_the_finer_step_and_less_error(errors):
    # fused: one [0, max] quantization after the activation; unfused: the conv's own [min, max]
    # range, which the activation shares, so twice (or more) the step on a zero-centred conv output
    for e in errors:
        assert e.fused_step < e.unfused_step * 0.75, e
        assert e.fused_sqnr_db > e.unfused_sqnr_db, e
    assert worst_block(errors) is None


def test_worst_block_names_the_largest_fused_loss():
    a = BlockError("a (ReLU) at m.py:1", "relu", 0.1, 0.1, 30.0, 30.5)
    b = BlockError("b (ReLU) at m.py:2", "relu", 0.2, 0.1, 20.0, 22.0)
    c = BlockError("c (ReLU) at m.py:3", "relu", 0.05, 0.1, 35.0, 31.0)
    assert worst_block((a, b, c)) is b
    assert b.fused_loss_db == pytest.approx(2.0)
    assert worst_block((c,)) is None


def test_explanation_names_the_block_or_says_none_is_worse():
    a = BlockError("a (ReLU) at m.py:1", "relu", 0.05, 0.1, 31.0, 30.0)
    b = BlockError("b (ReLU) at m.py:2", "relu", 0.2, 0.1, 20.0, 22.5)
    assert explain_fused_loss((a, b)) == (
        "largest fused loss at b (ReLU) at m.py:2: output SQNR 20.0 dB fused vs 22.5 dB unfused "
        "(step 0.2 vs 0.1)"
    )
    assert explain_fused_loss((a,)) == (
        "no block's range is worse fused: each of the 1 block outputs is 1.0..1.0 dB closer to "
        "float fused, so the difference arises after them (the last layers' rounding deciding "
        "close calls)"
    )


def test_a_job_where_fused_scores_below_unfused_says_why(errors):
    from toolkit.evaluation.eval_data import LabelledData
    from toolkit.evaluation.task_eval import TaskAccuracy
    from toolkit.pipeline import _fused_loss

    module = _ThreeBlocks().eval()
    example = (torch.randn(1, 3, 8, 8),)
    model = LoadedModel("test:three_blocks", "three_blocks", module, example, "h")
    npu = load_target("corstone-300").npu(None, None, None, None)
    x = np.random.default_rng(1).standard_normal((4, 1, 3, 8, 8)).astype(np.float32)
    data = LabelledData(x[:, 0], np.zeros(4, dtype=np.int64), "test data", "h")

    def accuracy(value):
        return (TaskAccuracy("top1", value, 4, "sim"),)

    calibration = random_calibration(example, 8, 0)
    args = (model, calibration, npu, (), "int8", data, (1, 3, 8, 8))
    higher = {"fused": accuracy(0.75), "unfused": accuracy(0.5)}
    assert _fused_loss(*args, higher, lambda _: None) is None
    lower = {"fused": accuracy(0.5), "unfused": accuracy(0.75)}
    loss = _fused_loss(*args, lower, lambda _: None)
    assert loss.by == 0.25 and len(loss.blocks) == 3
    assert loss.why == explain_fused_loss(loss.blocks)
    worst = worst_block(loss.blocks)  # these 4 samples: the last block, with upstream error
    assert worst is loss.blocks[2] and loss.why.startswith(f"largest fused loss at {worst.source}")
