"""What the simulator cannot run, said before it runs; and where it first disagrees with the TOSA
reference model when it does run.

A refusal names the NPU command, its command-stream offset and, where Vela's optimiser database
says so, the TOSA operator and tensor it was scheduled for. The self-check runs a delegate's TOSA
graph on the same inputs; on disagreement it runs both again keeping every intermediate tensor
(the TOSA reference model's dump, the simulator's OFM after each operation) and names the first
NPU operation whose output differs from the TOSA tensor Vela scheduled it to produce.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..artifacts import Delegate
from ..errors import ToolError

_TENSOR = re.compile(
    r"^Name: (\S+) DType=(INT8|INT16|INT32|UINT8|UINT16|BOOL) .*Shape=\[([^\]]*)\]"
)
_INT = re.compile(r"-?\d+")


def _payload(delegate: Delegate):
    from ..sim import load_payload
    from ..sim.vela_tflite import is_vela_compiled, load_compiled_tflite

    source = delegate.payload or delegate.vela_npz_path
    if isinstance(source, Path) and source.suffix == ".tflite" and is_vela_compiled(source):
        # a Vela-compiled file: its ethos-u operators, one per delegate
        return load_compiled_tflite(source).npu_programs[delegate.index]
    return load_payload(source)


def scheduled_operation(delegate: Delegate, npu, offset: int) -> str:
    """' (Vela's Conv2D for TOSA tensor "name")' for the command at `offset`, or '' when Vela's
    database is not available (a .tflite program has no TOSA graph)."""
    from ..sim.vela_estimate import scheduled_operation as owner_of

    owner = None if delegate.tosa_path is None else owner_of(delegate.tosa_path, npu, offset)
    return "" if owner is None else f" (Vela's {owner.operator} for TOSA tensor '{owner.name}')"


def refusal(delegate: Delegate, npu) -> str | None:
    """One line naming what the simulator cannot execute in this delegate, or None."""
    from ..sim import UnsupportedError, accelerator
    from ..sim.plan import plan_for

    program = _payload(delegate)
    if delegate.tosa_path is not None:
        from ..lower.vela_check import graph_outputs

        wanted = graph_outputs(delegate.tosa_path)
        if len(program.outputs) < len(wanted):
            return (
                f"delegate {delegate.index}: Vela's command stream writes {len(program.outputs)} "
                f"of the TOSA graph's {len(wanted)} outputs (a program Vela compiled wrongly)"
            )
    try:
        plan_for(program, accelerator(npu.accelerator))  # planned once, reused by the run
    except UnsupportedError as exc:
        offset = getattr(exc, "offset", None)
        where = "" if offset is None else scheduled_operation(delegate, npu, offset)
        return f"delegate {delegate.index}: {exc}{where}"
    return None


def tosa_intermediates(delegate: Delegate, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every integer tensor of the delegate's TOSA graph for these inputs, flattened, by name."""
    from .tosa_ref import reference_run

    run = reference_run(delegate, inputs, intermediates=True)
    if "VALID" not in run.status:
        raise ToolError(f"TOSA reference model rejected delegate {delegate.index}: {run.status}")
    tensors: dict[str, np.ndarray] = {}
    name: str | None = None
    values: list[int] = []
    for line in run.log.splitlines():
        match = _TENSOR.match(line)
        if match:
            name, values = match.group(1), []
            continue
        if name is None:
            continue
        if not line.strip():
            tensors[name] = np.array(values, dtype=np.int64)
            name = None
        else:
            values.extend(int(v) for v in _INT.findall(line))
    if name is not None:
        tensors[name] = np.array(values, dtype=np.int64)
    return tensors


def first_difference(delegate: Delegate, npu, inputs: list[np.ndarray]) -> str:
    """Where the simulator's run of this delegate first departs from the TOSA reference model."""
    from ..sim import accelerator, op_outputs
    from ..sim.vela_estimate import scheduled_operations

    program = _payload(delegate)
    sim_inputs = [
        np.ascontiguousarray(x).reshape(t.squeezed_shape) for x, t in zip(inputs, program.inputs)
    ]
    configuration = accelerator(npu.accelerator)
    ours = {
        record.offset: (record, ofm)
        for record, ofm in op_outputs(program, sim_inputs, configuration)
    }
    reference = tosa_intermediates(delegate, inputs)
    assert delegate.tosa_path is not None, "a .tflite program has no TOSA graph to compare with"
    # Vela 5.2 schedules some tensors as several operations under one name (a stripe each, or a
    # copy per reader, named like another TOSA tensor): a tensor is right when one of them
    # writes it, and the first tensor none of them writes is where the run departs.
    candidates: dict[str, list[tuple[int, str, str, int]]] = {}  # (offset, kind, operator, n)
    for op in scheduled_operations(delegate.tosa_path, npu):
        want = reference.get(op.name)
        got = ours.get(op.offset)
        if want is None or got is None or got[1].size != want.size:
            continue
        record, ofm = got
        stored = configuration.family.output_map(record).in_memory_order(ofm)
        differ = int(np.count_nonzero(stored.astype(np.int64) != want))
        candidates.setdefault(op.name, []).append((record.offset, record.kind, op.operator, differ))
    compared = len(candidates)
    for name, tries in candidates.items():
        if any(differ == 0 for *_, differ in tries):
            continue
        offset, kind, operator, differ = tries[0]
        return (
            f"first differing NPU operation: {kind} at command-stream offset "
            f"{offset:#x} (Vela's {operator} for TOSA tensor '{name}'): "
            f"{differ} of {reference[name].size} values differ"
        )
    return (
        f"no NPU operation's output differs among the {compared} TOSA tensors they are "
        "scheduled for; compare the programs with etk diff"
    )
