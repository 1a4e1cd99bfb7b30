"""A softmax head on a classifier: our zoo networks end at the logits, the MLPerf Tiny reference
files in a softmax. With the head on, both sides are the same whole network."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from toolkit.artifacts import LoadedModel


class SoftmaxHead(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        return torch.softmax(self.model(*inputs), dim=-1)


def with_softmax(model: LoadedModel) -> LoadedModel:
    return replace(
        model,
        module=SoftmaxHead(model.module).eval(),
        name=f"{model.name} + softmax",
        content_hash=f"{model.content_hash}-softmax",
    )
