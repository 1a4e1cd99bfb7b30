"""Built-in networks, addressed as zoo:NAME."""

from __future__ import annotations

import torch
from torch import nn

from ...errors import UserError
from .mlperf_tiny import DSCNN, FCAutoencoder, MobileNetV1, ResNet8
from .tiny import tiny_models
from .trained import TRAINED_FILES, trained_model

ZOO_SEED = 20241

_MLPERF = {
    "ds_cnn": (DSCNN, DSCNN.input_shape),
    "mobilenet_v1_025": (MobileNetV1, MobileNetV1.input_shape),
    "resnet8": (ResNet8, ResNet8.input_shape),
    "fc_autoencoder": (FCAutoencoder, FCAutoencoder.input_shape),
}


def _catalogue() -> dict[str, tuple]:
    return {**tiny_models(), **_MLPERF}


def zoo_names() -> list[str]:
    return sorted(_catalogue())


def _realistic_batch_norm(model: nn.Module, input_shape: tuple, generator: torch.Generator):
    """Give batch norms random affine parameters and running statistics of real activations.

    Freshly initialised batch norms (mean 0, var 1, identity affine) leave activations that are
    not representative; a few forward passes in training mode on random inputs set the running
    statistics to what the layers actually produce.

    The gains are small (0.1 to 0.4) and the shifts positive: a random ReLU network with unit
    gains is chaotic, a perturbation grows by ~1.3 dB per layer, so int8 rounding alone took
    MobileNetV1's SQNR to 3 dB and the accuracy columns meant nothing. Trained networks are
    stable; these gains put the random ones in that regime too (MobileNetV1: 17 dB).
    """
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for norm in norms:
        norm.weight.data = 0.1 + 0.3 * torch.rand(norm.weight.shape, generator=generator)
        norm.bias.data = 0.2 + 0.1 * torch.randn(norm.bias.shape, generator=generator)
        norm.momentum = None  # cumulative average over the passes below
        norm.reset_running_stats()
    model.train()
    batch = (16,) + tuple(input_shape[1:])
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(batch, generator=generator))
    model.eval()


def seeded_model(constructor, shape: tuple, seed: int = ZOO_SEED) -> tuple[nn.Module, tuple]:
    """constructor() with seeded weights and realistic batch-norm statistics, in eval mode, and
    one seeded example input of `shape`."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():  # parameter initialisation uses the global generator
        torch.manual_seed(seed)
        model = constructor()
    _realistic_batch_norm(model, shape, generator)
    model.eval()
    return model, (torch.randn(shape, generator=generator),)


def build_zoo_model(name: str) -> tuple[nn.Module, tuple]:
    """The seeded model and its example inputs; NAME@mlperf: the trained MLPerf Tiny port."""
    catalogue = _catalogue()
    base, _, weights = name.partition("@")
    if base not in catalogue or (weights and (weights != "mlperf" or base not in TRAINED_FILES)):
        raise UserError(
            f"unknown zoo model '{name}': use one of {', '.join(zoo_names())}, or "
            f"{', '.join(f'{n}@mlperf' for n in TRAINED_FILES)} (trained weights)"
        )
    constructor, shape = catalogue[base]
    if weights:
        generator = torch.Generator().manual_seed(ZOO_SEED)
        inputs = (torch.randn(shape, generator=generator),)
        return trained_model(base, inputs), inputs
    return seeded_model(constructor, shape)
