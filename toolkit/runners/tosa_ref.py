"""The TOSA reference model runner: each delegate's TOSA graph, bit-exact per the TOSA spec.

This is the host reference: it runs the graph ExecuTorch handed to Vela, not Vela's output.
Its cycle figures are Vela's estimate, and the report says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..artifacts import CycleFigures, Delegate, Program, RunResult
from ..errors import ToolError
from ..lower.tosa_isolated import ChildDied, run_reference_model
from ..targets import Target
from .base import Availability
from .host_interpreter import execute


def run_tosa_delegate(delegate: Delegate, inputs: list[np.ndarray]) -> list[np.ndarray]:
    # the callers run programs with a host graph (host_interpreter.execute), compiled from TOSA
    tosa_path = delegate.tosa_path
    assert tosa_path is not None, "a .tflite model's delegate has no TOSA graph"
    run = reference_run(delegate, inputs)
    if "VALID" not in run.status:
        raise ToolError(
            f"TOSA reference model rejected delegate {delegate.index} "
            f"({tosa_path.name}): {run.status}\n{run.log.strip()[-400:]}"
        )
    return list(run.outputs)


def reference_run(delegate: Delegate, inputs: list[np.ndarray], intermediates: bool = False):
    """The reference model's run of the delegate's graph (tosa_isolated: in a child unless this
    process compiled it); a child that dies is a ToolError naming the file as damaged."""
    assert delegate.tosa_path is not None, "a .tflite model's delegate has no TOSA graph"
    try:
        return run_reference_model(delegate.tosa_path.read_bytes(), inputs, intermediates)
    except ChildDied as exc:
        raise ToolError(
            f"the TOSA reference model died ({exc}) running {delegate.tosa_path}: the stored "
            "program is damaged; remove it (etk cache clear, or a new -o folder) and run again"
        ) from None


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
