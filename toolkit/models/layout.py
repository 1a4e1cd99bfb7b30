"""Channels-last (NHWC) model interface, so no transposes are needed at the NPU's edges.

Ethos-U works in NHWC. A PyTorch model takes NCHW, so ExecuTorch puts a TRANSPOSE at each 4-D
delegate input and output, and Vela lowers each into a chain of 1x1 pools (dozens of NPU
operations). With --io-layout nhwc the model is wrapped to take (and give back) NHWC tensors: its
permutes cancel against those transposes and the NPU starts on its first real layer.
"""

from __future__ import annotations

from dataclasses import replace

from torch import nn

from ..artifacts import LoadedModel


class ChannelsLastInterface(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        outputs = self.model(*(x.permute(0, 3, 1, 2) if x.dim() == 4 else x for x in inputs))
        if isinstance(outputs, (tuple, list)):
            return type(outputs)(o.permute(0, 2, 3, 1) if o.dim() == 4 else o for o in outputs)
        return outputs.permute(0, 2, 3, 1) if outputs.dim() == 4 else outputs


def channels_last_io(model: LoadedModel) -> LoadedModel:
    inputs = tuple(
        x.permute(0, 2, 3, 1).contiguous() if x.dim() == 4 else x for x in model.example_inputs
    )
    return replace(
        model,
        module=ChannelsLastInterface(model.module).eval(),
        example_inputs=inputs,
        name=f"{model.name} (NHWC io)",
        content_hash=f"{model.content_hash}-nhwc",
    )
