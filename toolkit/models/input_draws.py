"""Random inputs like the model's example inputs: their shapes, and their range where they say one.

Random calibration and evaluation inputs follow each example input tensor:
- values of one sign with a spread (an image in [0, 1], `torch.rand(...) + 0.001` for a
  logarithm, a positive ramp): uniform over the example's [min, max], so a model whose domain
  is positive (log, rsqrt, sqrt, a division) gets inputs in it;
- values of both signs, or a constant tensor (which gives a shape and nothing more, as
  `torch.zeros(1, 3, 32, 32)` placeholders do): standard normal, as before.
Integer inputs keep their example's dtype and are drawn standard normal like the others (the
loader refuses integer inputs it cannot quantize before anything is drawn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass(frozen=True)
class InputDraw:
    """How one input is drawn."""

    kind: Literal["normal", "uniform"]
    low: float = 0.0  # uniform only: the example's range
    high: float = 0.0
    why: str = ""  # normal: why the example gives no range

    def describe(self) -> str:
        if self.kind == "uniform":
            return f"uniform in [{self.low:.4g}, {self.high:.4g}] (the range of example_inputs())"
        return f"standard normal ({self.why})"

    def sample(self, like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.kind == "normal":
            return torch.randn(like.shape, generator=generator, dtype=like.dtype)
        unit = torch.rand(like.shape, generator=generator, dtype=like.dtype)
        return self.low + (self.high - self.low) * unit


def input_draw(example: torch.Tensor) -> InputDraw:
    if not example.dtype.is_floating_point or example.numel() == 0:
        return InputDraw("normal", why="the example gives a shape only")
    values = example.detach().to(torch.float64)
    if not bool(torch.isfinite(values).all()):
        return InputDraw("normal", why="the example holds NaN or infinite values")
    low, high = float(values.min()), float(values.max())
    if low == high:
        return InputDraw("normal", why="the example is constant: a shape only")
    if low < 0.0 < high:
        return InputDraw("normal", why="the example spans both signs")
    return InputDraw("uniform", low, high)


def input_draws(example_inputs: tuple) -> tuple[InputDraw, ...]:
    return tuple(input_draw(x) for x in example_inputs)


def draw_samples(
    example_inputs: tuple, samples: int, generator: torch.Generator
) -> tuple[tuple[torch.Tensor, ...], ...]:
    draws = input_draws(example_inputs)
    return tuple(
        tuple(draw.sample(x, generator) for draw, x in zip(draws, example_inputs))
        for _ in range(samples)
    )


def describe_draws(example_inputs: tuple) -> str:
    """'uniform in [0.001, 1] (the range of example_inputs())', per input when they differ."""
    texts = [d.describe() for d in input_draws(example_inputs)]
    if len(set(texts)) <= 1:
        return texts[0] if texts else "no inputs"
    return "; ".join(f"input {i} {text}" for i, text in enumerate(texts))
