"""Small nets whose lowering explodes, and the rewrites the per-layer advice proposes for them
(toolkit/evaluation/layer_rewrites.py pins their figures; tests/report/test_layer_advice.py
checks them). Each is a MODEL spec: `etk compare tests/report/advice_nets.py:depthwise_multiplier`.

A 3x3 depthwise convolution with channel multiplier 2 (Conv2d(16, 32, 3, groups=16)), and a head
that averages H and W with x.mean((2, 3)); the same net with the depthwise convolution written
as a multiplier-1 depthwise then a 1x1 convolution, and with nn.AdaptiveAvgPool2d(1) as its head;
and a net with an outlier channel, for the a16w8 advice.
"""

from __future__ import annotations

import torch
from torch import nn

from toolkit.models.zoo import seeded_model

SHAPE = (1, 3, 16, 16)


class DepthwiseMultiplier(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
        self.expand = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, groups=16), nn.ReLU())
        self.project = nn.Sequential(nn.Conv2d(32, 32, 1), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.project(self.expand(self.stem(x)))
        return self.head(x.mean(dim=(2, 3)))


class DepthwiseThenPointwise(DepthwiseMultiplier):
    """The multiplier written as a depthwise convolution and a 1x1 convolution."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Sequential(
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.Conv2d(16, 32, 1), nn.ReLU()
        )


class PoolHead(DepthwiseMultiplier):
    """The mean over H and W written as an adaptive average pool."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        x = self.project(self.expand(self.stem(x)))
        return self.head(self.pool(x).flatten(1))


class ChunkNet(nn.Module):
    """A stem, its channels split in two halves (x.chunk(2, 1)), a 3x3 convolution on each and
    the halves concatenated again (as ShuffleNet and GhostNet units split their channels)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, padding=1), nn.ReLU())
        self.left = nn.Sequential(nn.Conv2d(12, 12, 3, padding=1), nn.ReLU())
        self.right = nn.Sequential(nn.Conv2d(12, 12, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        a, b = self.stem(x).chunk(2, 1)
        x = torch.cat((self.left(a), self.right(b)), 1)
        return self.head(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class GroupedConv(nn.Module):
    """A 3x3 convolution in 4 groups (Conv2d(32, 32, 3, groups=4), as ResNeXt and RegNet blocks)
    between 1x1 convolutions."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 1), nn.ReLU())
        self.grouped = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, groups=4), nn.ReLU())
        self.project = nn.Sequential(nn.Conv2d(32, 32, 1), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.project(self.grouped(self.stem(x)))
        return self.head(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class OutlierChannel(nn.Module):
    """A convolution one of whose 16 output channels is 100 times larger than the others (as an
    outlier channel in a trained net): its per-tensor int8 range leaves the others few steps."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Sequential(nn.Conv2d(16, 16, 1), nn.ReLU())
        self.head = nn.Linear(16 * 16 * 16, 10)

    def forward(self, x):
        return self.head(self.conv2(self.conv1(x)).flatten(1))


def example_inputs():
    return (torch.randn(SHAPE, generator=torch.Generator().manual_seed(0)),)


def depthwise_multiplier():
    return seeded_model(DepthwiseMultiplier, SHAPE)[0]


def depthwise_then_pointwise():
    return seeded_model(DepthwiseThenPointwise, SHAPE)[0]


def pool_head():
    return seeded_model(PoolHead, SHAPE)[0]


def chunk_net():
    return seeded_model(ChunkNet, SHAPE)[0]


def grouped_conv():
    return seeded_model(GroupedConv, SHAPE)[0]


def outlier_channel():
    model = seeded_model(OutlierChannel, SHAPE)[0]
    with torch.no_grad():
        model.conv1.weight[0] *= 100
        model.conv1.bias[0] *= 100
    return model
