"""The graph rewrites as data: name, stage, default, one line each, without importing torch.

The CLI's --rewrites help and the defaults come from REWRITES; toolkit.rewrites runs them (its
registries must name the same rewrites, tests/lower/test_rewrites.py checks), and docs/usage.md
describes each in this order (checked there too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class RewriteInfo:
    name: str
    stage: Literal["exported", "lowering"]  # the exported graph before quantization, or inside
    # ExecuTorch's Arm TOSA pass pipeline while lowering (what it rewrites exists only there)
    default: bool
    summary: str


FOLD_PAD = "fold-pad-into-conv"
BATCHED_CONV = "batched-1x1-conv-as-image"
INVERSE_PERMUTES = "cancel-inverse-permutes"
SLICED_MATMUL = "copy-sliced-matmul-input"
SLICED_ELEMENTWISE = "copy-sliced-elementwise-inputs"
REWRITES = (
    RewriteInfo(
        "global-pool-stride",
        "exported",
        True,
        "a pool whose window covers its whole input gets stride 1 (Ethos-U pools take <= 3)",
    ),
    RewriteInfo(
        "global-pool-1d-as-mean",
        "exported",
        True,
        "AdaptiveAvgPool1d(1) as mean(x, -1, keepdim=True), which upstream quantizes",
    ),
    RewriteInfo(
        "pool-1d-as-2d",
        "exported",
        True,
        "MaxPool1d / AvgPool1d as the 2-D pool over a height of 1, which upstream quantizes",
    ),
    RewriteInfo(
        "conv-transpose-1d-as-2d",
        "exported",
        True,
        "ConvTranspose1d as the 2-D transposed convolution over a height of 1, which the "
        "partitioner takes",
    ),
    RewriteInfo(
        "residual-branch-order",
        "exported",
        True,
        "an add's longer branch last, so Vela schedules it first and buffers less",
    ),
    RewriteInfo(
        "channel-shuffle-as-conv",
        "exported",
        True,
        "ShuffleNet's view/transpose/view channel shuffle as one 1x1 permutation convolution",
    ),
    RewriteInfo(
        FOLD_PAD,
        "lowering",
        True,
        "an explicit zero pad folded into the convolution that reads it",
    ),
    RewriteInfo(
        BATCHED_CONV,
        "lowering",
        True,
        "a per-token linear's batched 1x1 convolution with a clamp after it run as one square "
        "image (Vela 5.2.0 runs the clamp as an extra operation; 5.1.0 compiled it wrongly)",
    ),
    RewriteInfo(
        INVERSE_PERMUTES,
        "lowering",
        True,
        "a transpose that undoes the one before it is dropped (Vela 5.1.0 and 5.2.0 merge such a "
        "pair and drop the first one's delegate output)",
    ),
    RewriteInfo(
        SLICED_MATMUL,
        "lowering",
        True,
        "a batched matmul's first operand, when a slice (an attention's q), copied into its own "
        "tensor (Vela 5.1.0 and 5.2.0 otherwise read batch 0's rows for every batch)",
    ),
    RewriteInfo(
        SLICED_ELEMENTWISE,
        "lowering",
        True,
        "an elementwise add, sub or mul of two slices (`q + k` after a split) reads each slice "
        "from a tensor of its own (Vela 5.2.0 otherwise overwrites one slice with the other)",
    ),
)
DEFAULT_REWRITES = tuple(r.name for r in REWRITES if r.default)
LOWERING_REWRITES = tuple(r.name for r in REWRITES if r.stage == "lowering")
