"""Run a batched 1x1 convolution as one image: N images of HxW become one image of (N*H)xW, N
tokens (1x1 images) the most nearly square image of N pixels (16 tokens: 4x4).

ExecuTorch lowers `nn.Linear` on a (B, T, C) input (a transformer's or a token MLP's per-token
linear) to a TOSA CONV2D on (B*T, 1, 1, C): one 1x1 image per token; a model run with batch
size 2 has 1x1 convolutions on (2, H, W, C). Vela 5.1.0 compiles such a convolution wrongly
when it fuses a CLAMP after it: its RewriteFullyConnected turns the batched convolution into an
image but leaves the fused CLAMP's output batched, and the convolution's IFM registers then read
rows 0, 4, 8, 12 of 16 and padding (seen: IFM 4x1, IFM_PAD_BOTTOM 12, IFM_STRIDE_Y 128, OFM
16x1). That program computes wrong results on any Ethos-U; lower/vela_check.py names it at
compile time. Vela 5.2.0 compiles it right: it runs the tokens as a square image itself but the
CLAMP as an extra POOL over the batched tensor. As one square image the CLAMP is fused again:
token MLPs, unfused, ethos-u55-128, simulated NPU cycles 2,992 -> 1,088 (16 tokens, 32 -> 48 ->
6) and 69,760 -> 36,224 (64 tokens, 128 -> 256 -> 128), one NPU operation fewer, bit-exact
(scripts/bench_batched_conv.py; docs/upstream-gaps.md). A column of N*H rows instead of the
square was slower there (1,504 and 78,080 cycles, 14 NPU operations for the second).

Only a batched convolution whose per-element operations include a CLAMP is rewritten: without
one (the fused variant, where the RESCALE is the ReLU) Vela 5.2.0 already runs the batched form
as the square image (the token MLP fused: 1,088 cycles, as the rewritten unfused one).

A 1x1 convolution with stride 1 and no padding computes each pixel from that pixel alone, so
(N, H, W, C), (1, N*H, W, C) and, for H = W = 1, (1, R, N/R, C) give the same values; so do the
RESCALE, CLAMP and TABLE operations after it, which act per element with the channel last. This
pass reshapes the input of such a convolution to that one image, keeps that shape through the operations that follow
(further batched 1x1 convolutions included) and reshapes back where anything else reads it.
Vela then sees an ordinary image convolution; the reshapes are free (Vela removes them).

Runs in ExecuTorch's Arm pass pipeline after RewritePadPass, where convolutions are tosa.CONV2D
in NHWC, registered only while we lower (batched_convs_as_images).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from executorch.backends.arm._passes import ArmPass, RewritePadPass
from executorch.backends.arm._passes.arm_pass_utils import create_node, get_first_fake_tensor
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass, PassResult
from torch.fx import GraphModule, Node

from ..artifacts import RewriteRecord
from ..graph_info import take_call
from .fold_pad import static_ints
from .pass_insertion import inserted_after

_CONV2D = exir_ops.backend.tosa.CONV2D.default
_VIEW = exir_ops.edge.aten.view_copy.default
# per-element operations with the channel last: they keep the image shape
_PER_ELEMENT = {
    exir_ops.backend.tosa.RESCALE.default,
    exir_ops.backend.tosa.TABLE.default,
    exir_ops.edge.aten.clamp.default,
}
_CLAMP = exir_ops.edge.aten.clamp.default
_WEIGHT, _STRIDE, _PADDING, _DILATION = 1, 3, 4, 5


def _shape(node: Node) -> tuple[int, ...]:
    return tuple(int(d) for d in get_first_fake_tensor(node).shape)


def _is_batched_pointwise_conv(node: Node) -> bool:
    """A tosa.CONV2D of a 1x1 kernel, stride 1, no padding, on (N > 1, H, W, C)."""
    if node.op != "call_function" or node.target != _CONV2D:
        return False
    source, weight = node.args[0], node.args[_WEIGHT]
    if not isinstance(source, Node) or not isinstance(weight, Node):
        return False
    return (
        _shape(source)[0] > 1
        and _shape(weight)[1:3] == (1, 1)  # OHWI
        and static_ints(node.args[_STRIDE]) == [1, 1]
        and static_ints(node.args[_PADDING]) == [0, 0, 0, 0]
    )


def image_shape(batch: int, height: int, width: int) -> tuple[int, int]:
    """The one image N images of HxW run as: (N*H)xW, or for one-pixel images (tokens) the most
    nearly square RxC with R*C = N, as Vela 5.2.0 lays out its own batched form (16 tokens: 4x4;
    a column of 16 cost more NPU cycles: docs/upstream-gaps.md)."""
    if (height, width) != (1, 1):
        return batch * height, width
    columns = max(d for d in range(1, math.isqrt(batch) + 1) if batch % d == 0)
    return batch // columns, columns


def _region(conv: Node) -> list[Node]:
    """The conv and what follows it that can keep the image shape, in graph order."""
    region, frontier = [conv], [conv]
    while frontier:
        node = frontier.pop()
        for user in node.users:
            if user in region or user.op != "call_function":
                continue
            per_element = user.target in _PER_ELEMENT and user.args[0] is node
            chained_conv = _is_batched_pointwise_conv(user) and user.args[0] is node
            if per_element or chained_conv:
                region.append(user)
                frontier.append(user)
    order = {node: i for i, node in enumerate(conv.graph.nodes)}
    return sorted(region, key=order.__getitem__)


class BatchedConvAsImagePass(ArmPass):
    """(N, H, W, C) -> conv 1x1 -> ... becomes reshape (1, N*H, W, C) -> conv 1x1 -> ... ->
    reshape back, wherever something outside the region reads it."""

    _passes_required_after: set[type[ExportPass]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.rewritten: list[tuple[str, tuple[int, ...]]] = []  # (first conv, its input shape)

    def call(self, graph_module: GraphModule) -> PassResult:
        graph = graph_module.graph
        regions: list[list[Node]] = []  # found before any change: new nodes have no value yet
        claimed: set[Node] = set()
        for node in graph.nodes:
            if node not in claimed and _is_batched_pointwise_conv(node):
                region = _region(node)
                claimed.update(region)
                if any(member.target == _CLAMP for member in region):
                    regions.append(region)
        for region in regions:
            conv = region[0]
            assert isinstance(conv.args[0], Node)
            shape = _shape(conv.args[0])
            self._enter(graph, conv, shape)
            for member in region:
                self._leave(graph, member, region)
            self.rewritten.append((conv.name, shape))
        if not self.rewritten:
            return PassResult(graph_module, False)
        graph.lint()
        # retrace: every operation's value (shape) is computed again from its new inputs
        return PassResult(super().call(graph_module).graph_module, True)

    @staticmethod
    def _enter(graph, conv: Node, shape: tuple[int, ...]) -> None:
        source = conv.args[0]
        assert isinstance(source, Node)
        batch, height, width, channels = shape
        rows, columns = image_shape(batch, height, width)
        with graph.inserting_before(conv):
            image = create_node(graph, _VIEW, (source, [1, rows, columns, channels]))
            take_call(image, conv)  # per-layer figures: the reshape is the conv's
        conv.replace_input_with(source, image)

    @staticmethod
    def _leave(graph, member: Node, region: list[Node]) -> None:
        outside = [user for user in member.users if user not in region]
        if not outside:
            return
        with graph.inserting_after(member):
            batched = create_node(graph, _VIEW, (member, list(_shape(member))))
            take_call(batched, member)
        for user in outside:
            user.replace_input_with(member, batched)


@contextmanager
def batched_conv_rewrite() -> Iterator[Callable[[], tuple[RewriteRecord, ...]]]:
    """batched-1x1-conv-as-image for the length of a lowering; yields what gives its records."""
    ours = BatchedConvAsImagePass()
    with inserted_after(RewritePadPass, ours):
        yield lambda: tuple(
            RewriteRecord(
                "batched-1x1-conv-as-image",
                conv,
                "TOSA lowering",
                f"1x1 convolution over a batch of {n} images of {h}x{w} run as one "
                f"{rows}x{columns} image, with the per-element operations after it: Vela 5.1.0 "
                "compiles the batched form wrongly when it fuses the CLAMP, Vela 5.2.0 runs the "
                "CLAMP as an extra operation (same result)",
            )
            for conv, (n, h, w, _) in ours.rewritten
            for rows, columns in [image_shape(n, h, w)]
        )
