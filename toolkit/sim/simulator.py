"""Run a program: place inputs, replay its planned NPU operations, read outputs back."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..npu import ARM_VELA_INI, npu_config, vela_ini_path
from . import cycles as cycle_model
from .blas import one_blas_thread
from .derived_store import timing_key
from .errors import SimError
from .families import accelerator as architecture
from .fvp_timing import PmuPrediction, fvp_memory, predict_pmu
from .layouts import ofm_map
from .payload import NpuProgram
from .plan import Plan, plan_for
from .records import OpRecord, with_fields
from .registers import Registers


class Timing:
    """Our cycle model's figures for a plan's operations under one memory system: per operation
    (cycles, compute cycles), their compute summed, and the PMU prediction. The records with
    them are made when first asked for (a plan read from an image plans its steps then)."""

    def __init__(
        self,
        plan: Plan,
        cycles: list[int],
        compute: list[int],
        pmu: PmuPrediction,
        records: tuple[OpRecord, ...] | None = None,
    ):
        self._plan: Plan | None = plan if records is None else None
        self._figures = (cycles, compute)
        self._records = records
        self.pmu, self.npu_cycles = pmu, sum(compute)

    @property
    def records(self) -> tuple[OpRecord, ...]:
        if self._records is None:
            assert self._plan is not None
            cycles, compute = self._figures
            self._records = tuple(
                with_fields(s.record, cycles=c, compute_cycles=cc)
                for s, c, cc in zip(self._plan.steps, cycles, compute)
            )
            self._plan = None
        return self._records

    def __getstate__(self) -> dict:
        """Pickled with its records, without the plan (which holds native state)."""
        state = dict(self.__dict__, _records=self.records)
        del state["_plan"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _plan=None)


class SimResult(NamedTuple):
    """One run's outputs and figures (a tuple, immutable: a frozen dataclass's field by field
    init was a microsecond of a small program's first inference)."""

    outputs: list[np.ndarray]
    npu_cycles: int  # our cycle model's compute cycles, summed over the operations
    total_cycles: int  # the FVP PMU's NPU TOTAL as predicted (pmu.total)
    accelerator: str
    pmu: PmuPrediction  # what the FVP's PMU would count (fvp_timing): cycles and AXI beats
    operation_count: int
    timing: Timing  # the records behind the figures

    @property
    def operations(self) -> tuple[OpRecord, ...]:
        """Each NPU operation's record, with our cycle model's figures."""
        return self.timing.records


def check_simulated_accelerator(program: NpuProgram, accelerator: str) -> None:
    architecture(accelerator)  # SimError unless the simulator runs it
    if program.config is not None and program.config.accelerator != accelerator:
        raise SimError(
            f"{program.source} was compiled for {program.config.accelerator}, "
            f"not {accelerator}: compile for the NPU you simulate"
        )


class MemorySystem(NamedTuple):
    """Vela's memory system a run's cycle figures are for: its names, its ini file and the key
    of its figures in a program's derived store (the ini file by its content)."""

    system_config: str
    memory_mode: str
    ini: str
    stored_key: int


@lru_cache(maxsize=16)
def memory_system(
    accelerator: str, system_config: str | None, memory_mode: str | None, config_ini: str
) -> MemorySystem:
    """The memory system (defaults: ExecuTorch's for the NPU family), once per process."""
    npu = npu_config(accelerator, system_config, memory_mode)
    ini = str(vela_ini_path(config_ini))
    ini_digest = hashlib.sha256(Path(ini).read_bytes()).hexdigest()
    stored_key = timing_key(npu.system_config, npu.memory_mode, ini_digest)
    return MemorySystem(npu.system_config, npu.memory_mode, ini, stored_key)


def _timed(plan: Plan, program: NpuProgram, accelerator: str, system: MemorySystem) -> Timing:
    """The plan's cycle figures, computed once per memory system (or read from its store)."""
    timed = plan.timed.get(system)
    if timed is not None:
        return timed
    stored = plan.stored.timing.get(system.stored_key) if plan.store else None
    if stored is not None and len(stored[0]) == plan.operation_count:
        timed = plan.timed[system] = Timing(
            plan, stored[0], stored[1], PmuPrediction._make(stored[2])
        )
        return timed
    system_config, memory_mode, ini, _ = system
    ports = cycle_model.memory_system(accelerator, system_config, memory_mode, ini)
    timings = [cycle_model.op_timing(s.record, accelerator, ports) for s in plan.steps]
    cycles, compute = [t.total for t in timings], [t.compute for t in timings]
    records = tuple(
        with_fields(s.record, cycles=c, compute_cycles=cc)
        for s, c, cc in zip(plan.steps, cycles, compute)
    )
    pmu = predict_pmu(
        program.command_stream,
        records,
        fvp_memory(accelerator, system_config, memory_mode, ini),
        accelerator,
    )
    if plan.store:
        plan.stored.timing[system.stored_key] = (cycles, compute, tuple(pmu))
    timed = plan.timed[system] = Timing(plan, cycles, compute, pmu, records)
    return timed


def simulate(
    program: NpuProgram,
    inputs: Sequence[np.ndarray],
    accelerator: str,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str = ARM_VELA_INI,
    store: Path | None = None,
) -> SimResult:
    """Run the program; system config and memory mode (Vela's, for the cycle model, read from
    config_ini) default to ExecuTorch's defaults for the NPU family. store: the compiled
    program's folder, where what the simulator derives from the program is kept for the first
    run in another process (derived_store.py)."""
    check_simulated_accelerator(program, accelerator)
    system = memory_system(accelerator, system_config, memory_mode, config_ini)
    plan = plan_for(program, accelerator, store)
    frame = plan.frame
    memory = frame.memory()
    frame.place_inputs(memory, inputs)
    with one_blas_thread() if plan.blas else nullcontext():
        plan.execute(memory)
    timing = _timed(plan, program, accelerator, system)
    plan.save_if_new()
    outputs = frame.read_outputs(memory)
    frame.release(memory)
    return SimResult(
        outputs,
        timing.npu_cycles,
        timing.pmu.total,
        accelerator,
        timing.pmu,
        plan.operation_count,
        timing,
    )


def op_outputs(
    program: NpuProgram, inputs: Sequence[np.ndarray], accelerator: str
) -> list[tuple[OpRecord, np.ndarray]]:
    """Run the program one operation at a time: each operation's record and its OFM (H, W, C) as
    it stood right after the operation ran (DMA: none). For finding where a run goes wrong."""
    check_simulated_accelerator(program, accelerator)
    plan = plan_for(program, accelerator)
    memory = plan.frame.memory()
    plan.frame.place_inputs(memory, inputs)
    outputs = []
    for step in plan.steps:
        step.run(memory)
        if step.record.kind != "dma":
            ofm = ofm_map(Registers(dict(step.record.registers)))
            outputs.append((step.record, np.array(ofm.read(memory))))
    return outputs


def predict_pmu_counts(
    program: NpuProgram,
    accelerator: str,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str = ARM_VELA_INI,
) -> PmuPrediction:
    """The cycle model's FVP PMU prediction without running the program: its figures depend on
    the command stream only, never on the data (tests/sim check that)."""
    check_simulated_accelerator(program, accelerator)
    system = memory_system(accelerator, system_config, memory_mode, config_ini)
    return _timed(plan_for(program, accelerator), program, accelerator, system).pmu
