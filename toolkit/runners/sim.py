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

        per_delegate = []

        def run_delegate(delegate: Delegate, arrays: list[np.ndarray]) -> list[np.ndarray]:
            # a .tflite program has no vela_bin_stream, only Vela's raw .npz
            payload = load_payload(delegate.payload or delegate.vela_npz_path)
            result = simulate(payload, arrays, program.npu.accelerator,
                              program.npu.system_config, program.npu.memory_mode,
                              program.npu.config_ini)
            per_delegate.append(result)
            return list(result.outputs)

        if program.graph_module is None:  # a .tflite program: its one delegate is the model
            (delegate,) = program.delegates
            outputs = tuple(o.reshape(s.shape) for o, s in zip(
                run_delegate(delegate, list(inputs)), program.output_specs))
        else:
            outputs = execute(program, inputs, run_delegate)
        cycles = CycleFigures(kind="simulated", source="etk simulator cycle model",
                              npu_cycles=sum(int(r.npu_cycles) for r in per_delegate),
                              total_cycles=sum(int(r.total_cycles) for r in per_delegate),
                              note="computed by etk's cycle model from the executed NPU "
                                   "operations; not a hardware measurement. NPU cycles are the "
                                   "NPU's compute; total cycles also include memory-bound time "
                                   "such as weight reads from flash")
        return RunResult(self.name, outputs, cycles,
                         {"operations": sum(len(r.operations) for r in per_delegate)})

