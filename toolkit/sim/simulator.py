"""Run a program: place inputs, replay its planned NPU operations, read outputs back."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..npu import ARM_VELA_INI, npu_config, vela_ini_path
from .blas import one_blas_thread
from .errors import SimError
from .families import Accelerator
from .families import accelerator as configuration
from .fvp_timing import PmuPrediction, fvp_memory
from .memory_system import memory_system
from .payload import NpuProgram
from .plan import Plan, plan_for
from .records import OpRecord


class Timing(NamedTuple):
    """Our cycle model's figures for a plan's operations under one memory system."""

    records: tuple[OpRecord, ...]  # each operation's, with its cycles
    npu_cycles: int  # the operations' compute cycles, summed
    pmu: PmuPrediction


class SimResult(NamedTuple):
    """One run's outputs, and the cycle model's figures for its program: computed when first
    asked for, once per program and memory system (they depend on the command stream only,
    never on the data)."""

    outputs: list[np.ndarray]
    accelerator: Accelerator
    plan: Plan
    system: VelaSystem

    @property
    def timing(self) -> Timing:
        return _timed(self.plan, self.accelerator, self.system)

    @property
    def operations(self) -> tuple[OpRecord, ...]:
        """Each NPU operation's record, with our cycle model's figures."""
        return self.timing.records

    @property
    def operation_count(self) -> int:
        return len(self.plan.steps)

    @property
    def npu_cycles(self) -> int:
        """Our cycle model's compute cycles, summed over the operations."""
        return self.timing.npu_cycles

    @property
    def pmu(self) -> PmuPrediction:
        """What the FVP's PMU would count (fvp_timing): cycles and AXI beats."""
        return self.timing.pmu

    @property
    def total_cycles(self) -> int:
        """The FVP PMU's NPU TOTAL as predicted."""
        return self.timing.pmu.total


def simulated_accelerator(program: NpuProgram, name: str | Accelerator) -> Accelerator:
    """The configuration the program runs on (SimError unless the simulator runs it and the
    program was compiled for it)."""
    accelerator = configuration(name)
    if program.config is not None and program.config.accelerator != accelerator.name:
        raise SimError(
            f"{program.source} was compiled for {program.config.accelerator}, "
            f"not {accelerator.name}: compile for the NPU you simulate"
        )
    return accelerator


class VelaSystem(NamedTuple):
    """The Vela system config and memory mode a run's cycle figures are for, and their ini."""

    system_config: str
    memory_mode: str
    ini: str


@lru_cache(maxsize=16)
def vela_system(
    accelerator: Accelerator, system_config: str | None, memory_mode: str | None, config_ini: str
) -> VelaSystem:
    """The names given, or ExecuTorch's defaults for the NPU family."""
    npu = npu_config(accelerator.name, system_config, memory_mode)
    return VelaSystem(npu.system_config, npu.memory_mode, str(vela_ini_path(config_ini)))


def _timed(plan: Plan, accelerator: Accelerator, system: VelaSystem) -> Timing:
    """The plan's cycle figures by its family's timing, computed once per memory system."""
    timed = plan.timed.get(system)
    if timed is None:
        family = accelerator.family
        ports = memory_system(accelerator.name, *system)
        timings = [family.op_timing(s.record, accelerator, ports) for s in plan.steps]
        records = tuple(
            s.record._replace(cycles=t.total, compute_cycles=t.compute)
            for s, t in zip(plan.steps, timings)
        )
        fvp = fvp_memory(accelerator, *system)
        pmu = family.predict_pmu(accelerator, plan.program.command_stream, records, fvp)
        timed = plan.timed[system] = Timing(records, sum(t.compute for t in timings), pmu)
    return timed


def simulate(
    program: NpuProgram,
    inputs: Sequence[np.ndarray],
    accelerator: str | Accelerator,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str = ARM_VELA_INI,
) -> SimResult:
    """Run the program on the configuration (its name, or the Accelerator); system config and
    memory mode (Vela's, for the cycle model, read from config_ini) default to ExecuTorch's
    defaults for the NPU family."""
    npu = simulated_accelerator(program, accelerator)
    system = vela_system(npu, system_config, memory_mode, config_ini)
    plan = plan_for(program, npu)
    frame = plan.frame
    memory = frame.memory()
    frame.place_inputs(memory, inputs)
    with one_blas_thread() if plan.blas else nullcontext():
        plan.execute(memory)
    outputs = frame.read_outputs(memory)
    frame.release(memory)
    return SimResult(outputs, npu, plan, system)


def op_outputs(
    program: NpuProgram, inputs: Sequence[np.ndarray], accelerator: str | Accelerator
) -> list[tuple[OpRecord, np.ndarray]]:
    """Run the program one operation at a time: each operation's record and its OFM (H, W, C) as
    it stood right after the operation ran (DMA: none). For finding where a run goes wrong."""
    npu = simulated_accelerator(program, accelerator)
    plan = plan_for(program, npu)
    memory = plan.frame.memory()
    plan.frame.place_inputs(memory, inputs)
    outputs = []
    for step in plan.steps:
        step.run(memory)
        if step.record.kind != "dma":
            ofm = npu.family.output_map(step.record)
            outputs.append((step.record, np.array(ofm.read(memory))))
    return outputs


def predict_pmu_counts(
    program: NpuProgram,
    accelerator: str | Accelerator,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str = ARM_VELA_INI,
) -> PmuPrediction:
    """The cycle model's FVP PMU prediction without running the program: its figures depend on
    the command stream only, never on the data (tests/sim check that)."""
    npu = simulated_accelerator(program, accelerator)
    system = vela_system(npu, system_config, memory_mode, config_ini)
    return _timed(plan_for(program, npu), npu, system).pmu
