"""Command streams that compute wrong results on any Ethos-U, found from their registers at
compile time.

A convolution or pool whose padding on one side reaches its (dilated) kernel extent computes a
whole row or column of outputs from padding alone. A TOSA graph asks for that only when one of
its own convolutions or pools is padded that much (a 1x1 convolution with padding=1, say); when
none is, the stream does not compute what the graph asks. Vela 5.1.0 emits such streams for a
batched 1x1 convolution that reads a CLAMP it fused (rewrites/batched_conv.py): the next
convolution's IFM covers 4 of 16 tokens and pads the other 12. The check reads registers only;
it needs neither a run nor the simulator.
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
from ..sim.families import commands, decodes
from ..sim.kernel import NO_UPSCALE, kernel_from
from ..sim.payload import load_payload
from ..sim.registers import Registers
from .tosa_graph import OP_NAMES

_WINDOWED = ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL")
_KIND = {"NPU_OP_CONV": "conv", "NPU_OP_DEPTHWISE": "depthwise", "NPU_OP_POOL": "pool"}


@dataclass(frozen=True)
class VelaProblem:
    """An NPU operation that does not compute what the TOSA graph asks."""

    delegate: int
    offset: int | None  # command-stream offset of its NPU_OP command; None: the whole program
    operation: str  # conv, depthwise, pool; outputs
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


def padded_windows(registers: Registers) -> str | None:
    """What a windowed operation reads when a whole output row or column lies in its padding."""
    kernel = kernel_from(registers)
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
class _Graph:
    windowed: dict[str, _Windowed]  # by output tensor
    producers: dict[str, tuple[str, tuple[str, ...]]]  # output tensor -> (op, inputs)
    outputs: tuple[str, ...]  # the graph's outputs

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


def _read_graph(tosa: Path | bytes) -> _Graph:
    data = tosa if isinstance(tosa, bytes) else Path(tosa).read_bytes()
    graph = TosaGraph.GetRootAsTosaGraph(data, 0)
    windowed, producers = {}, {}
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        for b in range(region.BlocksLength()):
            block = region.Blocks(b)
            shapes = {
                block.Tensors(t).Name().decode(): tuple(
                    int(d) for d in block.Tensors(t).ShapeAsNumpy()
                )
                for t in range(block.TensorsLength())
            }
            for i in range(block.OperatorsLength()):
                operator = block.Operators(i)
                name = OP_NAMES.get(operator.Op(), "")
                inputs = tuple(operator.Inputs(j).decode() for j in range(operator.InputsLength()))
                outputs = [operator.Outputs(j).decode() for j in range(operator.OutputsLength())]
                for output in outputs:
                    producers[output] = (name, inputs)
                if name in _ATTRIBUTES and outputs:
                    windowed[outputs[0]] = _windowed(operator, name, inputs, shapes)
    main = graph.Regions(0).Blocks(0)
    returned = tuple(main.Outputs(i).decode() for i in range(main.OutputsLength()))
    return _Graph(windowed, producers, returned)


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
    for; () for an NPU the decoder does not know or a graph that pads past its kernels."""
    if not decodes(npu.accelerator) or tosa is None:
        return ()
    program, graph = load_payload(payload), _read_graph(tosa)
    dropped = _dropped_outputs(index, len(program.outputs), graph.outputs)
    if dropped is not None:
        return (dropped,)
    if graph.pads_past_kernel:
        return ()
    stream = program.command_stream
    problems = []
    for command, values in commands(npu.accelerator).operation_registers(stream):
        if command.name not in _WINDOWED or values is None:
            continue
        reads = padded_windows(Registers(values, command))
        if reads is not None:
            problems.append(VelaProblem(index, command.offset, _KIND[command.name], reads))
    if problems:
        problems = [_named(p, tosa, graph, npu) for p in problems]
    return tuple(problems)


def graph_outputs(tosa: Path | bytes) -> tuple[str, ...]:
    return _read_graph(tosa).outputs


def _dropped_outputs(index: int, written: int, wanted: tuple[str, ...]) -> VelaProblem | None:
    """Vela 5.1.0 can drop a delegate output (seen: a UNet's skip tensor at batch size 2, whose
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
