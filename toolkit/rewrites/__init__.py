"""Graph rewrites that keep results exact and change what the NPU executes.

Each rewrite has a name (used by --rewrites and in the report), runs on the exported graph before
quantization (the "lowering" ones of rewrite_names.REWRITES: while lowering), and returns a
record per place it changed.
Only rewrites that change the NPU's work belong here; nothing whose only effect is on Vela's
estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager

from torch.fx import GraphModule

from ..artifacts import RewriteRecord
from ..errors import UserError
from ..rewrite_names import (
    BATCHED_CONV,
    DEFAULT_REWRITES,
    FOLD_PAD,
    INVERSE_PERMUTES,
    REWRITES,
    SLICED_ELEMENTWISE,
    SLICED_MATMUL,
)

Rewrite = Callable[[GraphModule], list[RewriteRecord]]


def _registry() -> dict[str, Rewrite]:
    from .branch_order import longer_branch_last
    from .channel_shuffle import channel_shuffle_as_conv
    from .conv_transpose1d import conv_transpose_1d_as_2d
    from .global_pool import global_pool_stride_one
    from .pool1d import global_pool_1d_as_mean, pool_1d_as_2d

    return {
        "global-pool-stride": global_pool_stride_one,
        "global-pool-1d-as-mean": global_pool_1d_as_mean,
        "pool-1d-as-2d": pool_1d_as_2d,
        "conv-transpose-1d-as-2d": conv_transpose_1d_as_2d,
        "residual-branch-order": longer_branch_last,
        "channel-shuffle-as-conv": channel_shuffle_as_conv,
    }


LoweringRewrite = Callable[[], AbstractContextManager[Callable[[], tuple[RewriteRecord, ...]]]]


def _lowering_registry() -> dict[str, LoweringRewrite]:
    from .batched_conv import batched_conv_rewrite
    from .fold_pad import fold_pad_rewrite
    from .inverse_permutes import inverse_permutes_rewrite
    from .sliced_elementwise import sliced_elementwise_rewrite
    from .sliced_matmul import sliced_matmul_rewrite

    return {
        FOLD_PAD: fold_pad_rewrite,
        BATCHED_CONV: batched_conv_rewrite,
        INVERSE_PERMUTES: inverse_permutes_rewrite,
        SLICED_MATMUL: sliced_matmul_rewrite,
        SLICED_ELEMENTWISE: sliced_elementwise_rewrite,
    }


def available_rewrites() -> tuple[str, ...]:
    return tuple(r.name for r in REWRITES)


def resolve_rewrites(spec: str) -> tuple[str, ...]:
    """'default', 'none', or a comma-separated list of rewrite names."""
    if spec == "default":
        return DEFAULT_REWRITES
    if spec == "none":
        return ()
    names = tuple(n.strip() for n in spec.split(",") if n.strip())
    unknown = [n for n in names if n not in available_rewrites()]
    if unknown:
        raise UserError(
            f"unknown rewrite {', '.join(unknown)}: use default, none or a list of "
            f"{', '.join(available_rewrites())}"
        )
    return names


@contextmanager
def lowering_rewrites(names: tuple[str, ...]) -> Iterator[Callable[[], tuple[RewriteRecord, ...]]]:
    """The named lowering rewrites registered for the length of a lowering; yields what gives
    their records once it is done."""
    registry = _lowering_registry()
    with ExitStack() as stack:
        done = [stack.enter_context(registry[name]()) for name in names if name in registry]
        yield lambda: tuple(record for records in done for record in records())


def apply_rewrites(graph: GraphModule, names: tuple[str, ...]) -> tuple[RewriteRecord, ...]:
    registry = _registry()
    records: list[RewriteRecord] = []
    for name in names:
        if name in registry:  # the others run while lowering
            records.extend(registry[name](graph))
    if records:
        graph.graph.lint()
        graph.recompile()
    return tuple(records)
