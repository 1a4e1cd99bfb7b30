"""`etk targets` and `etk doctor`: what this machine can run, and what is missing."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..runners.fvp import (
    FvpRunner,
    find_fvp,
    find_runner_elf,
    how_to_build_runner,
    how_to_get_fvp,
)
from ..runners.select import candidate_runners
from ..targets import Target, list_targets

# (label, distribution) pairs etk doctor reports.
DISTRIBUTIONS = (("torch", "torch"), ("executorch", "executorch"),
                 ("ethos-u-vela", "ethos-u-vela"), ("tosa-tools", "tosa-tools"),
                 ("toolkit", "ethos-u-toolkit"))


def register(subparsers: argparse._SubParsersAction) -> None:
    targets = subparsers.add_parser(
        "targets", help="targets, their NPU configurations, and which runners work here")
    targets.add_argument("--runner-elf", type=Path,
                         help="the semihosting executor runner ELF to check for the FVP runner")
    targets.set_defaults(func=run_targets)
    doctor = subparsers.add_parser(
        "doctor", help="tool chain versions; FVP binaries and runner ELF found or missing")
    doctor.add_argument("--runner-elf", type=Path,
                        help="the semihosting executor runner ELF to check")
    doctor.set_defaults(func=run_doctor)


def _families(target: Target) -> dict[str, list[str]]:
    families: dict[str, list[str]] = {}
    for accelerator in target.supported_npus:
        families.setdefault(accelerator.rsplit("-", 1)[0], []).append(accelerator)
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


def run_targets(args: argparse.Namespace) -> int:
    runners = candidate_runners(args.runner_elf)
    notes = _Notes()
    table = Table(title="etk targets: where each runner works on this machine")
    for column in ("target", "NPU configs", "Vela system config\nmemory mode",
                   *(r.name for r in runners)):
        table.add_column(column, overflow="fold")
    for target in list_targets():
        for family, accelerators in _families(target).items():
            # One row per NPU family: its FVP, runner build and Vela defaults are shared.
            npu = target.npu(target.default_npu if target.default_npu in accelerators
                             else accelerators[0])
            table.add_row(
                target.name,
                f"{family}: " + ", ".join(a.rsplit("-", 1)[1] for a in accelerators),
                f"{npu.system_config}\n{npu.memory_mode}",
                *(notes.cell(_why_not(r, target, npu.accelerator)) for r in runners))
    console = _console()
    console.print(table)
    for n, note in enumerate(notes.items, 1):
        console.print(f"({n}) {note}", soft_wrap=True)
    console.print("The Vela system config and memory mode must match how the runner ELF was "
                  "built; edit the target file when your build differs.", soft_wrap=True)
    return 0


def _console() -> Console:
    console = Console(markup=False, highlight=False)
    if not console.is_terminal:  # piped or captured: no terminal width to fit
        console.width = 120
    return console


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_doctor(args: argparse.Namespace) -> int:
    lines = [f"{'python':<14}{sys.version.split()[0]}"]
    lines += [f"{label:<14}{_version(dist)}" for label, dist in DISTRIBUTIONS]
    targets = list_targets()
    lines.append("FVP binaries (searched in ETK_FVP_PATH, then PATH):")
    binaries = sorted({b for t in targets if t.fvp for b in t.fvp.binaries.values()})
    for binary in binaries:
        found = find_fvp(binary)
        lines.append(f"  {binary}: " + (f"found at {found}" if found
                                         else f"missing; {how_to_get_fvp(binary)}"))
    lines.append("executor runner ELF (--runner-elf, ETK_RUNNER_ELF, or fvp.runner_elf in the "
                 "target file):")
    for target in targets:
        if target.fvp is None:
            continue
        elf = find_runner_elf(target, args.runner_elf)
        how = how_to_build_runner(target, target.npu())
        if elf.path is None:
            lines.append(f"  {target.name}: missing; {how}")
        elif elf.path.is_file():
            lines.append(f"  {target.name}: found at {elf.path} (from {elf.source})")
        else:
            lines.append(f"  {target.name}: {elf.path} (from {elf.source}) does not exist; {how}")
    console = _console()
    for line in lines:
        console.print(line, soft_wrap=True)
    return 0
