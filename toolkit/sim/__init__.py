"""A functional Ethos-U55/U65 simulator that runs Vela's command stream bit-exactly.

program = load_payload(payload_bytes_or_npz_path)
result = simulate(program, inputs, "ethos-u55-128")   # or accelerator("ethos-u55-128")
result.outputs, result.operations, result.npu_cycles, result.total_cycles

Each NPU family is a home under families/ (its registers, decoder, weight decoding, timing and
traffic) behind one interface (families/family.py); the engines (conv.py, pool.py,
elementwise.py, dma.py, native/) run the operation descriptions of operations.py.
"""

from .errors import PayloadError, RegionError, SimError, UnsupportedError
from .families import SIMULATED, SIMULATED_FAMILIES, Accelerator, accelerator, simulates
from .payload import IOTensor, NpuProgram, load_payload
from .plan import forget_programs
from .records import OpRecord
from .simulator import SimResult, op_outputs, predict_pmu_counts, simulate

__all__ = [
    "Accelerator",
    "IOTensor",
    "NpuProgram",
    "OpRecord",
    "SIMULATED",
    "SIMULATED_FAMILIES",
    "PayloadError",
    "RegionError",
    "SimError",
    "SimResult",
    "UnsupportedError",
    "accelerator",
    "forget_programs",
    "load_payload",
    "op_outputs",
    "predict_pmu_counts",
    "simulate",
    "simulates",
]
