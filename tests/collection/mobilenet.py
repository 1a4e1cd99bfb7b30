"""MobileNetV2 and MobileNetV3-Small.

Architecture follows torchvision's mobilenetv2.py and mobilenetv3.py (BSD-3-Clause), written out
because torchvision does not import here; layer structure, activations and channel rounding as
there. Factories return seeded models in eval mode (toolkit.models.zoo.seeded_model).
"""

from __future__ import annotations

from torch import nn

from toolkit.models.zoo import seeded_model


def make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def conv_norm_act(cin, cout, kernel=3, stride=1, groups=1, act=nn.ReLU6, eps=1e-5):
    layers = [
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=eps),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class InvertedResidualV2(nn.Module):
    def __init__(self, cin, cout, stride, expand_ratio):
        super().__init__()
        hidden = round(cin * expand_ratio)
        self.use_res_connect = stride == 1 and cin == cout
        layers = [conv_norm_act(cin, hidden, 1)] if expand_ratio != 1 else []
        layers += [
            conv_norm_act(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    SETTING = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, width_mult: float = 1.0, num_classes: int = 10):
        super().__init__()
        channels = make_divisible(32 * width_mult)
        last = make_divisible(1280 * max(1.0, width_mult))
        features = [conv_norm_act(3, channels, stride=2)]
        for t, c, n, s in self.SETTING:
            out = make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidualV2(channels, out, s if i == 0 else 1, t))
                channels = out
        features.append(conv_norm_act(channels, last, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(x.flatten(1))


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze, activation=nn.ReLU, scale_activation=nn.Hardsigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, x):
        scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return self.scale_activation(scale) * x


class InvertedResidualV3(nn.Module):
    def __init__(self, cin, kernel, expanded, cout, use_se, hard_swish, stride):
        super().__init__()
        act = nn.Hardswish if hard_swish else nn.ReLU
        self.use_res_connect = stride == 1 and cin == cout
        layers = []
        if expanded != cin:
            layers.append(conv_norm_act(cin, expanded, 1, act=act, eps=0.001))
        layers.append(
            conv_norm_act(expanded, expanded, kernel, stride, groups=expanded, act=act, eps=0.001)
        )
        if use_se:
            layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4)))
        layers.append(conv_norm_act(expanded, cout, 1, act=None, eps=0.001))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res_connect else self.block(x)


class MobileNetV3Small(nn.Module):
    # input channels, kernel, expanded, output channels, squeeze-excite, hard-swish, stride
    SETTING = (
        (16, 3, 16, 16, True, False, 2),
        (16, 3, 72, 24, False, False, 2),
        (24, 3, 88, 24, False, False, 1),
        (24, 5, 96, 40, True, True, 2),
        (40, 5, 240, 40, True, True, 1),
        (40, 5, 240, 40, True, True, 1),
        (40, 5, 120, 48, True, True, 1),
        (48, 5, 144, 48, True, True, 1),
        (48, 5, 288, 96, True, True, 2),
        (96, 5, 576, 96, True, True, 1),
        (96, 5, 576, 96, True, True, 1),
    )

    def __init__(self, num_classes: int = 10):
        super().__init__()
        layers = [conv_norm_act(3, 16, 3, 2, act=nn.Hardswish, eps=0.001)]
        layers += [InvertedResidualV3(*row) for row in self.SETTING]
        layers.append(conv_norm_act(96, 576, 1, act=nn.Hardswish, eps=0.001))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1024, num_classes)
        )

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


def mobilenet_v2_035():
    return seeded_model(lambda: MobileNetV2(0.35), (1, 3, 96, 96))[0]


def mobilenet_v3_small():
    return seeded_model(MobileNetV3Small, (1, 3, 64, 64))[0]
