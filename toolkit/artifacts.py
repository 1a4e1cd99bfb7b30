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
class LayerSource:
    """One call in the user's model that operators came from: a module's forward (a layer) or a
    function the model's own code called (`x.chunk`, `F.interpolate`)."""

    module: str  # module path, "features.3.conv"; "" for the model's own forward
    module_type: str  # "Conv2d"; for the model's own forward, the model's class
    call: str  # the torch function the call ran: "conv2d", "chunk", "interpolate"
    call_id: str  # that call in the export, "conv2d_4": the same in every variant of one model
    file: str = ""  # "model.py"; "" when the export kept no frame of the user's code
    line: int = 0  # 0 when unknown

    @property
    def key(self) -> str:
        """What identifies the layer across variants (fused, unfused) of one model."""
        return f"{self.module}|{self.call_id}"

    @property
    def located(self) -> bool:
        """Module path and source line both known."""
        return bool(self.module_type) and self.line > 0

    def describe(self) -> str:
        """'features.3.conv (Conv2d) at model.py:42'; the model's own code:
        'chunk in ChunkNet.forward at model.py:31'."""
        where = f" at {self.file}:{self.line}" if self.line else ""
        if self.module:
            return f"{self.module} ({self.module_type}){where}"
        return f"{self.call} in {self.module_type or 'the model'}.forward{where}"


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
    parent_layer: LayerSource | None = None  # the conv/linear's call in the user's model


@dataclass(frozen=True)
class RewriteRecord:
    """One place a graph rewrite (toolkit/rewrites) changed."""

    rewrite: str
    node: str
    source: str
    change: str


@dataclass(frozen=True)
class ActivationError:
    """What a layer's int8 output quantization keeps of its signal on the calibration inputs."""

    layer: LayerSource
    sqnr_db: float  # signal over the rounding and clipping error of its output quantize
    clipped: float  # share of its output values beyond the calibrated range


@dataclass(frozen=True)
class QuantizedModel:
    variant: Variant
    graph_module: Any = field(repr=False)  # torch.fx.GraphModule after convert_pt2e
    example_inputs: tuple = field(repr=False)
    decisions: tuple[FusionDecision, ...] = ()
    rewrites: tuple[RewriteRecord, ...] = ()
    activation_errors: tuple[ActivationError, ...] = ()  # int8 outputs only


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
    layer: LayerSource | None = None  # the call in the user's model it came from


@dataclass(frozen=True)
class VelaOperation:
    """One operation Vela scheduled into a delegate's command stream, and where it came from."""

    offset: int  # command-stream offset of its last NPU_OP command (Vela's debug database queue)
    scheduled: int  # the scheduled operation whose estimate it shares (VelaOperationEstimate)
    operator: str  # what Vela scheduled: "Conv2D", "Transpose", "AvgPool"
    tosa_operator: str  # the TOSA operator Vela made it from: "DEPTHWISE_CONV2D"
    layer: int  # index into DelegateAttribution.layers; -1 when none is known
    # "": the layer's own computation; "layout": a TRANSPOSE ExecuTorch put at an NCHW<->NHWC
    # edge of the NPU; "lowering": an operation Vela added to lower the TOSA operator
    added: str = ""


@dataclass(frozen=True)
class VelaOperationEstimate:
    """Vela's estimate of one scheduled operation (its debug database's perf row)."""

    scheduled: int
    op_cycles: int
    npu_cycles: int
    macs: int
    access_cycles: dict[str, int] = field(default_factory=dict)  # memory -> access cycles


@dataclass(frozen=True)
class DelegateAttribution:
    """Which call of the user's model each operation of a delegate's command stream came from:
    through the TOSA graph (ExecuTorch keeps each node's module path and source line) and Vela's
    debug database (command-stream offset -> scheduled operation -> TOSA operator)."""

    layers: tuple[LayerSource, ...]
    operations: tuple[VelaOperation, ...]  # in command-stream order
    estimates: tuple[VelaOperationEstimate, ...] = ()


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
    attribution: DelegateAttribution | None = None  # None: a .tflite program, or no database


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
    activation_errors: tuple[ActivationError, ...] = ()  # int8 outputs (quantize/)
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
