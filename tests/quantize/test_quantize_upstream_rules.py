"""Issue 18 item 2: both variants quantize with upstream's TOSAQuantizationConfig, so upstream's
rules hold for every operator that is not a conv/linear + activation block: transposed-conv
weights per channel on axis 1, upsample and mean sharing their input's qparams, comparison
operands sharing one quantization. The variants must annotate those operators identically.
(Upstream's transform_for_annotation decomposes this keepdim mean into sum and mul first.)"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import Node
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    QuantizationSpec,
    SharedQuantizationSpec,
)

from toolkit.artifacts import LoadedModel
from toolkit.quantize.activations import canonicalize_activations
from toolkit.quantize.calibration import random_calibration
from toolkit.quantize.decisions import DEQUANTIZE, QUANTIZE
from toolkit.quantize.quantizer import export_module, make_quantizer, quantize
from toolkit.targets import load_target

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed


class MixedOps(nn.Module):
    """One conv + ReLU6 block and, beside it, operators with upstream-specific rules."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.up_conv = nn.ConvTranspose2d(4, 8, 2, stride=2)
        self.block = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        up = F.interpolate(self.up_conv(x), scale_factor=2, mode="nearest")
        mean = up.mean(dim=(2, 3), keepdim=True)
        less = torch.lt(x, x * 0.5)
        pooled = F.avg_pool2d(F.relu6(self.block(x)), 2)  # the block, and an operator after it
        return up, mean, less, pooled


BLOCK = {"conv2d", "hardtanh"}  # the block's nodes: annotated differently by design
AFTER_BLOCK = {"avg_pool2d"}  # same rule, but its input's qparams differ by the block's range


def _inputs():
    return (torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0)),)


def _describe(spec, names) -> tuple:
    if spec is None:
        return (None,)
    if isinstance(spec, SharedQuantizationSpec):
        edge = spec.edge_or_node
        return ("shared", tuple(names(n) for n in edge) if isinstance(edge, tuple) else names(edge))
    if isinstance(spec, DerivedQuantizationSpec):
        return (
            "derived",
            spec.dtype,
            spec.qscheme,
            spec.ch_axis,
            tuple(tuple(names(n) for n in pair) for pair in spec.derived_from),
        )
    if isinstance(spec, QuantizationSpec):
        observer = getattr(spec.observer_or_fake_quant_ctr, "p", None)
        return (
            "own",
            spec.dtype,
            spec.qscheme,
            spec.ch_axis,
            spec.quant_min,
            spec.quant_max,
            getattr(observer, "func", observer),
        )
    return (type(spec).__name__,)


def _annotations(variant: str) -> dict[str, tuple]:
    model = LoadedModel("test:mixed", "mixed", MixedOps().eval(), _inputs(), "mixed-ops")
    graph = export_module(model)
    canonicalize_activations(graph)
    quantizer = make_quantizer(load_target("corstone-300").npu(), variant)
    graph = quantizer.transform_for_annotation(graph)
    quantizer.annotate(graph)
    names = lambda n: n.name if isinstance(n, Node) else str(n)  # noqa: E731
    result = {}
    for node in graph.graph.nodes:
        annotation = node.meta.get("quantization_annotation")
        if node.op != "call_function" or annotation is None:
            continue
        result[node.name] = (
            tuple(
                sorted(
                    (names(k), _describe(v, names)) for k, v in annotation.input_qspec_map.items()
                )
            ),
            _describe(annotation.output_qspec, names),
        )
    return result


def test_variants_annotate_every_non_block_operator_identically():
    fused, unfused = _annotations("fused"), _annotations("unfused")
    others = set(fused) - BLOCK
    assert others >= {"conv_transpose2d", "upsample_nearest2d", "sum_1", "mul", "lt", "avg_pool2d"}
    assert set(unfused) - BLOCK == others
    assert {n: fused[n] for n in others} == {n: unfused[n] for n in others}
    inputs, output = fused["conv_transpose2d"]
    (weight,) = [
        spec for _, spec in inputs if spec[:3] == ("own", torch.int8, torch.per_channel_symmetric)
    ]
    assert weight[3] == 1  # the IOHW weight's output channels
    (bias,) = [spec for _, spec in inputs if spec[0] == "derived"]
    assert bias[3] == 0  # the bias is 1-D
    assert fused["upsample_nearest2d"][1] == ("shared", ("conv_transpose2d", "upsample_nearest2d"))
    assert dict(fused["lt"][0])["mul_1"] == ("shared", ("x", "lt"))
    assert fused["avg_pool2d"][1] == ("shared", ("hardtanh", "avg_pool2d"))


def _qparams(graph, node: Node) -> tuple:
    """(inputs' dequantize params, outputs' quantize params) of node, per-channel tensors as lists."""

    def value(arg):
        if isinstance(arg, Node) and arg.op == "get_attr":
            return getattr(graph, arg.target).tolist()
        return arg.name if isinstance(arg, Node) else arg

    ins = tuple(
        tuple(value(a) for a in arg.args[1:])
        for arg in node.args
        if isinstance(arg, Node)
        and (arg.target in DEQUANTIZE or arg.target == qd.dequantize_per_channel.default)
    )
    outs = tuple(
        tuple(value(a) for a in user.args[1:]) for user in node.users if user.target in QUANTIZE
    )
    return ins, outs


def test_variants_quantize_every_operator_before_the_block_identically():
    x = _inputs()
    model = LoadedModel("test:mixed", "mixed", MixedOps().eval(), x, "mixed-ops")
    npu = load_target("corstone-300").npu()
    params = {}
    for variant in ("fused", "unfused"):
        graph = quantize(model, random_calibration(x, 4, 0), variant, npu).graph_module
        params[variant] = {
            n.name: _qparams(graph, n)
            for n in graph.graph.nodes
            if n.op == "call_function"
            and n.target not in QUANTIZE
            and n.target not in DEQUANTIZE
            and "quantized_decomposed" not in str(n.target)
        }
    compared = set(params["fused"]) - BLOCK - AFTER_BLOCK
    assert compared >= {"conv_transpose2d", "upsample_nearest2d", "sum_1", "mul", "lt", "mul_1"}
    for name in sorted(compared):
        assert params["fused"][name] == params["unfused"][name], name
    ins, _ = params["fused"]["conv_transpose2d"]
    weight_scales = [p for p in ins if isinstance(p[0], list)][0][0]
    assert len(weight_scales) == 8  # one scale per output channel (axis 1 of the IOHW weight)
