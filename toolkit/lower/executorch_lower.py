"""ExecuTorch: lower a quantized graph to Ethos-U delegates and a .pte."""

from __future__ import annotations

import operator
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from executorch.backends.arm.util._factory import create_partitioner
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from ..artifacts import CpuOp, LayerSource, QuantizedModel, RewriteRecord, TensorQuant, TensorSpec
from ..child_process import alive
from ..console_capture import capture_fds
from ..errors import ToolError, UserError
from ..graph_info import node_layer, node_source
from ..npu import NpuConfig
from ..quantize.quantizer import compile_spec
from ..rewrite_names import LOWERING_REWRITES
from ..rewrites import lowering_rewrites
from .delegate_outputs import check_delegate_outputs
from .partition import capture_partition_rejections
from .tosa_sources import TosaSources, recorded_tosa_sources, tosa_digest
from .vela_runs import keep_vela_run, recorded_vela_runs

_IGNORED_CPU_TARGETS = {operator.getitem}
_QUANTIZE_NAMES = ("quantize_per_tensor",)
_DEQUANTIZE_NAMES = ("dequantize_per_tensor",)


@dataclass(frozen=True)
class LoweredGraph:
    graph_module: torch.fx.GraphModule  # edge graph with executorch_call_delegate nodes
    pte: bytes
    tosa_files: tuple[Path, ...]  # one per delegate, in call order
    payloads: tuple[bytes, ...]  # the vela_bin_stream of each delegate
    vela_dirs: tuple[Path, ...]  # the Vela run that made each payload: npz, CSV reports, log
    delegate_io: tuple[tuple[tuple[TensorQuant, ...], tuple[TensorQuant, ...]], ...]
    cpu_ops: tuple[CpuOp, ...]
    input_specs: tuple[TensorSpec, ...]
    output_specs: tuple[TensorSpec, ...]
    input_quant: tuple[TensorQuant | None, ...]
    output_quant: tuple[TensorQuant | None, ...]
    rewrites: tuple[RewriteRecord, ...] = ()  # done while lowering (fold-pad-into-conv)
    # per delegate: the call of the user's model each TOSA tensor came from (tosa_sources.py)
    tensor_sources: tuple[dict[str, LayerSource], ...] = ()


def _target_name(node: torch.fx.Node) -> str:
    return str(getattr(node.target, "__name__", node.target))


def _is_delegate_call(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and "executorch_call_delegate" in str(node.target)


def _tensor_quant(node: torch.fx.Node) -> TensorQuant:
    # quantize_per_tensor / dequantize_per_tensor(input, scale, zero_point, qmin, qmax, dtype)
    args = cast("tuple[object, float, int, int, int, torch.dtype]", node.args[:6])
    _x, scale, zero_point, qmin, qmax, dtype = args
    return TensorQuant(
        float(scale), int(zero_point), int(qmin), int(qmax), str(dtype).replace("torch.", "")
    )


def _is_q(node, names) -> bool:
    """Is node one of the named ops ("quantized_decomposed.quantize_per_tensor.default" has
    the op name quantize_per_tensor)?"""
    if node.op != "call_function":
        return False
    parts = _target_name(node).split(".")
    return len(parts) >= 2 and parts[-2] in names


def _spec(node: torch.fx.Node) -> TensorSpec:
    value = node.meta["val"]
    return TensorSpec(tuple(int(d) for d in value.shape), str(value.dtype).replace("torch.", ""))


def _delegate_io(call: torch.fx.Node):
    inputs = tuple(
        _tensor_quant(a)
        for a in call.args[1:]
        if isinstance(a, torch.fx.Node) and _is_q(a, _QUANTIZE_NAMES)
    )
    outputs = []
    for item in sorted(  # getitem(call, index)
        (u for u in call.users if u.target is operator.getitem), key=lambda u: cast(int, u.args[1])
    ):
        consumers = [u for u in item.users if _is_q(u, _DEQUANTIZE_NAMES)]
        if consumers:
            outputs.append(_tensor_quant(consumers[0]))
    return inputs, tuple(outputs)


def _boundary_quant(graph: torch.fx.GraphModule):
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    inputs = []
    for p in placeholders:
        users = [u for u in p.users if _is_q(u, _QUANTIZE_NAMES)]
        inputs.append(_tensor_quant(users[0]) if users else None)
    output_node = next(n for n in graph.graph.nodes if n.op == "output")
    outputs = [
        _tensor_quant(o) if isinstance(o, torch.fx.Node) and _is_q(o, _DEQUANTIZE_NAMES) else None
        for o in output_node.args[0]
    ]
    specs_in = tuple(_spec(p) for p in placeholders)
    specs_out = tuple(_spec(o) for o in output_node.args[0])
    return tuple(inputs), tuple(outputs), specs_in, specs_out


def _cpu_ops(graph: torch.fx.GraphModule, rejections: dict[str, str]) -> tuple[CpuOp, ...]:
    ops = []
    for node in graph.graph.nodes:
        if (
            node.op != "call_function"
            or _is_delegate_call(node)
            or node.target in _IGNORED_CPU_TARGETS
        ):
            continue
        name = _target_name(node)
        if _is_q(node, _QUANTIZE_NAMES + _DEQUANTIZE_NAMES) and _at_io_boundary(node):
            continue  # the model's own float interface: quantize in, dequantize out
        reason = rejections.get(node.name, "not claimed by the Ethos-U partitioner")
        ops.append(
            CpuOp(name.split("::")[-1], node.name, node_source(node), reason, node_layer(node))
        )
    return tuple(ops)


def _at_io_boundary(node: torch.fx.Node) -> bool:
    """A quantize fed by a model input, or a dequantize feeding only the model output."""
    if _is_q(node, _QUANTIZE_NAMES):
        return isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder"
    return all(u.op == "output" for u in node.users)


def lower(
    quantized: QuantizedModel,
    npu: NpuConfig,
    work_dir: Path,
    rewrites: tuple[str, ...] = LOWERING_REWRITES,
    extra_vela: tuple[str, ...] = (),
) -> LoweredGraph:
    """quantized graph -> edge program with Ethos-U delegates -> .pte bytes. `rewrites`: those
    of them that run while lowering (fold-pad-into-conv); `extra_vela`: Vela options."""
    # Not under work_dir: ExecuTorch passes this path to Vela in a command line it joins and
    # splits on spaces (arm_vela.vela_compile), so a path with a space would break Vela.
    remove_orphaned_dump_folders()
    dump_dir = Path(tempfile.mkdtemp(prefix=f"{_DUMP_PREFIX}{os.getpid()}-"))
    try:  # removed whatever ends the lowering (an interrupt included)
        return _lower(quantized, npu, work_dir, rewrites, extra_vela, dump_dir)
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)


_DUMP_PREFIX = "etk-lower-"


def remove_orphaned_dump_folders() -> None:
    """Remove the dump folders of lowerings whose process is gone (killed: no finally ran)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_DUMP_PREFIX}*-*"):
        pid = folder.name[len(_DUMP_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not alive(int(pid)) and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)


def _lower(
    quantized: QuantizedModel,
    npu: NpuConfig,
    work_dir: Path,
    rewrites: tuple[str, ...],
    extra_vela: tuple[str, ...],
    dump_dir: Path,
) -> LoweredGraph:
    spec = compile_spec(npu, extra_vela)
    try:
        program = torch.export.export(quantized.graph_module, quantized.example_inputs)
        with (
            capture_partition_rejections() as rejections,
            capture_fds() as log,
            lowering_rewrites(rewrites) as rewrite_records,
            recorded_vela_runs(dump_dir / "vela") as vela_runs,
            recorded_tosa_sources() as tosa_graphs,
        ):
            edge = to_edge_transform_and_lower(
                program,
                partitioner=[create_partitioner(spec)],
                compile_config=EdgeCompileConfig(_check_ir_validity=False),
            )
            graph = edge.exported_program().module()  # before to_executorch() rewrites it
            pte = edge.to_executorch().buffer
    except (Exception, SystemExit) as exc:  # many types, all meaning lowering failed; Vela's
        # argument parser exits instead of raising
        if isinstance(exc, (ToolError, UserError)):  # a UserError: Vela's 16x8 refusal
            raise
        raise ToolError(f"ExecuTorch lowering failed: {type(exc).__name__}: {exc}") from exc
    (work_dir / "lowering.log").write_text(log.text)
    calls = [n for n in graph.graph.nodes if _is_delegate_call(n)]
    check_delegate_outputs(graph, calls)
    payloads = tuple(getattr(graph, c.args[0].target).processed_bytes for c in calls)
    vela_dirs = tuple(
        keep_vela_run(vela_runs, payload, index, work_dir) for index, payload in enumerate(payloads)
    )
    tosa_files = tuple(work_dir / f"delegate{index}.tosa" for index in range(len(calls)))
    input_quant, output_quant, input_specs, output_specs = _boundary_quant(graph)
    sources = tuple(_sources_of(path, tosa_graphs) for path in tosa_files)
    return LoweredGraph(
        graph,
        pte,
        tosa_files,
        payloads,
        vela_dirs,
        tuple(_delegate_io(c) for c in calls),
        _cpu_ops(graph, rejections),
        input_specs,
        output_specs,
        input_quant,
        output_quant,
        rewrite_records(),
        sources,
    )


def _sources_of(tosa_path: Path, graphs: list[TosaSources]) -> dict[str, LayerSource]:
    """The recorded sources of the TOSA graph Vela compiled into this delegate ({} if none)."""
    digest = tosa_digest(tosa_path.read_bytes())
    return next((g.tensors for g in graphs if g.digest == digest), {})
