"""The --io-layout nhwc hint: how many TRANSPOSEs ExecuTorch put at the delegates' edges.

With the PyTorch NCHW interface each 4-D delegate input and output gets a TRANSPOSE in the TOSA
graph, which Vela lowers into NPU operations of its own; `--io-layout nhwc` removes them.
Counting them in the TOSA graphs is cheap; what the NHWC program would cost needs its compile.
"""

from __future__ import annotations

from ..artifacts import Program
from ..lower.attribution import edge_transposes as tosa_edge_transposes
from ..lower.tosa_graph import read_tosa


def edge_transposes(program: Program) -> int:
    """TRANSPOSEs that read a delegate input or write a delegate output (possibly through a
    CLAMP or RESCALE, e.g. the unfused variant's final activation)."""
    return sum(
        len(tosa_edge_transposes(read_tosa(d.tosa_path)))
        for d in program.delegates
        if d.tosa_path is not None  # a .tflite model's: no TOSA graph, nothing ExecuTorch put
    )


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
