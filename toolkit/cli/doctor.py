"""`etk doctor`: tool chain versions; FVP binaries and the runner ELF, found or missing and how to
get them."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from ..runners.fvp import find_fvp, find_runner_elf, how_to_build_runner, how_to_get_fvp
from ..sim import native as native_kernels
from ..targets import list_targets
from ..versions import vela_version_warning
from .console import plain_console

# (label, distribution) pairs etk doctor reports.
DISTRIBUTIONS = (
    ("torch", "torch"),
    ("executorch", "executorch"),
    ("ethos-u-vela", "ethos-u-vela"),
    ("tosa-tools", "tosa-tools"),
    ("toolkit", "ethos-u-toolkit"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="tool chain versions; FVP binaries and runner ELF found or missing"
    )
    doctor.add_argument(
        "--runner-elf", type=Path, help="the semihosting executor runner ELF to check"
    )
    doctor.set_defaults(func=run_doctor)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_doctor(args: argparse.Namespace) -> int:
    lines = [f"{'python':<14}{sys.version.split()[0]}"]
    lines += [f"{label:<14}{_version(dist)}" for label, dist in DISTRIBUTIONS]
    warning = vela_version_warning(_version("ethos-u-vela"))
    if warning:
        lines.append(warning)
    lines.append(f"{'sim kernels':<14}{native_kernels.STATUS}")
    targets = list_targets()
    lines.append("FVP binaries (searched in ETK_FVP_PATH, then PATH):")
    binaries = sorted({b for t in targets if t.fvp for b in t.fvp.binaries.values()})
    for binary in binaries:
        found = find_fvp(binary)
        lines.append(
            f"  {binary}: "
            + (f"found at {found}" if found else f"missing; {how_to_get_fvp(binary)}")
        )
    lines.append(
        "executor runner ELF (--runner-elf, ETK_RUNNER_ELF, or fvp.runner_elf in the target file):"
    )
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
    console = plain_console()
    for line in lines:
        console.print(line, soft_wrap=True)
    return 0
