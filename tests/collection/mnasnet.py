"""MNASNet 0.5.

Architecture follows torchvision's mnasnet.py (BSD-3-Clause), written out because torchvision does
not import here. The head averages with x.mean([2, 3]) as there.
"""

from __future__ import annotations

from torch import nn

from toolkit.models.zoo import seeded_model

_BN_MOMENTUM = 1 - 0.9997


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, kernel, stride, expansion):
        super().__init__()
        mid = cin * expansion
        self.apply_residual = cin == cout and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False),
            nn.BatchNorm2d(mid, momentum=_BN_MOMENTUM),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, kernel, padding=kernel // 2, stride=stride, groups=mid, bias=False),
            nn.BatchNorm2d(mid, momentum=_BN_MOMENTUM),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False),
            nn.BatchNorm2d(cout, momentum=_BN_MOMENTUM),
        )

    def forward(self, x):
        return self.layers(x) + x if self.apply_residual else self.layers(x)


def _stack(cin, cout, kernel, stride, expansion, repeats):
    blocks = [InvertedResidual(cin, cout, kernel, stride, expansion)]
    blocks += [InvertedResidual(cout, cout, kernel, 1, expansion) for _ in range(1, repeats)]
    return nn.Sequential(*blocks)


def _round_to_multiple_of(val, divisor, round_up_bias=0.9):
    new_val = max(divisor, int(val + divisor / 2) // divisor * divisor)
    return new_val if new_val >= round_up_bias * val else new_val + divisor


class MNASNet(nn.Module):
    def __init__(self, alpha: float = 0.5, num_classes: int = 10):
        super().__init__()
        d = [
            _round_to_multiple_of(depth * alpha, 8) for depth in (32, 16, 24, 40, 80, 96, 192, 320)
        ]

        def bn(c):
            return nn.BatchNorm2d(c, momentum=_BN_MOMENTUM)

        self.layers = nn.Sequential(
            nn.Conv2d(3, d[0], 3, padding=1, stride=2, bias=False),
            bn(d[0]),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[0], 3, padding=1, groups=d[0], bias=False),
            bn(d[0]),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[1], 1, bias=False),
            bn(d[1]),
            _stack(d[1], d[2], 3, 2, 3, 3),
            _stack(d[2], d[3], 5, 2, 3, 3),
            _stack(d[3], d[4], 5, 2, 6, 3),
            _stack(d[4], d[5], 3, 1, 6, 2),
            _stack(d[5], d[6], 5, 2, 6, 4),
            _stack(d[6], d[7], 3, 1, 6, 1),
            nn.Conv2d(d[7], 1280, 1, bias=False),
            bn(1280),
            nn.ReLU(inplace=True),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.2, inplace=True), nn.Linear(1280, num_classes)
        )

    def forward(self, x):
        return self.classifier(self.layers(x).mean([2, 3]))


def mnasnet0_5():
    return seeded_model(MNASNet, (1, 3, 64, 64))[0]
