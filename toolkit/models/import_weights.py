"""Loading a .tflite file's trained weights into the matching PyTorch architecture.

Layers pair up in order: the file's CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED operators in
operator order against the module's Conv2d / Linear layers in the order a forward pass runs them.
The architecture must take conv biases where the file has folded batch norms into them.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..atomic_write import write_atomic
from ..errors import UserError
from .tflite_weights import TfliteLayer, read_layers

Layer = nn.Conv2d | nn.Linear  # the layers that take a .tflite file's weights


def layers_in_execution_order(module: nn.Module, example_inputs: tuple) -> list[tuple[str, Layer]]:
    names = {m: n for n, m in module.named_modules()}
    order: list[Layer] = []
    hooks = [
        m.register_forward_hook(lambda _m, _i, _o, m=m: order.append(m) if m not in order else None)
        for m in module.modules()
        if isinstance(m, (nn.Conv2d, nn.Linear))
    ]
    try:
        with torch.no_grad():
            module(*example_inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return [(names[m], m) for m in order]


def _describe(name: str, layer: Layer) -> str:
    return f"{name} ({type(layer).__name__}, weight {tuple(layer.weight.shape)})"


def _kind_matches(layer: Layer, tfl: TfliteLayer) -> bool:
    if isinstance(layer, nn.Linear):
        return tfl.kind == "linear"
    depthwise = layer.groups > 1 and layer.groups == layer.in_channels
    return tfl.kind == ("depthwise" if depthwise else "conv2d") and layer.groups in (
        1,
        layer.in_channels,
    )


def load_tflite_weights(
    module: nn.Module,
    example_inputs: tuple,
    tflite: Path | tuple[TfliteLayer, ...],
    source: str = "the .tflite file",
) -> None:
    """Copy the file's dequantized weights and biases into `module` in place.

    Raises UserError naming the first layer whose kind or shape does not match.
    """
    layers = read_layers(tflite) if isinstance(tflite, (str, Path)) else tflite
    ours = layers_in_execution_order(module, example_inputs)
    for position, ((name, layer), tfl) in enumerate(zip(ours, layers)):
        where = f"layer {position + 1} {_describe(name, layer)} vs {source} {tfl.describe()}"
        if not _kind_matches(layer, tfl) or tuple(layer.weight.shape) != tfl.weight.shape:
            raise UserError(
                f"first mismatching layer: {where}: expected weight "
                f"{tfl.weight.shape} in PyTorch layout"
            )
        if tfl.bias is not None and np.any(tfl.bias) and layer.bias is None:
            raise UserError(
                f"{where}: the file has a bias (batch norm folded in) and the layer "
                "has none: build it with bias=True"
            )
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(tfl.weight))
            if layer.bias is not None:
                layer.bias.copy_(
                    torch.from_numpy(tfl.bias)
                    if tfl.bias is not None
                    else torch.zeros_like(layer.bias)
                )
    if len(ours) != len(layers):
        raise UserError(
            f"the model has {len(ours)} conv/linear layers, {source} has "
            f"{len(layers)} weighted operators: "
            + (
                f"first unmatched: {_describe(*ours[len(layers)])}"
                if len(ours) > len(layers)
                else f"first unmatched: {layers[len(ours)].describe()}"
            )
        )


def export_with_tflite_weights(
    tflite: Path, spec: str, out: Path, input_shape: str | None = None
) -> Path:
    """`path.py:Class` (or :factory) with the weights of `tflite`, saved as a torch.export .pt2
    (with its example inputs, so etk compile/compare take it as MODEL)."""
    from .loader import load_model

    if not spec.partition(":")[0].endswith(".py"):
        raise UserError(f"--into '{spec}' is not path/to/file.py:ClassName")
    model = load_model(spec, input_shape)
    load_tflite_weights(model.module, model.example_inputs, Path(tflite), Path(tflite).name)
    program = torch.export.export(model.module.eval(), model.example_inputs)
    out = Path(out)
    archive = io.BytesIO()
    torch.export.save(program, archive)
    write_atomic(out, archive.getvalue())
    return out
