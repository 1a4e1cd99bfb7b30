"""The TOSA reference model runner: each delegate's TOSA graph, bit-exact per the TOSA spec.

This is the host reference: it runs the graph ExecuTorch handed to Vela, not Vela's output.
Its cycle figures are Vela's estimate, and the report says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..artifacts import CycleFigures, Delegate, Program, RunResult
from ..console_capture import capture_fds
from ..errors import ToolError
from ..targets import Target
from .base import Availability
from .host_interpreter import execute


def run_tosa_delegate(delegate: Delegate, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import tosa_reference_model

    # the callers run programs with a host graph (host_interpreter.execute), compiled from TOSA
    tosa_path = delegate.tosa_path
    assert tosa_path is not None, "a .tflite model's delegate has no TOSA graph"
    with capture_fds() as log:  # the model warns about serializer versions
        outputs, status = tosa_reference_model.run(tosa_path.read_bytes(), inputs)
    if "VALID" not in str(status):
        raise ToolError(
            f"TOSA reference model rejected delegate {delegate.index} "
            f"({tosa_path.name}): {status}\n{log.text.strip()[-400:]}"
        )
    return list(outputs)


def estimate_figures(program: Program) -> CycleFigures:
    from ..lower.vela import vela_version

    estimates = [d.estimate for d in program.delegates if d.estimate is not None]
    return CycleFigures(
        kind="estimate",
        source=f"Vela {vela_version()} estimate",
        npu_cycles=sum(e.npu_cycles for e in estimates),
        total_cycles=sum(e.total_cycles for e in estimates),
        note="an estimate from Vela's performance model, not a measurement",
    )


# a run on the TOSA reference model is the host reference run again: nothing is checked by it
NOT_CHECKED = (
    "not checked: the TOSA reference model compared with itself; "
    "the NPU command stream was not executed"
)


class TosaReferenceRunner:
    name = "tosa-ref"

    def availability(self, target: Target, program_npu: str) -> Availability:
        try:
            import tosa_reference_model  # noqa: F401
        except ImportError:
            return Availability(
                False,
                "tosa_reference_model is not importable: "
                "pip install tosa-tools (comes with executorch[ethos-u])",
            )
        return Availability(
            True, "TOSA reference model (outputs bit-exact per TOSA; cycles are Vela's estimate)"
        )

    def run(
        self, program: Program, inputs: Sequence[np.ndarray], target: Target | None = None
    ) -> RunResult:
        outputs = execute(program, inputs, run_tosa_delegate)
        return RunResult(self.name, outputs, estimate_figures(program))
