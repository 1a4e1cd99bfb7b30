"""SqueezeNet 1.1.

Architecture follows torchvision's squeezenet.py (BSD-3-Clause), written out because torchvision
does not import here; ceil-mode max pools and the conv -> ReLU -> AdaptiveAvgPool2d head as there.
"""

from __future__ import annotations

import torch
from torch import nn

from toolkit.models.zoo import seeded_model


class Fire(nn.Module):
    def __init__(self, cin, squeeze, expand1x1, expand3x3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [
                self.expand1x1_activation(self.expand1x1(x)),
                self.expand3x3_activation(self.expand3x3(x)),
            ],
            1,
        )


class SqueezeNet11(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()

        def pool():
            return nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)

        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=3, stride=2),
            nn.ReLU(inplace=True),
            pool(),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            pool(),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            pool(),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5),
            nn.Conv2d(512, num_classes, 1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


def squeezenet1_1():
    return seeded_model(SqueezeNet11, (1, 3, 64, 64))[0]
