"""The --io-layout nhwc hint: how many TRANSPOSEs ExecuTorch put at the delegates' edges.

With the PyTorch NCHW interface each 4-D delegate input and output gets a TRANSPOSE in the TOSA
graph, which Vela lowers into NPU operations of its own; `--io-layout nhwc` removes them.
Counting them in the TOSA graphs is cheap; what the NHWC program would cost needs its compile.
"""

from __future__ import annotations

from ..artifacts import Program
from ..lower.tosa_graph import read_tosa

PASS_THROUGH = {"CLAMP", "RESCALE"}  # per-element ops that may sit between a transpose and an edge


def edge_transposes(program: Program) -> int:
    """TRANSPOSEs that read a delegate input or write a delegate output (possibly through a
    CLAMP or RESCALE, e.g. the unfused variant's final activation)."""
    count = 0
    for delegate in program.delegates:
        if delegate.tosa_path is None:  # a .tflite model's: no TOSA graph, nothing ExecuTorch put
            continue
        tosa = read_tosa(delegate.tosa_path)

        def from_input(tensor: str, tosa=tosa) -> bool:
            producer = tosa.producer(tensor)
            if producer is None:
                return tensor not in tosa.constants
            return producer.op in PASS_THROUGH and from_input(producer.inputs[0])

        def to_output(tensor: str, tosa=tosa) -> bool:
            consumers = [op for op in tosa.operators if tensor in op.inputs]
            if not consumers:
                return True
            return (
                len(consumers) == 1
                and consumers[0].op in PASS_THROUGH
                and to_output(consumers[0].outputs[0])
            )

        count += sum(
            1
            for op in tosa.operators
            if op.op == "TRANSPOSE" and (from_input(op.inputs[0]) or to_output(op.outputs[0]))
        )
    return count


def layout_hint(programs: dict[str, Program], io_layout: str, has_image_input: bool) -> dict | None:
    """report.json's io_layout_hint, or None when NHWC would change nothing."""
    if io_layout != "nchw" or not has_image_input:
        return None
    counts = {name: edge_transposes(p) for name, p in programs.items()}
    if not any(counts.values()):
        return None
    first = next(iter(programs))
    return {
        "edge_transposes": counts,
        "npu_ops": {n: p.npu_ops for n, p in programs.items()},
        "note": f"--io-layout nhwc would remove {counts[first]} TRANSPOSE(s) at the NPU's "
        f"edges ({first}: {programs[first].npu_ops} NPU operations now, the "
        "transposes' lowering included; the model then takes and returns "
        "channels-last tensors)",
    }
