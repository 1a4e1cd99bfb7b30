"""Where a program's cycles go, per layer of the user's model.

Each NPU operation of each delegate (op_figures.py: simulated, or Vela's estimate) is added to
the call of the user's model its Vela operation came from (Delegate.attribution): its cycles,
MACs, traffic per memory, and whether the lowering added it. A layer's MAC utilisation is its
MACs over its MAC operations' compute cycles times the configuration's peak (as Vela's
"Util% (MAC)"); its bound is what most of its cycles are: its own operations' compute, their
memory traffic (an operation whose traffic takes longer than its compute), or operations the
lowering added (transposes at the NCHW edges, Vela's lowering of an operator into others).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..artifacts import CycleFigures, LayerSource, Program, VelaOperation
from .op_figures import DelegateFigures, OpFigures, OpShape, delegate_figures

MAC_KINDS = ("conv", "depthwise", "matmul")


@dataclass
class LayerProfile:
    """One call of the user's model: everything the NPU (and the CPU) ran for it."""

    source: LayerSource
    delegates: list[int] = field(default_factory=list)
    npu_ops: int = 0  # kernel operations (not DMA)
    dma_ops: int = 0
    dma_cycles: int = 0  # its weight and LUT DMAs' (they run beside the kernels: not in cycles)
    cycles: int = 0  # each kernel's own: the longest of its compute and its traffic
    compute_cycles: int = 0
    macs: int = 0
    mac_cycles: int = 0  # compute cycles of its convolutions and depthwise convolutions
    memory_bound_cycles: int = 0  # cycles of its own operations whose traffic exceeds compute
    added_ops: dict[str, int] = field(default_factory=dict)  # "layout"/"lowering" -> kernel ops
    added_cycles: dict[str, int] = field(default_factory=dict)
    added_by: dict[str, int] = field(default_factory=dict)  # Vela operator added -> kernel ops
    kinds: dict[str, int] = field(default_factory=dict)  # operation kind -> kernel ops
    traffic: dict[str, list[int]] = field(default_factory=dict)  # memory -> [read, written]
    vela_cycles: int = 0  # Vela's estimate of its scheduled operations (op cycles)
    shape: OpShape | None = None  # its costliest MAC operation's
    shape_cycles: int = 0
    cpu_ops: list[str] = field(default_factory=list)  # "op (reason)"
    # what its int8 output keeps of its signal on the calibration inputs (quantize/)
    output_sqnr_db: float | None = None
    output_clipped: float = 0.0

    @property
    def key(self) -> str:
        return self.source.key

    def mac_utilisation(self, peak_macs: int) -> float | None:
        return self.macs / (self.mac_cycles * peak_macs) if self.mac_cycles else None

    @property
    def bound(self) -> str:
        """What most of its cycles are: "compute", "memory" or "lowering" ("" without cycles)."""
        added = sum(self.added_cycles.values())
        memory = self.memory_bound_cycles
        compute = self.cycles - added - memory
        if not self.cycles:
            return ""
        return max((compute, "compute"), (memory, "memory"), (added, "lowering"))[1]

    def add(self, op: OpFigures, row: VelaOperation | None, delegate: int) -> None:
        if delegate not in self.delegates:
            self.delegates.append(delegate)
        self._add_traffic(op)
        if op.kind == "dma":
            self.dma_ops += 1
            self.dma_cycles += op.cycles
            return
        self.npu_ops += op.kernels
        kind = op.kind or (row.operator if row else "?")
        self.kinds[kind] = self.kinds.get(kind, 0) + op.kernels
        self.cycles += op.cycles
        self.compute_cycles += op.compute
        self.macs += op.macs
        added = row.added if row is not None else ""
        if added:
            self.added_ops[added] = self.added_ops.get(added, 0) + op.kernels
            self.added_cycles[added] = self.added_cycles.get(added, 0) + op.cycles
            operator = row.operator if row is not None else "?"
            self.added_by[operator] = self.added_by.get(operator, 0) + op.kernels
        elif op.memory_bound:
            self.memory_bound_cycles += op.cycles
        if op.kind in MAC_KINDS or (not op.kind and op.macs):
            self.mac_cycles += op.compute
            if op.shape is not None and op.cycles > self.shape_cycles:
                self.shape, self.shape_cycles = op.shape, op.cycles

    def _add_traffic(self, op: OpFigures) -> None:
        for memory, (read, written) in op.traffic.items():
            moved = self.traffic.setdefault(memory, [0, 0])
            moved[0] += read
            moved[1] += written


@dataclass
class ProgramProfile:
    """A program's layers, in the order the NPU first runs them (CPU-only calls after)."""

    variant: str
    accelerator: str
    peak_macs: int  # the configuration's MACs per cycle (8-bit)
    kind: str  # "simulated", "estimate", or "simulated and estimate" (per delegate)
    layers: list[LayerProfile]
    delegates: int = 0
    total_cycles: int = 0  # every NPU kernel operation's cycles, summed
    unattributed_cycles: int = 0  # those of operations with no module path and source line
    unattributed_ops: int = 0
    dma_cycles: int = 0  # the DMAs' (weights, LUTs), which run beside the kernels
    pmu_total: int | None = None  # the predicted PMU NPU TOTAL (simulated delegates)
    measured: CycleFigures | None = None  # an FVP's or a board's figures of the whole program
    missing: list[str] = field(default_factory=list)  # why a delegate has no figures

    @property
    def coverage(self) -> float:
        """Share of the NPU cycles attributed to a layer with module path and source line."""
        if not self.total_cycles:
            return 1.0
        return 1.0 - self.unattributed_cycles / self.total_cycles

    def share(self, layer: LayerProfile) -> float:
        return layer.cycles / self.total_cycles if self.total_cycles else 0.0

    def ranked(self) -> list[LayerProfile]:
        """The layers with NPU cycles, costliest first."""
        return sorted((x for x in self.layers if x.cycles), key=lambda x: -x.cycles)


def _rows(figures: DelegateFigures, operations: tuple[VelaOperation, ...]):
    """Each operation with the Vela operation it belongs to: the first queued at or after it
    (Vela's queue holds the offset of each operation's last NPU_OP)."""
    rows = sorted(operations, key=lambda o: o.offset)
    i = 0
    for op in figures.operations:
        while i < len(rows) and rows[i].offset < op.offset:
            i += 1
        yield op, rows[i] if i < len(rows) else None


def _add_delegate(profile: ProgramProfile, layers: dict, program: Program, index: int) -> str:
    """Add one delegate's operations to the profile's layers; returns its figures' kind."""
    delegate = program.delegates[index]
    figures = delegate_figures(delegate, program)
    if figures is None:
        profile.missing.append(f"delegate {index}: no per-operation figures")
        return ""
    attribution = delegate.attribution
    layer_sources = attribution.layers if attribution is not None else ()
    for op, row in _rows(figures, attribution.operations if attribution is not None else ()):
        source = layer_sources[row.layer] if row is not None and row.layer >= 0 else None
        if op.kind == "dma":
            profile.dma_cycles += op.cycles
        else:
            profile.total_cycles += op.cycles
            if source is None or not source.located:
                profile.unattributed_cycles += op.cycles
                profile.unattributed_ops += op.kernels
        if source is None:
            continue
        layer = layers.setdefault(source.key, LayerProfile(source))
        layer.add(op, row, index)
    if attribution is not None:
        _add_vela_estimates(layers, attribution)
    if figures.pmu_total is not None:
        profile.pmu_total = (profile.pmu_total or 0) + figures.pmu_total
    return figures.kind


def _add_vela_estimates(layers: dict, attribution) -> None:
    """Vela's op-cycle estimate of each scheduled operation, to the layer of its operations."""
    owner = {op.scheduled: op.layer for op in attribution.operations}
    for estimate in attribution.estimates:
        position = owner.get(estimate.scheduled, -1)
        if position >= 0:
            key = attribution.layers[position].key
            if key in layers:
                layers[key].vela_cycles += estimate.op_cycles


def _add_cpu_and_accuracy(layers: dict[str, LayerProfile], program: Program) -> None:
    """The CPU operators of each call (a call only the CPU runs becomes a layer of its own), and
    what each layer's int8 output keeps of its signal."""
    for op in program.cpu_ops:
        if op.layer is not None:
            cpu = layers.setdefault(op.layer.key, LayerProfile(op.layer))
            cpu.cpu_ops.append(f"{op.op} ({op.reason})")
    for error in program.activation_errors:
        layer = layers.get(error.layer.key)
        worse = layer is not None and (
            layer.output_sqnr_db is None or error.sqnr_db < layer.output_sqnr_db
        )
        if layer is not None and worse:
            layer.output_sqnr_db, layer.output_clipped = error.sqnr_db, error.clipped


def profile_program(program: Program, measured: CycleFigures | None = None) -> ProgramProfile:
    """Per-layer figures of every delegate; `measured`: a run's cycle figures, kept when an FVP
    or a board measured them."""
    profile = ProgramProfile(
        program.variant, program.npu.accelerator, program.npu.macs, "", [], len(program.delegates)
    )
    layers: dict[str, LayerProfile] = {}
    kinds = {_add_delegate(profile, layers, program, i) for i in range(len(program.delegates))}
    kinds.discard("")
    profile.kind = " and ".join(sorted(kinds, reverse=True))
    _add_cpu_and_accuracy(layers, program)
    profile.layers = list(layers.values())
    if measured is not None and measured.kind == "measured":
        profile.measured = measured
    return profile
