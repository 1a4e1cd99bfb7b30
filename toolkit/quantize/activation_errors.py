"""How much of each layer's output signal its int8 quantization keeps, on the calibration inputs.

The converted graph (convert_pt2e) computes in float between quantize/dequantize pairs. At each
quantize of a layer's output, the float value entering it is what the layer computed (from
already quantized inputs and weights); rounding it to the quantize's grid, clipped to its range,
is the error that layer's own int8 output adds (an activation's, to the layer whose output stage
runs it). Its SQNR (signal over that rounding and clipping
error) says where 8 bits are too few: a heavy-tailed output whose calibrated range leaves few
steps for most values, or one channel whose range leaves the others few (the SQNR kept is the
median over channels). int16 activations (--quant a16w8) make each step 256 times finer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch.fx import GraphModule, Interpreter, Node

from ..artifacts import ActivationError, LayerSource
from ..graph_info import node_layer
from .decisions import ACTIVATIONS, DEQUANTIZE, QUANTIZE

# a requantize that only moves values (a reshape, a permute) keeps them exactly; above this the
# figure is not an error worth keeping
EXACT_DB = 100.0


def _all_but_channels(x: np.ndarray) -> tuple[int, ...]:
    """The axes summed over per channel: axis 1 of an NCHW map, the last of (N, C) features
    and (N, T, D) tokens."""
    channels = 1 if x.ndim == 4 else x.ndim - 1
    return tuple(axis for axis in range(x.ndim) if axis != channels)


def _median_sqnr(signal: np.ndarray, error: np.ndarray) -> float:
    """The median over channels of each channel's SQNR (dB): a channel whose values span a small
    part of the tensor's range keeps few steps, which one SQNR over the whole tensor hides."""
    live = signal > 0
    if not np.any(live):
        return math.inf
    ratio = np.divide(
        signal[live], error[live], out=np.full(live.sum(), np.inf), where=error[live] > 0
    )
    return float(10 * np.log10(np.median(ratio)))


def _owner(node: Node) -> Node:
    """The operation whose output an activation clips (through a quantize/dequantize pair): the
    NPU runs the activation in that operation's output stage, so its error is that layer's."""
    while node.target in ACTIVATIONS and isinstance(node.args[0], Node):
        parent = node.args[0]
        if parent.target in DEQUANTIZE and isinstance(parent.args[0], Node):
            quantize = parent.args[0]
            if quantize.target in QUANTIZE and isinstance(quantize.args[0], Node):
                parent = quantize.args[0]
        if parent.op != "call_function":
            break
        node = parent
    return node


class _Errors(Interpreter):
    """Runs the converted graph, adding up signal and error at each int8 output quantize."""

    def __init__(self, graph: GraphModule):
        super().__init__(graph)
        # node -> [signal per channel, error per channel, clipped values, values]
        self.sums: dict[str, list] = {}
        self.layers: dict[str, LayerSource] = {}

    def run_node(self, n: Node):
        result = super().run_node(n)
        producer = n.args[0] if n.op == "call_function" and n.target in QUANTIZE else None
        if isinstance(producer, Node) and producer.op != "placeholder" and n.args[5] == torch.int8:
            scale, zero_point, qmin, qmax = (float(a) for a in n.args[1:5])  # type: ignore[arg-type]
            x = self.env[producer].detach().double().numpy()
            steps = np.round(x / scale) + zero_point
            error = x - (np.clip(steps, qmin, qmax) - zero_point) * scale
            axes = _all_but_channels(x)
            sums = self.sums.setdefault(n.name, [0.0, 0.0, 0, 0])
            sums[0] = sums[0] + np.sum(x * x, axis=axes)
            sums[1] = sums[1] + np.sum(error * error, axis=axes)
            sums[2] += int(np.count_nonzero((steps < qmin) | (steps > qmax)))
            sums[3] += x.size
            self.layers.setdefault(n.name, node_layer(_owner(producer)))
        return result


def activation_errors(graph: GraphModule, samples: Sequence[tuple]) -> tuple[ActivationError, ...]:
    """Per layer, the worst median channel SQNR (dB) its int8 outputs keep over the samples;
    layers whose output is kept exactly (a reshape's requantize) are left out."""
    errors = _Errors(graph)
    with torch.no_grad():
        for sample in samples:
            errors.run(*sample)
    worst: dict[str, ActivationError] = {}
    for name, (signal, error, clipped, values) in errors.sums.items():
        sqnr = _median_sqnr(np.atleast_1d(signal), np.atleast_1d(error))
        if sqnr >= EXACT_DB:
            continue
        layer = errors.layers[name]
        found = ActivationError(
            layer, round(sqnr, 2), round(clipped / values, 5) if values else 0.0
        )
        if layer.key not in worst or found.sqnr_db < worst[layer.key].sqnr_db:
            worst[layer.key] = found
    return tuple(worst.values())
