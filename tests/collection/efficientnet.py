"""EfficientNet-B0.

Architecture follows torchvision's efficientnet.py (BSD-3-Clause), written out because torchvision
does not import here: MBConv blocks with SiLU, squeeze-excite with SiLU and a sigmoid gate,
stochastic depth (identity in eval mode) left out.
"""

from __future__ import annotations

from torch import nn

from toolkit.models.zoo import seeded_model


def make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def conv_norm_act(cin, cout, kernel=3, stride=1, groups=1, act=True):
    layers = [
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    return nn.Sequential(*layers, nn.SiLU(inplace=True)) if act else nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.SiLU()
        self.scale_activation = nn.Sigmoid()

    def forward(self, x):
        return self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x))))) * x


class MBConv(nn.Module):
    def __init__(self, expand_ratio, kernel, stride, cin, cout):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        expanded = make_divisible(cin * expand_ratio)
        layers = [conv_norm_act(cin, expanded, 1)] if expanded != cin else []
        layers += [
            conv_norm_act(expanded, expanded, kernel, stride, groups=expanded),
            SqueezeExcitation(expanded, max(1, cin // 4)),
            conv_norm_act(expanded, cout, 1, act=False),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return self.block(x) + x if self.use_res_connect else self.block(x)


class EfficientNetB0(nn.Module):
    # expand ratio, kernel, stride, input channels, output channels, layers
    SETTING = (
        (1, 3, 1, 32, 16, 1),
        (6, 3, 2, 16, 24, 2),
        (6, 5, 2, 24, 40, 2),
        (6, 3, 2, 40, 80, 3),
        (6, 5, 1, 80, 112, 3),
        (6, 5, 2, 112, 192, 4),
        (6, 3, 1, 192, 320, 1),
    )

    def __init__(self, num_classes: int = 10):
        super().__init__()
        layers = [conv_norm_act(3, 32, 3, 2)]
        for expand, kernel, stride, cin, cout, n in self.SETTING:
            layers.append(
                nn.Sequential(
                    *(
                        MBConv(
                            expand, kernel, stride if i == 0 else 1, cin if i == 0 else cout, cout
                        )
                        for i in range(n)
                    )
                )
            )
        layers.append(conv_norm_act(320, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.2, inplace=True), nn.Linear(1280, num_classes)
        )

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


def efficientnet_b0():
    return seeded_model(EfficientNetB0, (1, 3, 64, 64))[0]
