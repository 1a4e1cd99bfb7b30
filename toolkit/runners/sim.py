"""The built-in Ethos-U55/U65 simulator as a runner: Vela's command stream, executed on the host.

CPU operators run through PyTorch as for the host reference; each delegate's vela_bin_stream (the
payload inside the .pte) runs through toolkit.sim. Cycles come from our own cycle model: NPU
(compute) cycles and total cycles (compute or memory-bound), as Vela's estimate splits them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..artifacts import CycleFigures, Delegate, Program, RunResult
from ..targets import Target
from .base import Availability
from .hybrid import execute


class SimulatorRunner:
    name = "sim"

    def availability(self, target: Target, program_npu: str) -> Availability:
        try:
            from ..sim import ACCELERATORS
        except ImportError as exc:
            return Availability(False, f"toolkit.sim is not usable: {exc}")
        if program_npu not in ACCELERATORS:
            return Availability(False, f"the simulator models Ethos-U55/U65 "
                                       f"({', '.join(ACCELERATORS)}), not {program_npu}")
        return Availability(True, "etk simulator (Vela's command stream, bit-exact int8; "
                                  "cycles from etk's own cycle model, not a measurement)")

    def run(self, program: Program, inputs: Sequence[np.ndarray], target: Target | None = None) -> RunResult:
        from ..sim import load_payload, simulate
        from ..sim.vela_tflite import is_vela_compiled, load_compiled_tflite, run_graph

        per_delegate = []
        npu = program.npu
        ini = str(npu.config_path)

        def run_program(payload, arrays: list[np.ndarray]) -> list[np.ndarray]:
            result = simulate(payload, arrays, npu.accelerator, npu.system_config,
                              npu.memory_mode, ini)
            per_delegate.append(result)
            return list(result.outputs)

        def run_delegate(delegate: Delegate, arrays: list[np.ndarray]) -> list[np.ndarray]:
            # a .tflite program has no vela_bin_stream, only Vela's raw .npz
            return run_program(load_payload(delegate.payload or delegate.vela_npz_path), arrays)

        if program.graph_module is not None:
            outputs = execute(program, inputs, run_delegate)
        elif program.variant == "tflite" and is_vela_compiled(program.pte_path):
            graph = load_compiled_tflite(program.pte_path)  # NPU part here, CPU ops on the host
            outputs = run_graph(graph, inputs, run_program)
        else:  # a .tflite program compiled here: its one delegate is the model
            (delegate,) = program.delegates
            outputs = tuple(o.reshape(s.shape) for o, s in zip(
                run_delegate(delegate, list(inputs)), program.output_specs))
        pmus = [r.pmu for r in per_delegate]
        beats = {k: sum(p.beats[k] for p in pmus) for k in pmus[0].beats} if pmus else None
        cycles = CycleFigures(kind="simulated", source="etk simulator cycle model",
                              npu_cycles=sum(int(r.npu_cycles) for r in per_delegate),
                              total_cycles=sum(p.total for p in pmus),
                              note="computed by etk's cycle model from the executed command "
                                   "stream; not a measurement. NPU cycles are the NPU's compute; "
                                   "total cycles predict the FVP PMU's NPU TOTAL: compute and "
                                   "AXI traffic (such as weight reads from flash) through the "
                                   "Corstone-300 timing adapters, DMA overlapping kernels; "
                                   "beats predict its AXI beat counters",
                              beats=beats)
        return RunResult(self.name, outputs, cycles,
                         {"operations": sum(len(r.operations) for r in per_delegate)})
