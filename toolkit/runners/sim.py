"""The built-in Ethos-U55/U65 simulator as a runner: Vela's command stream, executed on the host.

CPU operators run through PyTorch as for the host reference; each delegate's vela_bin_stream (the
payload inside the .pte) runs through toolkit.sim. Cycles come from our own cycle model: NPU
(compute) cycles and total cycles (compute or memory-bound), as Vela's estimate splits them.

Before anything runs, every delegate's command stream is planned: an operation the simulator
cannot execute is refused with one line (sim_check.refusal); with a fallback runner (--runner
auto) the program runs there instead and the result says why. The first run of each program
checks every delegate's outputs against the TOSA reference model (sim_check.first_difference
names the first NPU operation that differs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..artifacts import CycleFigures, Delegate, Program, RunResult
from ..sim import accelerator
from ..sim import native as native_kernels
from ..targets import Target
from . import sim_check
from .base import Availability
from .host_interpreter import execute
from .layer_cycles import layer_rows
from .tosa_ref import run_tosa_delegate

_CYCLES_NOTE = (
    "computed by etk's cycle model from the executed command stream; not a measurement. NPU "
    "cycles are each operation's compute, summed; total cycles predict the FVP PMU's NPU TOTAL: "
    "compute and AXI traffic (such as weight reads from flash) through the Corstone-300 timing "
    "adapters, DMA overlapping kernels, and each kernel's pipeline fill overlapping the previous "
    "one's drain where BLOCKDEP allows (so the total can be below the compute sum); beats "
    "predict its AXI beat counters"
)
UNCHECKED_NOTE = (
    "simulated, not checked against an FVP (no Ethos-U85 PMU figure is known here): etk's U85 "
    "cycle model, built from Vela 5.2's U85 performance model and applied to the executed "
    "command stream (MAC block traversal per configuration, output stage, memory traffic at the "
    "Vela ini's bandwidths, DMA beside kernels, BLOCKDEP, chained operations sharing their "
    "producer's blocks); not a measurement"
)


def _cycle_figures(per_delegate: list, checked: bool) -> CycleFigures:
    """The run's cycles: each delegate's simulated figures, summed."""
    pmus = [r.pmu for r in per_delegate]
    beats = {k: sum(p.beats[k] for p in pmus) for k in pmus[0].beats} if pmus else None
    return CycleFigures(
        kind="simulated",
        source="etk simulator cycle model",
        npu_cycles=sum(int(r.npu_cycles) for r in per_delegate),
        total_cycles=sum(p.total for p in pmus),
        note=_CYCLES_NOTE if checked else UNCHECKED_NOTE,
        beats=beats,
        unchecked=not checked,
    )


def _details(per_delegate: list, disagreements: list[str], check: bool) -> dict[str, object]:
    details: dict[str, object] = {
        "operations": sum(r.operation_count for r in per_delegate),
        "kernels": native_kernels.STATUS,
    }
    if disagreements:
        details["self_check"] = "; ".join(disagreements)
    elif check and not per_delegate:
        details["self_check"] = "not checked: no delegate, nothing ran on the NPU"
    elif check:
        details["self_check"] = "every delegate equals the TOSA reference model on the first sample"
    return details


class SimulatorRunner:
    name = "sim"

    def __init__(self, fallback=None, self_check: bool = True):
        self.fallback = fallback  # a runner for programs the simulator refuses, or None
        self.self_check = self_check
        self._checked: dict[tuple, str | None] = {}  # program -> refusal, or None once checked

    def _program_key(self, program: Program) -> tuple:
        return (
            str(program.out_dir),
            program.npu.accelerator,
            tuple(hash(d.payload) for d in program.delegates),
        )

    def availability(self, target: Target, program_npu: str) -> Availability:
        try:
            from ..sim import SIMULATED, SIMULATED_FAMILIES, simulates
        except ImportError as exc:
            return Availability(False, f"toolkit.sim is not usable: {exc}")
        if not simulates(program_npu):
            return Availability(
                False,
                f"the simulator models {SIMULATED_FAMILIES} ({', '.join(SIMULATED)}), "
                f"not {program_npu}: run it with --runner fvp (the target's FVP) or "
                "--runner tosa-ref (the TOSA graph's outputs, not the command stream's; "
                "cycles are Vela's estimate)",
            )
        if not accelerator(program_npu).family.cycles_checked:
            return Availability(
                True,
                "etk simulator (Vela's command stream, bit-exact int8; what it cannot execute is "
                "refused up front; cycles simulated, not checked against an FVP)",
            )
        return Availability(
            True,
            "etk simulator (Vela's command stream, bit-exact int8 and a16w8; "
            "cycles from etk's own cycle model, not a measurement)",
        )

    def refusal(self, program: Program) -> str | None:
        """Why the simulator cannot run this program (one line), or None; planned once."""
        key = self._program_key(program)
        if key not in self._checked:
            reasons = (sim_check.refusal(d, program.npu) for d in program.delegates)
            self._checked[key] = next((r for r in reasons if r), None)
        return self._checked[key]

    def _fall_back(
        self, program: Program, inputs: Sequence[np.ndarray], target: Target | None, refused: str
    ) -> RunResult:
        """The fallback runner's run of a program the simulator refuses, saying why (no
        fallback: the refusal, as an UnsupportedError)."""
        from ..sim import UnsupportedError

        if self.fallback is None or program.graph_module is None:
            elsewhere = (
                "use --runner tosa-ref"
                if program.graph_module is not None
                else "a .tflite model runs on the simulator only (no TOSA graph to run)"
            )
            raise UnsupportedError(
                f"the simulator cannot run {program.model_name} "
                f"({program.variant}): {refused}; {elsewhere}"
            )
        result = self.fallback.run(program, inputs, target)
        return dataclasses.replace(
            result,
            details={
                **result.details,
                "fallback": f"the simulator cannot run it ({refused}); "
                f"ran {self.fallback.name} instead",
            },
        )

    def run(
        self, program: Program, inputs: Sequence[np.ndarray], target: Target | None = None
    ) -> RunResult:
        from ..sim import SimError, load_payload, simulate
        from ..sim.vela_tflite import is_vela_compiled, load_compiled_tflite, run_graph

        first_run = self._program_key(program) not in self._checked
        refused = self.refusal(program)
        if refused:
            return self._fall_back(program, inputs, target, refused)
        per_delegate = []
        ran: list = []  # (delegate, its SimResult)
        disagreements = []
        check = first_run and self.self_check and program.graph_module is not None
        npu = program.npu

        def run_program(
            payload, arrays: list[np.ndarray], delegate: Delegate | None = None
        ) -> list[np.ndarray]:
            result = simulate(
                payload,
                arrays,
                npu.accelerator,
                npu.system_config,
                npu.memory_mode,
                npu.config_ini,
            )
            per_delegate.append(result)
            if delegate is not None:
                ran.append((delegate, result))
            if check and delegate is not None and delegate.tosa_path is not None:
                expected = run_tosa_delegate(delegate, arrays)
                if not all(
                    np.array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))
                    for g, w in zip(result.outputs, expected)
                ):
                    try:
                        where = sim_check.first_difference(delegate, program.npu, arrays)
                    except SimError as exc:
                        where = f"could not trace the run: {exc}"
                    disagreements.append(
                        f"delegate {delegate.index} differs from the TOSA "
                        f"reference model on the first sample: {where}"
                    )
            return list(result.outputs)

        def run_delegate(delegate: Delegate, arrays: list[np.ndarray]) -> list[np.ndarray]:
            # a .tflite program has no vela_bin_stream, only Vela's raw .npz
            return run_program(
                load_payload(delegate.payload or delegate.vela_npz_path), arrays, delegate
            )

        if program.graph_module is not None:
            outputs = execute(program, inputs, run_delegate)
        elif program.variant == "tflite" and is_vela_compiled(program.pte_path):
            graph = load_compiled_tflite(program.pte_path)  # NPU part here, CPU ops on the host
            outputs = run_graph(graph, inputs, run_program)
        else:  # a .tflite program compiled here: its one delegate is the model
            (delegate,) = program.delegates
            outputs = tuple(
                o.reshape(s.shape)
                for o, s in zip(run_delegate(delegate, list(inputs)), program.output_specs)
            )
        checked = accelerator(program.npu.accelerator).family.cycles_checked
        cycles = _cycle_figures(per_delegate, checked)
        details = _details(per_delegate, disagreements, check)
        if first_run and not checked:  # Vela's estimate beside ours, per layer
            details["layers"] = [row for d, r in ran for row in layer_rows(d, npu, r)]
        return RunResult(self.name, outputs, cycles, details)
