"""timm's LCNet-050 and tf_mobilenetv3_small_minimal_100.

Architectures follow timm's mobilenetv3.py, _efficientnet_blocks.py and layers/padding.py
(Apache-2.0), written out because timm imports torchvision, which does not import here:

- lcnet_050: depthwise-separable blocks with hard-swish after both convs ('dsa'), a
  squeeze-excite (ReLU, hard-sigmoid gate) in the last stage, and MobileNetV3's efficient head
  (global pool -> 1x1 conv with bias -> hard-swish -> linear).
- tf_mobilenetv3_small_minimal_100: ReLU, no squeeze-excite, batch-norm eps 1e-3, and TF "same"
  padding: a convolution with stride > 1 is timm's Conv2dSame (F.pad by the TF rule, then a conv
  with padding 0); stride-1 odd kernels get static padding k // 2.
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import nn

from toolkit.models.zoo import seeded_model


def round_channels(channels: float, multiplier: float = 1.0, divisor: int = 8) -> int:
    scaled = channels * multiplier
    new_v = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * scaled else new_v


class Conv2dSame(nn.Conv2d):
    """TF "same" padding computed from the input size, as timm's Conv2dSame."""

    def forward(self, x):
        pads = []
        for size, k, s, d in zip(x.shape[-2:], self.kernel_size, self.stride, self.dilation):
            pads.append(max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0))
        pad_h, pad_w = pads
        x = F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2))
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


def create_conv2d(cin, cout, kernel, stride=1, groups=1, bias=False, same=False):
    if same and stride > 1:
        return Conv2dSame(cin, cout, kernel, stride, 0, groups=groups, bias=bias)
    return nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=bias)


class BatchNormAct(nn.Sequential):
    def __init__(self, channels, act, eps):
        super().__init__(nn.BatchNorm2d(channels, eps=eps), *([act()] if act else []))


class SqueezeExcite(nn.Module):
    def __init__(self, channels, rd_ratio=0.25):
        super().__init__()
        reduced = round(channels * rd_ratio)
        self.conv_reduce = nn.Conv2d(channels, reduced, 1, bias=True)
        self.act1 = nn.ReLU(inplace=True)
        self.conv_expand = nn.Conv2d(reduced, channels, 1, bias=True)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        x_se = self.conv_expand(self.act1(self.conv_reduce(x.mean((2, 3), keepdim=True))))
        return x * self.gate(x_se)


class DepthwiseSeparable(nn.Module):
    def __init__(self, cin, cout, kernel, stride, act, eps, pw_act, se=False, same=False):
        super().__init__()
        self.has_skip = stride == 1 and cin == cout and not pw_act  # 'dsa' blocks: noskip
        self.conv_dw = create_conv2d(cin, cin, kernel, stride, groups=cin, same=same)
        self.bn1 = BatchNormAct(cin, act, eps)
        self.se = SqueezeExcite(cin) if se else nn.Identity()
        self.conv_pw = create_conv2d(cin, cout, 1, same=same)
        self.bn2 = BatchNormAct(cout, act if pw_act else None, eps)

    def forward(self, x):
        y = self.bn2(self.conv_pw(self.se(self.bn1(self.conv_dw(x)))))
        return x + y if self.has_skip else y


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, kernel, stride, exp_ratio, act, eps, same):
        super().__init__()
        mid = round_channels(cin * exp_ratio)
        self.has_skip = stride == 1 and cin == cout
        self.conv_pw = create_conv2d(cin, mid, 1, same=same)
        self.bn1 = BatchNormAct(mid, act, eps)
        self.conv_dw = create_conv2d(mid, mid, kernel, stride, groups=mid, same=same)
        self.bn2 = BatchNormAct(mid, act, eps)
        self.conv_pwl = create_conv2d(mid, cout, 1, same=same)
        self.bn3 = BatchNormAct(cout, None, eps)

    def forward(self, x):
        y = self.bn3(self.conv_pwl(self.bn2(self.conv_dw(self.bn1(self.conv_pw(x))))))
        return x + y if self.has_skip else y


class MobileNetV3(nn.Module):
    """timm's MobileNetV3 class: stem, blocks, efficient head."""

    def __init__(self, stem, blocks, head_in, num_features, act, eps, same, num_classes):
        super().__init__()
        self.conv_stem = create_conv2d(3, stem, 3, 2, same=same)
        self.bn1 = BatchNormAct(stem, act, eps)
        self.blocks = nn.Sequential(*blocks)
        self.conv_head = create_conv2d(head_in, num_features, 1, bias=True, same=same)
        self.act2 = act()
        self.classifier = nn.Linear(num_features, num_classes)

    def forward(self, x):
        x = self.blocks(self.bn1(self.conv_stem(x)))
        x = self.act2(self.conv_head(x.mean((2, 3), keepdim=True)))  # SelectAdaptivePool2d('avg')
        return self.classifier(x.flatten(1))


def _lcnet(multiplier: float = 0.5, num_classes: int = 10) -> MobileNetV3:
    # (kernel, stride, output channels at 1.0, squeeze-excite), one row per block
    rows = (
        [(3, 1, 32, False)]
        + [(3, 2, 64, False), (3, 1, 64, False)]
        + [(3, 2, 128, False), (3, 1, 128, False)]
        + [(3, 2, 256, False), (5, 1, 256, False)]
        + [(5, 1, 256, False)] * 4
        + [(5, 2, 512, True), (5, 1, 512, True)]
    )
    act, eps = nn.Hardswish, 1e-5
    cin = stem = round_channels(16, multiplier)
    blocks = []
    for kernel, stride, channels, se in rows:
        cout = round_channels(channels, multiplier)
        blocks.append(DepthwiseSeparable(cin, cout, kernel, stride, act, eps, pw_act=True, se=se))
        cin = cout
    return MobileNetV3(stem, blocks, cin, 1280, act, eps, False, num_classes)


def _tf_mobilenetv3_small_minimal(num_classes: int = 10) -> MobileNetV3:
    act, eps, same = nn.ReLU, 1e-3, True
    blocks = [DepthwiseSeparable(16, 16, 3, 2, act, eps, pw_act=False, same=same)]
    # (kernel, stride, expansion, output channels)
    rows = [
        (3, 2, 4.5, 24),
        (3, 1, 3.67, 24),
        (3, 2, 4, 40),
        (3, 1, 6, 40),
        (3, 1, 6, 40),
        (3, 1, 3, 48),
        (3, 1, 3, 48),
        (3, 2, 6, 96),
        (3, 1, 6, 96),
        (3, 1, 6, 96),
    ]
    cin = 16
    for kernel, stride, exp, cout in rows:
        blocks.append(InvertedResidual(cin, cout, kernel, stride, exp, act, eps, same))
        cin = cout
    blocks.append(
        nn.Sequential(create_conv2d(96, 576, 1, same=same), BatchNormAct(576, act, eps))
    )  # 'cn_r1_k1_s1_c576'
    return MobileNetV3(16, blocks, 576, 1024, act, eps, same, num_classes)


def lcnet_050():
    return seeded_model(_lcnet, (1, 3, 64, 64))[0]


def tf_mobilenetv3_small_minimal_100():
    return seeded_model(_tf_mobilenetv3_small_minimal, (1, 3, 64, 64))[0]
