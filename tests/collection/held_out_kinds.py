"""The kinds of net a held-out round of users brought (issue 33), written here from their
descriptions: squeeze-and-excitation, a UNet with a skip concat, PixelShuffle, a keyword
transformer block (attention over 16 tokens), a token MLP, a GRU keyword net, and a net with two
inputs and two outputs. nets.toml runs some of them, and zoo-kind nets, at batch size 2 too."""

from __future__ import annotations

import torch
from torch import nn

from toolkit.models.zoo import seeded_model


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int = 16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU())
        self.squeeze = nn.AdaptiveAvgPool2d(1)
        self.excite = nn.Sequential(
            nn.Conv2d(channels, channels // 4, 1),
            nn.ReLU(),
            nn.Conv2d(channels // 4, channels, 1),
            nn.Sigmoid(),
        )
        self.head = nn.Conv2d(channels, 8, 3, stride=2, padding=1)

    def forward(self, x):
        x = self.stem(x)
        return self.head(x * self.excite(self.squeeze(x)))


class TinyUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.bottom = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU6())
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.out = nn.Conv2d(16 + 8, 2, 3, padding=1)

    def forward(self, x):
        skip = self.down(x)
        return self.out(torch.cat((self.up(self.bottom(skip)), skip), dim=1))


class PixelShuffleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
        self.expand = nn.Conv2d(16, 3 * 4, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x):
        return self.shuffle(self.expand(self.body(x)))


class KeywordTransformerBlock(nn.Module):
    """One pre-norm-free encoder block over 16 tokens of 32 features, mean-pooled to logits."""

    def __init__(self, dim: int = 32, heads: int = 2, classes: int = 12):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.classify = nn.Linear(dim, classes)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        attention = torch.softmax(q @ k.transpose(-2, -1) * self.head_dim**-0.5, dim=-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(x)
        return self.classify(x.mean(dim=1))


class MhaKeyword(nn.Module):
    """torch's own nn.MultiheadAttention (in-projection, _safe_softmax, out-projection) with a
    residual ReLU, mean-pooled to logits. At a16w8 its two bmm stay on the CPU (int16 inputs), so
    it lowers to three delegates."""

    def __init__(self, dim: int = 32, heads: int = 2, classes: int = 12):
        super().__init__()
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.classify = nn.Linear(dim, classes)

    def forward(self, x):
        attended, _ = self.attention(x, x, x, need_weights=False)
        return self.classify(torch.relu(attended + x).mean(dim=1))


class TokenMlp(nn.Module):
    """A transformer's per-token MLP without the attention: Linear + ReLU + Linear over 16 tokens
    (Vela 5.1.0 miscompiles its batched 1x1 convolution unless etk rewrites it)."""

    def __init__(self, dim: int = 32, classes: int = 12):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.classify = nn.Linear(dim, classes)

    def forward(self, x):
        return self.classify(self.mlp(x).mean(dim=1))


class GruKeyword(nn.Module):
    def __init__(self, features: int = 10, hidden: int = 16, classes: int = 12):
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.classify = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.classify(torch.relu(out[:, -1]))


class TwoInTwoOut(nn.Module):
    """An image and a feature vector in; class logits and a regression map out."""

    def __init__(self):
        super().__init__()
        self.image = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        self.vector = nn.Sequential(nn.Linear(8, 8 * 8 * 8), nn.ReLU())
        self.classify = nn.Linear(2 * 8 * 8 * 8, 4)
        self.regress = nn.Conv2d(16, 1, 1)

    def forward(self, image, vector):
        a = self.image(image)
        b = self.vector(vector).reshape(a.shape)
        both = torch.cat((a, b), dim=1)
        return self.classify(both.flatten(1)), self.regress(both)


def squeeze_excite():
    return seeded_model(SqueezeExcite, (1, 3, 16, 16))[0]


def tiny_unet():
    return seeded_model(TinyUNet, (1, 3, 16, 16))[0]


def pixel_shuffle_net():
    return seeded_model(PixelShuffleNet, (1, 3, 16, 16))[0]


def keyword_transformer_block():
    return seeded_model(KeywordTransformerBlock, (1, 16, 32))[0]


def mha_keyword():
    return seeded_model(MhaKeyword, (1, 16, 32))[0]


def token_mlp_kws():
    return seeded_model(TokenMlp, (1, 16, 32))[0]


def gru_keyword():
    return seeded_model(GruKeyword, (1, 8, 10))[0]


def gru_keyword_49():
    """The GRU keyword net at its real size: 49 time steps of 10 features, hidden 32 (the
    recurrent net whose compile time issue 33 measures: scripts/bench_compile.py --ratio)."""
    return seeded_model(lambda: GruKeyword(hidden=32), (1, 49, 10))[0]


def two_in_two_out():
    torch.manual_seed(0)
    return TwoInTwoOut().eval()
