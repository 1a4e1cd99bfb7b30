"""The four MLPerf Tiny reference architectures, from their published layer lists.

Random weights (seeded by the zoo); classifier heads return logits (the reference TFLite files end
in a softmax, which these leave out).
"""

from __future__ import annotations

from torch import nn


def _conv_bn_relu(cin, cout, kernel, stride=1, groups=1, padding=None):
    padding = tuple(k // 2 for k in kernel) if padding is None and isinstance(kernel, tuple) \
        else (kernel // 2 if padding is None else padding)
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


class DSCNN(nn.Module):
    """Keyword spotting DS-CNN (small): 1x1x49x10 MFCC input, 12 classes."""

    input_shape = (1, 1, 49, 10)

    def __init__(self, filters: int = 64, classes: int = 12):
        super().__init__()
        # 10x4 stride-2 "same" conv: 49x10 -> 25x5 (TF pads 4 + 5 rows; symmetric 5 gives 25 too).
        layers = [_conv_bn_relu(1, filters, (10, 4), stride=2, padding=(5, 1))]
        for _ in range(4):
            layers += [_conv_bn_relu(filters, filters, (3, 3), groups=filters),
                       _conv_bn_relu(filters, filters, (1, 1))]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d((25, 5))
        self.classifier = nn.Linear(filters, classes)

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


class MobileNetV1(nn.Module):
    """Visual wake words MobileNetV1, width 0.25, 1x3x96x96 input, 2 classes."""

    input_shape = (1, 3, 96, 96)
    # (output channels at width 1.0, stride) of the 13 depthwise-separable blocks
    BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
              (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))

    def __init__(self, alpha: float = 0.25, classes: int = 2):
        super().__init__()
        channels = int(32 * alpha)
        layers = [_conv_bn_relu(3, channels, 3, stride=2)]
        for width, stride in self.BLOCKS:
            out = int(width * alpha)
            layers += [_conv_bn_relu(channels, channels, 3, stride=stride, groups=channels),
                       _conv_bn_relu(channels, out, 1)]
            channels = out
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(3)
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


class ResidualBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = _conv_bn_relu(cin, cout, 3, stride=stride)
        self.conv2 = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.shortcut = (nn.Identity() if stride == 1 and cin == cout else
                         nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False)))
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class ResNet8(nn.Module):
    """CIFAR-10 image classification ResNet-8: 1x3x32x32 input, 10 classes."""

    input_shape = (1, 3, 32, 32)

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = _conv_bn_relu(3, 16, 3)
        self.stages = nn.Sequential(ResidualBlock(16, 16, 1), ResidualBlock(16, 32, 2),
                                    ResidualBlock(32, 64, 2))
        self.pool = nn.AvgPool2d(8)
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        return self.classifier(self.pool(self.stages(self.stem(x))).flatten(1))


class FCAutoencoder(nn.Module):
    """Anomaly detection (ToyADMOS) fully connected autoencoder: 1x640 input and output."""

    input_shape = (1, 640)

    def __init__(self, features: int = 640, hidden: int = 128, bottleneck: int = 8):
        super().__init__()
        sizes = [features] + [hidden] * 4 + [bottleneck] + [hidden] * 4
        layers = []
        for cin, cout in zip(sizes, sizes[1:]):
            layers += [nn.Linear(cin, cout), nn.BatchNorm1d(cout), nn.ReLU()]
        self.body = nn.Sequential(*layers, nn.Linear(hidden, features))

    def forward(self, x):
        return self.body(x)
