"""Tiny single-block networks: every parent (conv1d, conv2d, depthwise, linear) x activation
(relu, relu6) x with and without batch norm. Named PARENT[_bn]_ACT, e.g. conv2d_bn_relu6."""

from __future__ import annotations

from torch import nn

PARENTS = ("conv1d", "conv2d", "depthwise", "linear")
ACTIVATIONS = {"relu": nn.ReLU, "relu6": nn.ReLU6}


def _parent(kind: str) -> tuple[nn.Module, nn.Module, tuple[int, ...]]:
    """(layer, matching batch norm, input shape)."""
    if kind == "conv1d":
        return nn.Conv1d(4, 8, 3, padding=1), nn.BatchNorm1d(8), (1, 4, 32)
    if kind == "conv2d":
        return nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), (1, 3, 16, 16)
    if kind == "depthwise":
        return nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), (1, 8, 16, 16)
    if kind == "linear":
        return nn.Linear(32, 16), nn.BatchNorm1d(16), (1, 32)
    raise ValueError(kind)


class TinyBlock(nn.Module):
    def __init__(self, parent: str, batch_norm: bool, activation: str):
        super().__init__()
        layer, bn, self.input_shape = _parent(parent)
        self.body = nn.Sequential(layer, *([bn] if batch_norm else []), ACTIVATIONS[activation]())

    def forward(self, x):
        return self.body(x)


def tiny_models() -> dict[str, tuple]:
    """name -> (constructor, input shape)."""
    models = {}
    for parent in PARENTS:
        for batch_norm in (False, True):
            for activation in ACTIVATIONS:
                name = f"{parent}{'_bn' if batch_norm else ''}_{activation}"
                shape = _parent(parent)[2]
                models[name] = (
                    (lambda p=parent, b=batch_norm, a=activation: TinyBlock(p, b, a)),
                    shape,
                )
    return models
