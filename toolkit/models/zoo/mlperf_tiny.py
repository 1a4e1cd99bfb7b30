"""The four MLPerf Tiny reference architectures, from their published layer lists.

Classifier heads return logits (the reference TFLite files end in a softmax, which these leave
out). Built with `folded=False` (zoo:NAME): seeded random weights and batch norms. With
`folded=True` (zoo:NAME@mlperf) the layout of the trained reference .tflite files, whose weights
`trained.py` loads: batch norms folded into conv biases, and TensorFlow's "same" padding on
stride-2 layers, which puts the odd extra row/column at the bottom/right (PyTorch's symmetric
padding would shift every window by one).
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import nn


class TfSamePadding(nn.Module):
    """TensorFlow "same" zero padding for a strided kernel: total padding
    max((ceil(n / s) - 1) * s + k - n, 0) per axis, the larger half at the end."""

    def __init__(self, kernel: tuple[int, int], stride: int):
        super().__init__()
        self.kernel, self.stride = kernel, stride

    def forward(self, x):
        pads = []
        for size, k in zip(reversed(x.shape[-2:]), reversed(self.kernel)):  # W, then H
            total = max((math.ceil(size / self.stride) - 1) * self.stride + k - size, 0)
            pads += [total // 2, total - total // 2]
        return F.pad(x, pads)


def _conv(cin, cout, kernel, stride=1, groups=1, padding=None, folded=False):
    """Conv2d (+ batch norm unless folded); "same" padding, TF-style when folded and strided."""
    kernel = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    if folded and stride > 1:
        return [
            TfSamePadding(kernel, stride),
            nn.Conv2d(cin, cout, kernel, stride, 0, groups=groups, bias=True),
        ]
    padding = tuple(k // 2 for k in kernel) if padding is None else padding
    conv = nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=folded)
    return [conv] if folded else [conv, nn.BatchNorm2d(cout)]


def _conv_bn_relu(cin, cout, kernel, stride=1, groups=1, padding=None, folded=False):
    return nn.Sequential(*_conv(cin, cout, kernel, stride, groups, padding, folded), nn.ReLU())


class DSCNN(nn.Module):
    """Keyword spotting DS-CNN (small): 1x1x49x10 MFCC input, 12 classes."""

    input_shape = (1, 1, 49, 10)

    def __init__(self, filters: int = 64, classes: int = 12, folded: bool = False):
        super().__init__()
        # 10x4 stride-2 "same" conv: 49x10 -> 25x5 (TF pads 4 + 5 rows; symmetric 5 gives 25 too).
        layers = [_conv_bn_relu(1, filters, (10, 4), stride=2, padding=(5, 1), folded=folded)]
        for _ in range(4):
            layers += [
                _conv_bn_relu(filters, filters, (3, 3), groups=filters, folded=folded),
                _conv_bn_relu(filters, filters, (1, 1), folded=folded),
            ]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d((25, 5))
        self.classifier = nn.Linear(filters, classes)

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


class MobileNetV1(nn.Module):
    """Visual wake words MobileNetV1, width 0.25, 1x3x96x96 input, 2 classes."""

    input_shape = (1, 3, 96, 96)
    # (output channels at width 1.0, stride) of the 13 depthwise-separable blocks
    BLOCKS = (
        (64, 1),
        (128, 2),
        (128, 1),
        (256, 2),
        (256, 1),
        (512, 2),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (1024, 2),
        (1024, 1),
    )

    def __init__(self, alpha: float = 0.25, classes: int = 2, folded: bool = False):
        super().__init__()
        channels = int(32 * alpha)
        layers = [_conv_bn_relu(3, channels, 3, stride=2, folded=folded)]
        for width, stride in self.BLOCKS:
            out = int(width * alpha)
            layers += [
                _conv_bn_relu(channels, channels, 3, stride=stride, groups=channels, folded=folded),
                _conv_bn_relu(channels, out, 1, folded=folded),
            ]
            channels = out
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(3)
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


class ResidualBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, folded: bool = False):
        super().__init__()
        self.conv1 = _conv_bn_relu(cin, cout, 3, stride=stride, folded=folded)
        self.conv2 = nn.Sequential(*_conv(cout, cout, 3, folded=folded))
        self.shortcut = (
            nn.Identity()
            if stride == 1 and cin == cout
            else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=folded))
        )
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class ResNet8(nn.Module):
    """CIFAR-10 image classification ResNet-8: 1x3x32x32 input, 10 classes."""

    input_shape = (1, 3, 32, 32)

    def __init__(self, classes: int = 10, folded: bool = False):
        super().__init__()
        self.stem = _conv_bn_relu(3, 16, 3, folded=folded)
        self.stages = nn.Sequential(
            ResidualBlock(16, 16, 1, folded),
            ResidualBlock(16, 32, 2, folded),
            ResidualBlock(32, 64, 2, folded),
        )
        self.pool = nn.AvgPool2d(8)
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        return self.classifier(self.pool(self.stages(self.stem(x))).flatten(1))


class FCAutoencoder(nn.Module):
    """Anomaly detection (ToyADMOS) fully connected autoencoder: 1x640 input and output."""

    input_shape = (1, 640)

    def __init__(
        self, features: int = 640, hidden: int = 128, bottleneck: int = 8, folded: bool = False
    ):
        super().__init__()
        sizes = [features] + [hidden] * 4 + [bottleneck] + [hidden] * 4
        layers = []
        for cin, cout in zip(sizes, sizes[1:]):
            layers += (
                [nn.Linear(cin, cout)] + ([] if folded else [nn.BatchNorm1d(cout)]) + [nn.ReLU()]
            )
        self.body = nn.Sequential(*layers, nn.Linear(hidden, features))

    def forward(self, x):
        return self.body(x)
