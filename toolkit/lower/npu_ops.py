"""Count the operations the NPU executes, from the command stream Vela produced."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..npu import NpuConfig

# the simulator package is also the command-stream decoder (payloads, registers, Vela .tflite)
from ..sim.families import commands, decodes
from ..sim.payload import load_payload

# the operations that compute (Ethos-U85 adds NPU_OP_RESIZE); not DMA, waits, PMU or STOP
KERNEL_OPERATIONS = (
    "NPU_OP_CONV",
    "NPU_OP_DEPTHWISE",
    "NPU_OP_POOL",
    "NPU_OP_ELEMENTWISE",
    "NPU_OP_RESIZE",
)


def command_stream_operations(payload: bytes | Path, npu: NpuConfig) -> dict[str, int]:
    """NPU_OP_* command counts of a vela_bin_stream, or of Vela's raw .npz at a path.

    Empty for an NPU whose register map the decoder does not know (families.decodes).
    """
    if not decodes(npu.accelerator):
        return {}
    decoded = commands(npu.accelerator).decode(load_payload(payload).command_stream)
    return dict(sorted(Counter(c.name for c in decoded if c.is_operation).items()))


def kernel_operation_count(operations: dict[str, int]) -> int:
    return sum(operations.get(name, 0) for name in KERNEL_OPERATIONS)
