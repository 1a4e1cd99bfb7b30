"""Choosing a runner: --runner auto picks the FVP, else the simulator, else the TOSA reference;
a program the simulator refuses (sim_check.refusal) then runs on the TOSA reference, which the
result says (RunResult.details["fallback"]).

A serial board runs only when asked for (--runner serial): it flashes real hardware.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..npu import NpuConfig
from ..targets import Target
from .base import Runner


def candidate_runners(
    runner_elf: str | None = None, fvp_fast: bool = False, one_start: str = "auto"
) -> list:
    # imported here: the runners pull in torch, which `etk --help` should not wait for
    from .fvp import FvpRunner
    from .sim import SimulatorRunner
    from .tosa_ref import TosaReferenceRunner

    return [
        FvpRunner(
            runner_elf=Path(runner_elf) if runner_elf else None, fast=fvp_fast, one_start=one_start
        ),
        SimulatorRunner(),
        TosaReferenceRunner(),
    ]


def select_runner(
    name: str,
    target: Target,
    npu: NpuConfig,
    runner_elf: str | None = None,
    port: str | None = None,
    baud: int | None = None,
    build: bool = True,
    flash: bool = True,
    fvp_fast: bool = False,
    one_start: str = "auto",
) -> tuple[Runner, str]:
    """(runner, a sentence saying which runs and what its cycles are, and why not the others)."""
    skipped: list[str] = []
    runners: list = candidate_runners(runner_elf, fvp_fast, one_start)
    if name == "farm":  # a board on the labgrid place this bench worker holds
        from ..farm.runner import farm_runner

        runners = [farm_runner(Path(runner_elf) if runner_elf else None)]
    if name == "serial":
        from .serial import SerialRunner

        runners = [
            SerialRunner(
                port, baud, Path(runner_elf) if runner_elf else None, build=build, flash=flash
            )
        ]
    for runner in runners:
        if name not in ("auto", runner.name):
            continue
        available = runner.availability(target, npu.accelerator)
        if available.ok:
            why_not = f" (not {'; not '.join(skipped)})" if skipped else ""
            if name == "auto" and runner.name == "sim":
                # what the simulator refuses runs on the TOSA reference model, and says so
                runner.fallback = next(r for r in runners if r.name == "tosa-ref")
            return runner, f"{runner.name}: {available.reason}{why_not}"
        if name != "auto":
            raise UserError(f"runner '{name}' cannot run here: {available.reason}")
        skipped.append(f"{runner.name}: {available.reason}")
    raise UserError("no runner can run here: " + "; ".join(skipped))
