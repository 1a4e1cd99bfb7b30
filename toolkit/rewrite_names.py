"""The graph rewrites' names and which are on by default, without importing torch (the CLI's
help is built from them; toolkit.rewrites runs them)."""

from __future__ import annotations

FOLD_PAD = "fold-pad-into-conv"  # done while lowering, inside ExecuTorch's TOSA pass pipeline
DEFAULT_REWRITES = (
    "global-pool-stride",
    "global-pool-1d-as-mean",
    "residual-branch-order",
    "channel-shuffle-as-conv",
    FOLD_PAD,
)
