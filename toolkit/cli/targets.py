"""`etk targets`: the targets, their NPU configurations, and which runners work on this machine."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from ..npu import accelerator_family, accelerator_macs
from ..runners.fvp import FvpRunner
from ..runners.select import candidate_runners
from ..targets import Target, list_targets
from .console import plain_console


def register(subparsers: argparse._SubParsersAction) -> None:
    targets = subparsers.add_parser(
        "targets", help="targets, their NPU configurations, and which runners work here"
    )
    targets.add_argument(
        "--runner-elf",
        type=Path,
        help="the semihosting executor runner ELF to check for the FVP runner",
    )
    targets.set_defaults(func=run_targets)


def _families(target: Target) -> dict[str, list[str]]:
    families: dict[str, list[str]] = {}
    for accelerator in target.supported_npus:
        families.setdefault(accelerator_family(accelerator), []).append(accelerator)
    return families


class _Notes:
    """Numbered footnotes for why a runner does not work, each reason printed once."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def cell(self, reasons: list[str]) -> str:
        if not reasons:
            return "yes"
        numbers = []
        for reason in reasons:
            if reason not in self.items:
                self.items.append(reason)
            numbers.append(str(self.items.index(reason) + 1))
        return f"no ({', '.join(numbers)})"


def _why_not(runner, target: Target, accelerator: str) -> list[str]:
    """Why this runner cannot run this NPU configuration here; empty when it can."""
    if isinstance(runner, FvpRunner):  # the FVP binary and the runner ELF as separate notes
        return list(runner.locate(target, accelerator).missing)
    available = runner.availability(target, accelerator)
    return [] if available.ok else [available.reason]


def _family_cell(notes: _Notes, runner, target: Target, default: str, accelerators) -> str:
    """The runner's cell for a family's row, from its default configuration (whose notes the
    family shares); where that one runs, "yes (N)" with notes naming the others it does not run
    (the simulator runs ethos-u65-256, not -512)."""
    reasons = _why_not(runner, target, default)
    if reasons:
        return notes.cell(reasons)
    failing = {a: _why_not(runner, target, a) for a in accelerators if a != default}
    failing = {a: r for a, r in failing.items() if r}
    if not failing:
        return "yes"
    # "yes (N)": the note names the configurations left out
    return "yes" + notes.cell([r for reasons in failing.values() for r in reasons]).removeprefix(
        "no"
    )


def run_targets(args: argparse.Namespace) -> int:
    runners = candidate_runners(args.runner_elf)
    notes = _Notes()
    table = Table(title="etk targets: where each runner works on this machine")
    for column in (
        "target",
        "NPU configs",
        "Vela system config\nmemory mode",
        *(r.name for r in runners),
    ):
        table.add_column(column, overflow="fold")
    for target in list_targets():
        for family, accelerators in _families(target).items():
            # One row per NPU family: its FVP, runner build and Vela defaults are shared.
            npu = target.npu(
                target.default_npu if target.default_npu in accelerators else accelerators[0]
            )
            table.add_row(
                target.name,
                f"{family}: " + ", ".join(str(accelerator_macs(a)) for a in accelerators),
                f"{npu.system_config}\n{npu.memory_mode}",
                *(_family_cell(notes, r, target, npu.accelerator, accelerators) for r in runners),
            )
    console = plain_console()
    console.print(table)
    for n, note in enumerate(notes.items, 1):
        console.print(f"({n}) {note}", soft_wrap=True)
    console.print(
        "The Vela system config and memory mode must match how the runner ELF was "
        "built; edit the target file when your build differs.",
        soft_wrap=True,
    )
    return 0
