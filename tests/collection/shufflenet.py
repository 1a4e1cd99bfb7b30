"""ShuffleNetV2 x0.5.

Architecture follows torchvision's shufflenetv2.py (BSD-3-Clause), written out because torchvision
does not import here; channel_shuffle is the view -> transpose -> view of the original.
"""

from __future__ import annotations

import torch
from torch import nn

from toolkit.models.zoo import seeded_model


def channel_shuffle(x, groups: int):
    batch, channels, height, width = x.size()
    x = x.view(batch, groups, channels // groups, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batch, channels, height, width)


def _depthwise(channels, stride):
    return nn.Conv2d(channels, channels, 3, stride, 1, bias=False, groups=channels)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        branch = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                _depthwise(cin, stride),
                nn.BatchNorm2d(cin),
                nn.Conv2d(cin, branch, 1, bias=False),
                nn.BatchNorm2d(branch),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin if stride > 1 else branch, branch, 1, bias=False),
            nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True),
            _depthwise(branch, stride),
            nn.BatchNorm2d(branch),
            nn.Conv2d(branch, branch, 1, bias=False),
            nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats=(4, 8, 4), channels=(24, 48, 96, 192, 1024), num_classes=10):
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, channels[0], 3, 2, 1, bias=False),
            nn.BatchNorm2d(channels[0]),
            nn.ReLU(inplace=True),
        )
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        cin = channels[0]
        stages = []
        for n, cout in zip(repeats, channels[1:]):
            stages.append(
                nn.Sequential(
                    InvertedResidual(cin, cout, 2),
                    *(InvertedResidual(cout, cout, 1) for _ in range(n - 1)),
                )
            )
            cin = cout
        self.stage2, self.stage3, self.stage4 = stages
        self.conv5 = nn.Sequential(
            nn.Conv2d(cin, channels[-1], 1, 1, 0, bias=False),
            nn.BatchNorm2d(channels[-1]),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


def shufflenet_v2_x0_5():
    return seeded_model(ShuffleNetV2, (1, 3, 64, 64))[0]
