"""Small nets as users write them by hand (no upstream architecture).

LeakyReLU after convs, a conv -> relu -> mean((2, 3)) head, a Conv1d keyword-spotting net ending in
AdaptiveAvgPool1d(1), a ConvTranspose2d decoder, and a nearest + bilinear upsampling net.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from toolkit.models.zoo import seeded_model


class LeakyConvNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.act1 = nn.LeakyReLU(0.1)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.conv3 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = F.leaky_relu(self.bn2(self.conv2(self.act1(self.conv1(x)))), 0.01)
        x = F.leaky_relu(self.conv3(x), 0.2)
        return self.fc(self.pool(x).flatten(1))


class MeanHeadNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
        )
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).mean(dim=(2, 3)))


class KeywordSpotting1d(nn.Module):
    """40 MFCC features x 49 frames, three Conv1d blocks, a global average pool, 12 keywords."""

    def __init__(self, features: int = 40, channels: int = 64, num_classes: int = 12):
        super().__init__()
        layers, cin = [], features
        for stride in (1, 2, 2):
            layers += [
                nn.Conv1d(cin, channels, 3, stride=stride, padding=1, bias=False),
                nn.BatchNorm1d(channels),
                nn.ReLU(),
            ]
            cin = channels
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        return self.fc(self.pool(self.features(x)).flatten(1))


class ConvTransposeDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.ConvTranspose2d(16, 3, 4, stride=2, padding=1),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x))


class UpsampleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.out = nn.Conv2d(16, 3, 3, padding=1)

    def forward(self, x):
        x = F.interpolate(self.down(x), scale_factor=2, mode="nearest")
        return self.out(self.up(self.mid(x)))


def leaky_conv_net():
    return seeded_model(LeakyConvNet, (1, 3, 32, 32))[0]


def mean_head_net():
    return seeded_model(MeanHeadNet, (1, 3, 32, 32))[0]


def kws_conv1d():
    return seeded_model(KeywordSpotting1d, (1, 40, 49))[0]


def conv_transpose_decoder():
    return seeded_model(ConvTransposeDecoder, (1, 3, 32, 32))[0]


def upsample_net():
    return seeded_model(UpsampleNet, (1, 3, 32, 32))[0]
