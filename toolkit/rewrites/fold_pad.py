"""Fold an explicit zero PAD into the padding of the convolution that reads it.

Models ported from TensorFlow pad explicitly before a convolution (TF "same" padding written as
`F.pad(x, (0, 1, 0, 1))` + `Conv2d(..., stride=2, padding=0)`, e.g. timm's Conv2dSame). ExecuTorch
1.5.1 lowers that to a TOSA PAD followed by a CONV2D, and Vela runs the PAD as extra NPU
operations. TOSA CONV2D and DEPTHWISE_CONV2D take 4-sided padding [top, bottom, left, right]
filled with the input zero point, so a PAD of the input zero point on H and W only, read only by
the convolution, is exactly the convolution's own padding.

FoldPadIntoConvPass runs in ExecuTorch's Arm pass pipeline right after RewritePadPass (which
makes the tosa.PAD), registered through ExecuTorch's extension point only while we lower
(fold_pads_into_convs; rewrites/__init__.py: lowering_rewrites).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from executorch.backends.arm._passes import ArmPass, RewritePadPass
from executorch.backends.arm._passes.arm_pass_utils import (
    get_first_fake_tensor,
    permute_fake_tensor_metadata,
)
from executorch.backends.arm._passes.fold_qdq_with_annotated_qparams_pass import (
    get_input_qparams,
)
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass, PassResult
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from .pass_insertion import inserted_after

_PAD = exir_ops.backend.tosa.PAD.default
_CONST_SHAPE = exir_ops.backend.tosa.CONST_SHAPE.default
_PERMUTE = exir_ops.edge.aten.permute_copy.default
_CONV2D = exir_ops.backend.tosa.CONV2D.default
_DEPTHWISE = exir_ops.backend.tosa.DEPTHWISE_CONV2D.default
_INPUT, _WEIGHT, _STRIDE, _PADDING, _DILATION = 0, 1, 3, 4, 5  # tosa conv args


def static_ints(value) -> list[int] | None:
    """A static int list, from a list or a tosa.CONST_SHAPE node; None if not static."""
    if isinstance(value, Node):
        if value.target != _CONST_SHAPE:
            return None
        value = value.args[0]
    if not isinstance(value, Sequence) or not all(type(v) is int for v in value):
        return None
    return list(value)


def _kernel_hw(conv: Node) -> tuple[int, int]:
    shape = get_first_fake_tensor(conv.args[_WEIGHT]).shape
    # CONV2D weights are OHWI, DEPTHWISE_CONV2D weights HWCM (see RewriteConvPass)
    return (
        (int(shape[1]), int(shape[2])) if conv.target == _CONV2D else (int(shape[0]), int(shape[1]))
    )


def _input_zero_point(conv: Node) -> int | None:
    """What the convolution pads with: its input zero point (0 for a float input)."""
    if get_first_fake_tensor(conv.args[_INPUT]).dtype not in (torch.int8, torch.int16):
        return 0
    try:
        return get_input_qparams(conv)[0].get_zp_per_tensor()
    except (ValueError, TypeError, KeyError):
        return None


def _leading_pad_ok(pad: int, stride: int, kernel: int) -> bool:
    # Vela's own rule for replacing a PAD by hardware padding (tflite_graph_optimiser)
    return pad == kernel // 2 or kernel // 2 <= stride or pad % stride == 0


def _fits(size: int, before: int, after: int, kernel: int, stride: int, dilation: int) -> bool:
    """Padding the NPU applies as a PAD would, on an output size TOSA accepts.

    At most (dilated kernel) // 2 on each side, as Vela requires before it replaces a PAD by
    hardware padding (tflite_graph_optimiser.replace_pad_by_hw_pad), and TOSA's exactness
    condition (IH - 1 + pad_before + pad_after - (KH - 1) * dilation) % stride == 0, which holds
    whenever the padded input was exact for the unpadded convolution."""
    extent = (kernel - 1) * dilation + 1
    return (
        before <= extent // 2
        and after <= extent // 2
        and _leading_pad_ok(before, stride, extent)
        and (size - 1 + before + after - (kernel - 1) * dilation) % stride == 0
    )


def _pad_read_by(conv: Node) -> tuple[Node | None, Node, Node] | None:
    """(permute or None, pad, the pad's input) when the conv reads a tosa.PAD only it reads,
    directly or through a permute_copy only it reads; else None."""
    permute, pad = None, conv.args[_INPUT]
    if isinstance(pad, Node) and pad.target == _PERMUTE:
        permute, pad = pad, pad.args[0]
        if len(permute.users) != 1:
            return None
    if not isinstance(pad, Node) or pad.target != _PAD or len(pad.users) != 1:
        return None
    source = pad.args[0]
    if not isinstance(source, Node):
        return None
    return permute, pad, source


def _hw_padding(permute: Node | None, pad: Node) -> tuple[list[int], list[int]] | None:
    """(the PAD's [top, bottom, left, right] in the conv's NHWC order, the permute's axis order)
    of a static 4-D PAD of N and C by 0 and H and W by >= 0; else None."""
    padding = static_ints(pad.args[1])
    rank = len(get_first_fake_tensor(pad).shape)
    order = static_ints(permute.args[1]) if permute is not None else list(range(rank))
    if (
        rank != 4
        or padding is None
        or order is None
        or len(padding) != 2 * rank
        or min(padding) < 0
        or sorted(order) != list(range(rank))
    ):
        return None
    pairs = [padding[2 * d : 2 * d + 2] for d in order]  # in the conv's NHWC order
    if pairs[0] != [0, 0] or pairs[3] != [0, 0]:
        return None
    return pairs[1] + pairs[2], order


def _conv_padding(
    conv: Node, pad: Node, source: Node, added: list[int], order: list[int]
) -> list[int] | None:
    """The conv's padding plus `added` ([top, bottom, left, right]) when the PAD pads with the
    conv's input zero point and the NPU applies the sum as the PAD would (_fits); else None."""
    zero_point = _input_zero_point(conv)
    if zero_point is None or pad.kwargs.get("value", 0) != zero_point:
        return None
    stride, old, dilation = (static_ints(conv.args[i]) for i in (_STRIDE, _PADDING, _DILATION))
    if stride is None or old is None or dilation is None or len(old) != 4:
        return None
    new = [before + more for before, more in zip(old, added)]
    source_shape = get_first_fake_tensor(source).shape
    height, width = (source_shape[order[1]], source_shape[order[2]])
    if not isinstance(height, int) or not isinstance(width, int):
        return None
    kernel_h, kernel_w = _kernel_hw(conv)
    if not (
        _fits(height, new[0], new[1], kernel_h, stride[0], dilation[0])
        and _fits(width, new[2], new[3], kernel_w, stride[1], dilation[1])
    ):
        return None
    return new


def _bypass_pad(
    conv: Node, permute: Node | None, pad: Node, source: Node, order: list[int], padding: list[int]
) -> None:
    """Feed the PAD's input to the permute (or the conv), give the conv `padding`, and erase the
    PAD and its shape node when nothing else reads that."""
    if permute is not None:
        permute.replace_input_with(pad, source)
        permute.meta["val"] = permute_fake_tensor_metadata(
            get_first_fake_tensor(source), tuple(order)
        )
    else:
        conv.replace_input_with(pad, source)
    args = list(conv.args)
    args[_PADDING] = padding
    conv.args = tuple(args)
    shape_node = pad.args[1]
    conv.graph.erase_node(pad)
    if isinstance(shape_node, Node) and not shape_node.users:
        conv.graph.erase_node(shape_node)


class FoldPadIntoConvPass(ArmPass):
    """tosa.PAD -> [permute_copy] -> tosa.CONV2D / DEPTHWISE_CONV2D becomes [permute_copy] ->
    conv with the PAD's H and W padding added to the conv's padding.

    Folds only when it is exact: a static PAD of N and C by 0 and H and W by >= 0, whose pad value
    is the conv's input zero point, whose only user is the conv (or a permute whose only user is
    the conv, the NCHW -> NHWC permute RewriteConvPass puts before the conv). Anything else, such
    as a slice SizeAdjustInputPass put between them, is left alone.
    """

    _passes_required_after: set[type[ExportPass]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.folded: list[tuple[str, list[int]]] = []  # (conv node, pad added [t, b, l, r])

    def call(self, graph_module: GraphModule) -> PassResult:
        modified = False
        for node in list(graph_module.graph.nodes):
            if node.op == "call_function" and node.target in (_CONV2D, _DEPTHWISE):
                added = self._fold(node)
                if added is not None:
                    self.folded.append((node.name, added))
                    modified = True
        if modified:
            graph_module.graph.lint()
            graph_module.recompile()
        return PassResult(graph_module, modified)

    @staticmethod
    def _fold(conv: Node) -> list[int] | None:
        """The padding folded in ([top, bottom, left, right]), or None if it could not be."""
        read = _pad_read_by(conv)
        if read is None:
            return None
        permute, pad, source = read
        hw = _hw_padding(permute, pad)
        if hw is None:
            return None
        added, order = hw
        padding = _conv_padding(conv, pad, source, added, order)
        if padding is None:
            return None
        _bypass_pad(conv, permute, pad, source, order, padding)
        return added


@contextmanager
def fold_pads_into_convs() -> Iterator[FoldPadIntoConvPass]:
    """Run FoldPadIntoConvPass after RewritePadPass in every Arm TOSA pipeline started inside;
    yields the pass, whose `folded` lists what it did."""
    ours = FoldPadIntoConvPass()
    with inserted_after(RewritePadPass, ours):
        yield ours


@contextmanager
def fold_pad_rewrite() -> Iterator[Callable[[], tuple[RewriteRecord, ...]]]:
    """fold-pad-into-conv for the length of a lowering; yields what gives its records afterwards."""
    with fold_pads_into_convs() as fold_pass:
        yield lambda: tuple(
            RewriteRecord(
                "fold-pad-into-conv",
                conv,
                "TOSA lowering",
                f"PAD [{', '.join(map(str, added))}] (top, bottom, left, right) folded into the "
                "convolution's padding: no separate NPU operations for it (same result)",
            )
            for conv, added in fold_pass.folded
        )
