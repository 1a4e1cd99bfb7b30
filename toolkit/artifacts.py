"""The typed artifacts that flow between stages.

load -> LoadedModel -> quantize -> QuantizedModel -> lower -> Program -> run -> RunResult.
Each stage takes the previous artifact and returns the next; none reaches into another's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .npu import NpuConfig

Variant = Literal["fused", "unfused", "tflite"]  # tflite: a .tflite file, compiled by Vela as is
Quant = Literal["int8", "a16w8"]  # a16w8: int16 activations, int8 weights (quantize/quantizer.py)
QUANTS: tuple[Quant, ...] = ("int8", "a16w8")


@dataclass(frozen=True)
class LoadedModel:
    spec: str  # what the user typed: zoo:NAME, file.py:Name, model.pt2
    name: str
    module: Any = field(repr=False)  # torch.nn.Module in eval mode
    example_inputs: tuple = field(repr=False)  # tuple of torch.Tensor
    content_hash: str = ""  # changes when the weights, code or input shapes change


@dataclass(frozen=True)
class CalibrationSet:
    samples: tuple = field(repr=False)  # tuple of input tuples (torch.Tensor)
    source: str  # "random(seed=0, n=8)" or a folder
    seed: int | None
    content_hash: str


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a model input or output as the .pte sees it."""

    shape: tuple[int, ...]
    dtype: str  # numpy dtype name: "float32", "int8"


@dataclass(frozen=True)
class TensorQuant:
    """Affine int quantization of one tensor at a program boundary: real = scale * (q - zp)."""

    scale: float
    zero_point: int
    qmin: int
    qmax: int
    dtype: str  # "int8", "int16"


@dataclass(frozen=True)
class FusionDecision:
    """What our block annotation and fusion did with one conv/linear + activation pattern."""

    parent: str  # node name of the conv/linear
    activation: str  # "relu", "relu6", "hardtanh(0, 4.0)", ...
    source: str  # module path and file:line in the user's model
    fused: bool
    reason: str  # why not fused, or what the saturation implements
    zero_point_raised: bool = False  # fused by raising qmin to a zero point above qmin
    upper_bound: float | None = None  # fused: the real value qmax stands for (the clip point)
    upper_bound_from: str = ""  # fused: "activation" (hardtanh's M) or "calibration" (max seen)


@dataclass(frozen=True)
class RewriteRecord:
    """One place a graph rewrite (toolkit/rewrites) changed."""

    rewrite: str
    node: str
    source: str
    change: str


@dataclass(frozen=True)
class QuantizedModel:
    variant: Variant
    graph_module: Any = field(repr=False)  # torch.fx.GraphModule after convert_pt2e
    example_inputs: tuple = field(repr=False)
    decisions: tuple[FusionDecision, ...] = ()
    rewrites: tuple[RewriteRecord, ...] = ()


@dataclass(frozen=True)
class LayerEstimate:
    """One row of Vela's per-layer performance CSV."""

    name: str
    operator: str
    npu_cycles: int
    op_cycles: int
    macs: int


@dataclass(frozen=True)
class VelaEstimate:
    """Vela's performance estimate: not a measurement."""

    npu_cycles: int
    total_cycles: int
    sram_traffic_bytes: int  # bytes read and written in SRAM per inference
    off_chip_flash_bytes: int
    macs: int
    layers: tuple[LayerEstimate, ...] = ()
    sram_used_bytes: int = 0  # peak SRAM the program occupies (Vela's "Total SRAM used")
    arena_bytes: int = 0  # the scratch arena the runtime must provide (plus the fast scratch)


@dataclass(frozen=True)
class CpuOp:
    """An operator left to the CPU by the partitioner."""

    op: str
    node: str
    source: str
    reason: str


@dataclass(frozen=True)
class Delegate:
    index: int
    tosa_path: Path | None  # None for a .tflite model (Vela compiles the TFLite file itself)
    vela_npz_path: Path
    payload: bytes = field(repr=False)  # the vela_bin_stream ExecuTorch puts in the .pte
    tosa_ops: dict[str, int] = field(default_factory=dict)
    npu_ops: int = 0  # kernel operations (conv, depthwise, pool, elementwise) in the command stream
    command_ops: dict[str, int] = field(default_factory=dict)  # every NPU_OP_* command, counted
    estimate: VelaEstimate | None = None
    inputs: tuple[TensorQuant, ...] = ()
    outputs: tuple[TensorQuant, ...] = ()


@dataclass(frozen=True)
class Program:
    """A compiled variant: the .pte and everything needed to run and check it."""

    variant: Variant
    model_name: str
    npu: NpuConfig
    out_dir: Path
    pte_path: Path
    delegates: tuple[Delegate, ...]
    cpu_ops: tuple[CpuOp, ...]
    vela_flags: tuple[str, ...]
    input_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    input_quant: tuple[TensorQuant | None, ...]  # per model input (None: float on the CPU)
    output_quant: tuple[TensorQuant | None, ...]  # per model output
    decisions: tuple[FusionDecision, ...] = ()
    rewrites: tuple[RewriteRecord, ...] = ()
    graph_module: Any = field(
        default=None, repr=False, compare=False
    )  # edge graph, delegates as calls
    timings: dict[str, float] = field(default_factory=dict, compare=False)  # stage -> seconds

    @property
    def tosa_ops(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for delegate in self.delegates:
            for op, count in delegate.tosa_ops.items():
                total[op] = total.get(op, 0) + count
        return dict(sorted(total.items()))

    @property
    def npu_ops(self) -> int:
        return sum(d.npu_ops for d in self.delegates)

    @property
    def estimated_total_cycles(self) -> int:
        """Vela's total cycles estimate, summed over the delegates (0 without an estimate)."""
        return sum(d.estimate.total_cycles for d in self.delegates if d.estimate)


CycleKind = Literal["measured", "simulated", "estimate", "none"]


@dataclass(frozen=True)
class CycleFigures:
    """Cycle counts with what they are: an FVP/board measurement, our simulator, or Vela's estimate."""

    kind: CycleKind
    source: (
        str  # "FVP PMU (ethosu_pmu_cycle_cntr)", "etk simulator cycle model", "Vela 5.1.0 estimate"
    )
    npu_cycles: int | None = None
    total_cycles: int | None = None
    cpu_cycles: int | None = None
    note: str = ""
    # AXI beats per inference: axi0_read, axi0_write, axi1_read (measured PMU counters or predicted)
    beats: dict[str, int] | None = None
    # simulated figures of an NPU family no FVP measurement has checked (Ethos-U85): labelled
    # "simulated, not checked against an FVP"
    unchecked: bool = False

    @property
    def label(self) -> str:
        """What the figures are, for console and report: "measured", "simulated", ..."""
        return f"{self.kind}, not checked against an FVP" if self.unchecked else self.kind


@dataclass(frozen=True)
class RunResult:
    runner: str  # "fvp", "sim", "tosa-ref", "serial"
    outputs: tuple[np.ndarray, ...] = field(repr=False)  # model outputs, as the model returns them
    cycles: CycleFigures
    details: dict[str, Any] = field(default_factory=dict)  # PMU counters, per-op cycles, log path
