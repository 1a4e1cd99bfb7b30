"""Command streams that compute wrong results on any Ethos-U, found from their registers at
compile time.

A convolution or pool whose padding on one side reaches its (dilated) kernel extent computes a
whole row or column of outputs from padding alone. A TOSA graph asks for that only when one of
its own convolutions or pools is padded that much (a 1x1 convolution with padding=1, say); when
none is, the stream does not compute what the graph asks. Vela 5.1.0 emitted such streams for a
batched 1x1 convolution that reads a CLAMP it fused (rewrites/batched_conv.py): the next
convolution's IFM covered 4 of 16 tokens and padded the other 12 (5.2.0 compiles it right).

Ethos-U55/U65 run a TOSA MATMUL as, per column of B, an elementwise MUL of A's rows by that
column broadcast, then a channel-sum POOL. The MUL must read A's channels and no more, and when
Vela runs the batches one after another, batch b's MULs must read another address than batch
0's. Vela 5.1.0 and 5.2.0 break both when A is a SLICE they read in place
(rewrites/sliced_matmul.py).

The checks read registers and the delegate's TOSA graph only; they need neither a run nor the
simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tosa.AvgPool2dAttribute import AvgPool2dAttribute
from tosa.Conv2dAttribute import Conv2dAttribute
from tosa.DepthwiseConv2dAttribute import DepthwiseConv2dAttribute
from tosa.MaxPool2dAttribute import MaxPool2dAttribute
from tosa.TosaGraph import TosaGraph

from ..artifacts import Program
from ..npu import NpuConfig
from ..sim.commands import SYNC_OPERATIONS
from ..sim.families import NpuFamily, commands, decodes, family_of
from ..sim.kernel import NO_UPSCALE
from ..sim.payload import load_payload
from ..sim.registers import Registers
from .tosa_graph import OP_NAMES

_WINDOWED = ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL")
_MUL, _REDUCE_SUM = 0, 2  # NPU_OP_ELEMENTWISE and NPU_OP_POOL parameters
_BROADCAST_W = 2  # IFM2_BROADCAST: bit 0 H, bit 1 W, bit 2 C
_KIND = {"NPU_OP_CONV": "conv", "NPU_OP_DEPTHWISE": "depthwise", "NPU_OP_POOL": "pool"}


@dataclass(frozen=True)
class VelaProblem:
    """An NPU operation that does not compute what the TOSA graph asks."""

    delegate: int
    offset: int | None  # command-stream offset of its NPU_OP command; None: the whole program
    operation: str  # conv, depthwise, pool; elementwise MUL (a MATMUL's); outputs
    reads: str  # what its registers read (what the program writes)
    tensor: str = ""  # the TOSA tensor Vela scheduled it for, where known
    asks: str = ""  # what the TOSA operation behind it asks, where known

    def describe(self) -> str:
        if self.offset is None:
            return (
                f"delegate {self.delegate}: {self.reads}; {self.asks}: this program computes "
                "wrong results on the NPU"
            )
        owner = f" (Vela's operation for TOSA tensor '{self.tensor}')" if self.tensor else ""
        asks = self.asks or "no operation of the TOSA graph asks for that"
        return (
            f"delegate {self.delegate}: {self.operation} at command-stream offset "
            f"{self.offset:#x}{owner} {self.reads}; {asks}: this program computes wrong "
            "results on the NPU"
        )

    def to_dict(self) -> dict:
        return {
            "delegate": self.delegate,
            "offset": self.offset,
            "operation": self.operation,
            "reads": self.reads,
            "tensor": self.tensor,
            "tosa": self.asks,
        }


def padded_windows(registers: Registers, npu_family: NpuFamily) -> str | None:
    """What a windowed operation reads when a whole output row or column lies in its padding
    (the window as the NPU's family reads it from the registers)."""
    kernel = npu_family.kernel(registers)
    if kernel.upscale != NO_UPSCALE:  # transposed convolutions pad by design
        return None
    rows = (kernel.height - 1) * kernel.dilation_y + 1
    columns = (kernel.width - 1) * kernel.dilation_x + 1
    sides = {
        "IFM_PAD_TOP": (kernel.pad_top, rows),
        "IFM_PAD_BOTTOM": (kernel.pad_bottom, rows),
        "IFM_PAD_LEFT": (kernel.pad_left, columns),
        "IFM_PAD_RIGHT": (kernel.pad_right, columns),
    }
    padded = [f"{name} {pad}" for name, (pad, extent) in sides.items() if pad >= extent]
    if not padded:
        return None
    ofm_h, ofm_w = registers.get("OFM_HEIGHT_M1") + 1, registers.get("OFM_WIDTH_M1") + 1
    ifm_h, ifm_w = kernel.ifm_extent(ofm_h, ofm_w)
    return (
        f"reads an IFM of {ifm_h}x{ifm_w} with {', '.join(padded)} for a {kernel.height}x"
        f"{kernel.width} kernel into an OFM of {ofm_h}x{ofm_w} (IFM_STRIDE_Y "
        f"{registers.get('IFM_STRIDE_Y', 0)}): whole output rows or columns from padding alone"
    )


_ATTRIBUTES = {
    "CONV2D": Conv2dAttribute,
    "DEPTHWISE_CONV2D": DepthwiseConv2dAttribute,
    "AVG_POOL2D": AvgPool2dAttribute,
    "MAX_POOL2D": MaxPool2dAttribute,
}


@dataclass(frozen=True)
class _Windowed:
    """A TOSA convolution or pool: what it reads and how it pads."""

    op: str
    input: str
    input_shape: tuple[int, ...]
    pad: tuple[int, ...]  # top, bottom, left, right
    extent: tuple[int, int] | None  # dilated kernel rows, columns; None if unknown

    @property
    def pads_past_kernel(self) -> bool:
        if self.extent is None:
            return True  # unknown: do not judge the graph
        rows, columns = self.extent
        top, bottom, left, right = self.pad
        return top >= rows or bottom >= rows or left >= columns or right >= columns


@dataclass(frozen=True)
class _Matmul:
    """A TOSA MATMUL: A (N, H, C) times B (N, C, W)."""

    output: str
    a: str
    b: str
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    a_source: str  # what A is read from: ", a SLICE of 'x' (3x1x2x16x16)", or ""

    @property
    def batches(self) -> int:
        return self.a_shape[0]

    def describe(self, batch: int | None = None) -> str:
        """What the MATMUL multiplies: "'out' multiplies [batch b of ]'a' (NxHxC[, a SLICE of
        ...]) by [batch b of ]'b' (NxCxW)"."""
        of = "" if batch is None else f"batch {batch} of "
        a_shape, b_shape = ("x".join(map(str, s)) for s in (self.a_shape, self.b_shape))
        return (
            f"'{self.output}' multiplies {of}'{self.a}' ({a_shape}{self.a_source}) by {of}"
            f"'{self.b}' ({b_shape})"
        )


@dataclass(frozen=True)
class _Graph:
    windowed: dict[str, _Windowed]  # by output tensor
    producers: dict[str, tuple[str, tuple[str, ...]]]  # output tensor -> (op, inputs)
    outputs: tuple[str, ...]  # the graph's outputs
    matmuls: tuple[_Matmul, ...] = ()

    @property
    def pads_past_kernel(self) -> bool:
        return any(w.pads_past_kernel for w in self.windowed.values())

    def behind(self, tensor: str) -> _Windowed | None:
        """The convolution or pool whose result `tensor` is, through per-element operations."""
        for _ in range(8):
            if tensor in self.windowed:
                return self.windowed[tensor]
            op, inputs = self.producers.get(tensor, ("", ()))
            if op not in ("CLAMP", "RESCALE", "TABLE") or not inputs:
                return None
            tensor = inputs[0]
        return None


def _read_block(block, windowed: dict, producers: dict, shapes: dict, matmuls: list) -> None:
    """One TOSA block's tensor shapes, producers, windowed operators and MATMULs, added."""
    shapes.update(
        {
            block.Tensors(t).Name().decode(): tuple(int(d) for d in block.Tensors(t).ShapeAsNumpy())
            for t in range(block.TensorsLength())
        }
    )
    for i in range(block.OperatorsLength()):
        operator = block.Operators(i)
        name = OP_NAMES.get(operator.Op(), "")
        inputs = tuple(operator.Inputs(j).decode() for j in range(operator.InputsLength()))
        outputs = [operator.Outputs(j).decode() for j in range(operator.OutputsLength())]
        for output in outputs:
            producers[output] = (name, inputs)
        if name in _ATTRIBUTES and outputs:
            windowed[outputs[0]] = _windowed(operator, name, inputs, shapes)
        if name == "MATMUL" and outputs and len(inputs) >= 2:
            matmuls.append((outputs[0], inputs[0], inputs[1]))


def _read_graph(tosa: Path | bytes) -> _Graph:
    data = tosa if isinstance(tosa, bytes) else Path(tosa).read_bytes()
    graph = TosaGraph.GetRootAsTosaGraph(data, 0)
    windowed: dict = {}
    producers: dict = {}
    shapes: dict = {}
    matmuls: list = []
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        for b in range(region.BlocksLength()):
            _read_block(region.Blocks(b), windowed, producers, shapes, matmuls)
    main = graph.Regions(0).Blocks(0)
    returned = tuple(main.Outputs(i).decode() for i in range(main.OutputsLength()))
    found = tuple(
        _Matmul(out, a, b, shapes.get(a, ()), shapes.get(b, ()), _source(a, producers, shapes))
        for out, a, b in matmuls
        if len(shapes.get(a, ())) == 3 and len(shapes.get(b, ())) == 3
    )
    return _Graph(windowed, producers, returned, found)


def _source(tensor: str, producers, shapes) -> str:
    """', a SLICE of 'x' (shape)' when `tensor` is a SLICE through RESHAPEs, else ''."""
    for _ in range(8):
        op, inputs = producers.get(tensor, ("", ()))
        if op == "SLICE" and inputs:
            shape = "x".join(map(str, shapes.get(inputs[0], ())))
            return f", a SLICE of '{inputs[0]}' ({shape})"
        if op != "RESHAPE" or not inputs:
            return ""
        tensor = inputs[0]
    return ""


def _windowed(operator, name: str, inputs: tuple[str, ...], shapes) -> _Windowed:
    table = operator.Attribute()
    attribute = _ATTRIBUTES[name]()
    attribute.Init(table.Bytes, table.Pos)
    pad = tuple(int(p) for p in attribute.PadAsNumpy())
    if name.endswith("POOL2D"):
        kernel, dilation = [int(k) for k in attribute.KernelAsNumpy()], [1, 1]
    else:
        weight = shapes.get(inputs[1], ()) if len(inputs) > 1 else ()
        if len(weight) != 4:
            return _Windowed(name, inputs[0], shapes.get(inputs[0], ()), pad, None)
        # CONV2D weights are OHWI, DEPTHWISE_CONV2D weights HWCM
        kernel = list(weight[1:3]) if name == "CONV2D" else list(weight[0:2])
        dilation = [int(d) for d in attribute.DilationAsNumpy()]
    extent = ((kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1)
    return _Windowed(name, inputs[0], shapes.get(inputs[0], ()), pad, extent)


def graph_pads_past_kernel(tosa: Path | bytes) -> bool:
    """Whether any convolution or pool of the TOSA graph pads a side by its kernel extent or
    more (then whole rows of padding are what the graph asks)."""
    return _read_graph(tosa).pads_past_kernel


def check_delegate(
    index: int, payload: bytes, tosa: Path | None, npu: NpuConfig
) -> tuple[VelaProblem, ...]:
    """The operations of one delegate's command stream that no operation of its TOSA graph asks
    for; () for an NPU the decoder does not know. Windows in padding are not judged in a graph
    that pads past its kernels itself."""
    if not decodes(npu.accelerator) or tosa is None:
        return ()
    program, graph = load_payload(payload), _read_graph(tosa)
    dropped = _dropped_outputs(index, len(program.outputs), graph.outputs)
    if dropped is not None:
        return (dropped,)
    operations = commands(npu.accelerator).operation_registers(program.command_stream)
    problems = []
    if not graph.pads_past_kernel:
        for command, values in operations:
            if command.name not in _WINDOWED or values is None:
                continue
            reads = padded_windows(Registers(values, command), family_of(npu.accelerator))
            if reads is not None:
                problems.append(VelaProblem(index, command.offset, _KIND[command.name], reads))
        problems = [_named(p, tosa, graph, npu) for p in problems]
    if graph.matmuls:
        problems.extend(_matmul_problems(index, operations, graph.matmuls))
    return tuple(problems)


def graph_outputs(tosa: Path | bytes) -> tuple[str, ...]:
    return _read_graph(tosa).outputs


def _dropped_outputs(index: int, written: int, wanted: tuple[str, ...]) -> VelaProblem | None:
    """Vela 5.1.0 and 5.2.0 can drop a delegate output (seen: a UNet's skip tensor at batch size 2, whose
    two inverse transposes it merged): the next delegate then reads a buffer nothing wrote."""
    if written >= len(wanted):
        return None
    return VelaProblem(
        index,
        None,
        "outputs",
        f"the command stream writes {written} output(s)",
        asks=f"the TOSA graph has {len(wanted)} ({', '.join(wanted)})",
    )


def program_problems(program: Program) -> tuple[VelaProblem, ...]:
    """check_delegate over a compiled program's delegates (a .tflite model's have no TOSA graph
    to judge against)."""
    return tuple(
        problem
        for delegate in program.delegates
        if delegate.payload
        for problem in check_delegate(
            delegate.index, delegate.payload, delegate.tosa_path, program.npu
        )
    )


def _named(problem: VelaProblem, tosa: Path, graph: _Graph, npu: NpuConfig) -> VelaProblem:
    """The problem with the TOSA tensor Vela scheduled the operation for (one more Vela run with
    its optimiser database, made only when there is a problem to name)."""
    assert problem.offset is not None
    from ..sim.vela_estimate import scheduled_operation

    owner = scheduled_operation(tosa, npu, problem.offset)
    if owner is None:
        return problem
    behind = graph.behind(owner.name)
    asks = ""
    if behind is not None:
        shape = "x".join(map(str, behind.input_shape))
        asks = f"the TOSA {behind.op} reads '{behind.input}' ({shape}) with pad {list(behind.pad)}"
    return VelaProblem(
        problem.delegate, problem.offset, problem.operation, problem.reads, owner.name, asks
    )


@dataclass(frozen=True)
class _Column:
    """One column of a MATMUL as Vela runs it: an elementwise MUL of A's rows by the column, then
    the channel-sum POOL that reads its product."""

    offset: int  # the MUL's command-stream offset
    a: tuple[int, ...]  # where the MUL reads A: IFM_REGION, IFM_BASE0..3
    rows: int  # IFM height: 1 when Vela runs the batches one at a time
    width: int
    depth: int
    writes: tuple[int, int]  # the POOL's OFM_REGION, OFM_BASE0


def _columns(operations) -> list[list[_Column]]:
    """Runs of MUL + REDUCE_SUM pairs with nothing else between them (sync operations aside)."""
    kernels = [(c, v) for c, v in operations if c.name not in SYNC_OPERATIONS and v is not None]
    runs: list[list[_Column]] = [[]]
    i = 0
    while i < len(kernels):
        (mul, m), pair = kernels[i], kernels[i + 1] if i + 1 < len(kernels) else None
        if pair is not None and _is_column(mul, m, *pair):
            pool = pair[1]
            a = tuple(m.get(r, 0) for r in ("IFM_REGION", *(f"IFM_BASE{k}" for k in range(4))))
            runs[-1].append(
                _Column(
                    mul.offset,
                    a,
                    m.get("IFM_HEIGHT0_M1", 0) + 1,
                    m.get("IFM_WIDTH0_M1", 0) + 1,
                    m.get("IFM_DEPTH_M1", 0) + 1,
                    (pool.get("OFM_REGION", 0), pool.get("OFM_BASE0", 0)),
                )
            )
            i += 2
            continue
        if runs[-1]:
            runs.append([])
        i += 1
    return [run for run in runs if run]


def _is_column(mul, m: dict, pool, p: dict) -> bool:
    """A MUL whose second operand (B's column) is broadcast along A's rows (IFM2_BROADCAST's W
    bit), then a REDUCE_SUM of its product."""
    return (
        mul.name == "NPU_OP_ELEMENTWISE"
        and mul.param == _MUL
        and m.get("IFM2_BROADCAST", 0) & _BROADCAST_W
        and pool.name == "NPU_OP_POOL"
        and pool.param == _REDUCE_SUM
        and (p.get("IFM_REGION"), p.get("IFM_BASE0")) == (m.get("OFM_REGION"), m.get("OFM_BASE0"))
    )


def _matmul_problems(index: int, operations, matmuls: tuple[_Matmul, ...]) -> list[VelaProblem]:
    """Vela's MUL + REDUCE_SUM columns of a TOSA MATMUL that cannot compute it: a MUL reading
    more channels than A has (Vela 5.1.0 with A a channel SLICE: the whole row's), or batch b
    reading the same A as batch 0 while writing other outputs (A a SLICE along the batches)."""
    problems = []
    for run in _columns(operations):
        matmul = _owner(run, matmuls)
        if matmul is None:
            continue
        batches, _, depth = matmul.a_shape
        first = run[0]
        if first.depth > depth:
            problems.append(
                VelaProblem(
                    index,
                    first.offset,
                    "elementwise MUL",
                    f"reads the MATMUL's first operand with IFM depth {first.depth} (IFM_BASE0 "
                    f"{first.a[1]}, region {first.a[0]}), where the operand has {depth} channels",
                    asks=f"the TOSA MATMUL {matmul.describe()}",
                )
            )
            continue
        if first.rows != 1 or batches < 2:
            continue  # all batches in one pass (as rows): nothing per batch to compare
        per_matmul = batches * matmul.b_shape[2]
        for start in range(0, len(run), per_matmul):
            problem = _same_rows(index, run[start : start + per_matmul], matmul)
            if problem is not None:
                problems.append(problem)
    return problems


def _owner(run: list[_Column], matmuls: tuple[_Matmul, ...]) -> _Matmul | None:
    """The TOSA MATMUL a run of columns computes (one or more back to back): A's rows as the
    MUL's IFM width, and B's columns for each batch, all batches at once (IFM height N) or one at
    a time; one whose A has the MUL's depth first."""
    first = run[0]
    fitting = [
        m
        for m in matmuls
        if m.a_shape[1] == first.width
        and first.rows in (1, m.batches)
        and not len(run) % (m.b_shape[2] * (m.batches if first.rows == 1 else 1))
    ]
    exact = [m for m in fitting if m.a_shape[2] == first.depth]
    candidates = exact or fitting
    return candidates[0] if candidates else None


def _same_rows(index: int, chunk: list[_Column], matmul: _Matmul) -> VelaProblem | None:
    """The first batch of one MATMUL's columns that reads batch 0's A and writes elsewhere."""
    per_batch = matmul.b_shape[2]
    batch0 = chunk[:per_batch]
    for b in range(1, matmul.batches):
        batch = chunk[b * per_batch : (b + 1) * per_batch]
        if batch[0].a != batch0[0].a or {c.writes for c in batch} & {c.writes for c in batch0}:
            continue
        region, base = batch[0].a[0], batch[0].a[1]
        return VelaProblem(
            index,
            batch[0].offset,
            "elementwise MUL",
            f"reads the MATMUL's first operand at IFM_BASE0 {base} (region {region}) for batch "
            f"{b} of {matmul.batches}, as batch 0's MUL at {batch0[0].offset:#x} does",
            asks=f"the TOSA MATMUL {matmul.describe(b)}",
        )
    return None
