"""The user's strings as typed values, one rule each, for the CLI verbs, bench runs and the pytest
plugin alike: fusion on/off, runner names, target + NPU, and what a model spec names.

(Accelerator names are parsed in npu.py: `accelerator_family`, `accelerator_macs`.)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UserError
from .npu import NpuConfig
from .targets import Target, load_target

if TYPE_CHECKING:
    from .artifacts import Variant
    from .runners.base import Runner

FUSION_CHOICES = ("on", "off")
FUSION_VARIANT: dict[str, Variant] = {"on": "fused", "off": "unfused"}
RUNNER_CHOICES = ("auto", "fvp", "sim", "tosa-ref", "serial")
# a suite flashes boards only on a labgrid farm ("farm": etk bench --coordinator, docs/farm.md)
SUITE_RUNNER_CHOICES = ("auto", "fvp", "sim", "tosa-ref", "farm")


def fusion_variants(fusion: str, compare: bool = False) -> tuple[Variant, ...]:
    """--fusion on -> ("fused",), off -> ("unfused",); compare: both."""
    return ("fused", "unfused") if compare else (FUSION_VARIANT[fusion],)


def is_tflite(model: str) -> bool:
    """A .tflite MODEL: Vela compiles the file as it is (no fusion A/B, simulator runs only)."""
    return model.endswith(".tflite")


def runner_for_model(model: str, runner: str) -> str:
    """The runner a model can use. A .tflite file is compiled by Vela as it is: there is no .pte
    or TOSA graph, only the command stream, so it runs on the simulator."""
    if not is_tflite(model):
        return runner
    if runner not in ("auto", "sim"):
        raise UserError(
            f"a .tflite model runs on the simulator only (it has no .pte or TOSA "
            f"graph for the {runner} runner): use the sim runner"
        )
    return "sim"


def resolve_target(
    target: str,
    npu: str | None = None,
    system_config: str | None = None,
    memory_mode: str | None = None,
    vela_config: str | Path | None = None,
) -> tuple[Target, NpuConfig]:
    """The target (a name or a .toml path) and the NPU configuration to compile for on it."""
    loaded = load_target(target)
    return loaded, loaded.npu(npu, system_config, memory_mode, vela_config)


def resolve_runner(
    model: str, runner: str, target: Target, npu: NpuConfig, **options
) -> tuple[Runner, str]:
    """The runner for this model on this target (runners/select.py: select_runner's options), and
    the sentence saying which runs and why not the others."""
    from .runners.select import select_runner

    return select_runner(runner_for_model(model, runner), target, npu, **options)
