"""The runner interface: run(program, inputs, target) -> RunResult, and whether a runner can run
here; HostRunner: one that needs no target."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..artifacts import Program, RunResult
from ..targets import Target


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str  # why not, and how to fix it; or what will run


class Runner(Protocol):
    name: str  # "fvp", "sim", "tosa-ref", "serial"

    def availability(self, target: Target, program_npu: str) -> Availability: ...

    def run(self, program: Program, inputs: Sequence[np.ndarray], target: Target) -> RunResult: ...


class HostRunner(Protocol):
    """A runner that runs on this machine and needs no target (TOSA reference model, simulator):
    the host reference run has none."""

    name: str

    def run(
        self, program: Program, inputs: Sequence[np.ndarray], target: Target | None = None
    ) -> RunResult: ...
