"""Speedups of ExecuTorch's ExportPass retrace (torch 2.13 / ExecuTorch 1.5.1), part of
lower/upstream_speedups.py: most Arm passes re-create every node of the graph through
ExportPass (~45 retraces in a lowering), and a retrace spends most of its time on per-node
bookkeeping that gives the same result as the retrace before it.

fast-pass-pytree: ExportPass maps ProxyValue -> data / proxy over each node's arguments, and its
output values to fake tensors, with torch's generic pytree (tree_map_only, tree_map), which
flattens into a TreeSpec and rebuilds: ~8% of a GRU lowering. The arguments are plain tuples,
lists and dicts of leaves; this maps those directly, building the same containers (tuple ->
tuple, list -> list, dict -> dict in key order), and hands any other registered pytree node
(namedtuples, torch's immutable collections, ...) and any call with several trees or an is_leaf
to torch's pytree. A leaf is what torch's pytree calls one (its type is not a registered node
type), decided per type as torch's tree_is_leaf does. Only the `pytree` name inside
executorch.exir.pass_base is replaced.

reuse-fake-results: each retraced node runs its operator on fake tensors to get its output's
metadata (FakeTensorMode's own cache still builds a key from every argument's metadata and a new
output tensor: ~16% of a GRU lowering). A retrace of a node whose operator gets the very same
argument objects as in an earlier retrace (the same tensors, by identity, still of the same
dtype and shape, and equal scalars of the same type) gets the fake tensor that run returned:
fake kernels compute their output from the arguments' metadata alone (and, for the TOSA
dialect, the lowering's TOSA spec and shape environment, which are part of the key), so running
them again gives an equal tensor. Placeholders keep their values between retraces, so in a pass that changes nothing the
whole chain of values is reused; after a changed node its users run again. Not reused: views,
mutating, data-dependent and dynamic-shape operators, tensors of symbolic size, fake tensors carrying a constant (fake
constant propagation), and any argument of a type not listed here. Results are kept for the
current and the previous retrace only (ids of arguments stay valid: the entries hold them).

skip-unneeded-retraces: NormalizeTransposePass, ReplaceBrokenOpsWithFunctionalOpsPass,
ScalarToTensorPass and MemoryFormatOpsPass (edge conversion), and eight Arm passes (_REWRITES) are
ExportPass retraces whose call_operator rewrites only nodes of a kind (an aten.t, a view, a
Python scalar where the schema takes a tensor, a memory-format op, a mul with a bool operand, an
int32 or tensor clamp, a grouped convolution, a strided slice, a full of symbolic size, a pool or
convolution with symbolic padding, a no-op (RemoveNoopPass: a one-input concatenation, an
identity PAD or SLICE, a copy that keeps the dtype), a data-layout op of a dtype the TOSA
profile lacks (InsertDataLayoutCastsPass)); on the GRU keyword net none occurs, and each
retrace (~1 s) rebuilds the same graph. Such a pass is skipped when no node is
of its kind (tested from the node itself, as its call_operator tests it; _REWRITES) and the
graph is a retrace's output, not changed since (the same nodes, names, targets, arguments and
value objects, by identity): a retrace of a retrace's output re-creates each node with the same
target, arguments, name (names follow the order of the operators) and metadata, and a fake
value of the same metadata. Only the provenance (node.meta["from_node"]) keeps one pass less.
A skipped pass reports what it reports after such a retrace (ExportPass: modified;
ScalarToTensorPass: not modified) and does what its own call() does after it (RemoveNoopPass:
dead-code removal; _AFTER_RETRACE). For the same reason PropagateViewCopyPermute{Up,Down}Pass's
own closing retrace (_retrace, after dead-code removal) is skipped when its rewrites changed
nothing since its last one: 3 of its 6 retraces on the GRU keyword net.

reuse-compiled-forward: every GraphModule built or recompiled compiles its generated Python
source (~0.1 s for a 3,000-node graph); a retrace that rebuilds the same graph generates the
same source. The code object compiled from a source is reused for the same source text (each
module still executes it in its own globals, and its source is still registered for tracebacks
under its own name; the reused code object carries the first one's file name).

lazy-retrace-codegen: the GraphModule a retrace builds (ExportPass.call_submodule) generates and
compiles its Python source at once (~0.15 s for the GRU keyword net's 3,000 nodes), and the next
pass, which reads the graph, not the code, replaces it: ~5 s of a GRU lowering. Inside a retrace
a new plain GraphModule is torch's _LazyGraphModule (the source is generated when the module is
first called, or its code, str or pickle is asked for: the same source from the same graph),
which here also sets the pytree specs at once, as GraphModule.recompile does first, for code
that reads them without calling the module. Modules built elsewhere (export, the unlifted
program, deep copies) are generated as upstream does.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import torch
from executorch.backends.arm._passes import (
    DecomposeDynamicFullPass,
    DecomposeGroupedConvPass,
    DecomposeStridedSliceCopyPass,
    DecomposeTOSAUnsupportedClampPass,
    InsertDataLayoutCastsPass,
    InsertDynamicPaddingPass,
    PromoteBoolOperandsPass,
    RemoveNoopPass,
)
from executorch.backends.arm.tosa.specification import TosaLoweringContext, get_context_spec
from executorch.backends.transforms.propagate_view_copy_permute_pass import (
    PropagateViewCopyPermutePass,
)
from executorch.exir import pass_base
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from executorch.exir.graph_module import get_control_flow_submodules
from executorch.exir.pass_base import PassResult, ProxyValue
from executorch.exir.passes.dim_order_ops_registry import DimOrderOpsMap
from executorch.exir.passes.memory_format_ops_pass import MemoryFormatOpsPass
from executorch.exir.passes.normalize_transpose_pass import NormalizeTransposePass
from executorch.exir.passes.replace_broken_ops_with_function_ops_pass import (
    ReplaceBrokenOpsWithFunctionalOpsPass,
)
from executorch.exir.passes.scalar_to_tensor_pass import ScalarToTensorPass
from torch.fx import GraphModule
from torch.fx import graph_module as fx_graph_module
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.graph import _PyTreeCodeGen
from torch.fx.immutable_collections import immutable_dict, immutable_list
from torch.utils import _pytree as pytree

from .patching import patched

# --- fast-pass-pytree --------------------------------------------------------------------------

_LEAF_BY_TYPE: dict[type, bool] = {}


def _is_leaf_type(kind: type) -> bool:
    leaf = _LEAF_BY_TYPE.get(kind)
    if leaf is None:  # as torch's tree_is_leaf: namedtuples count as registered nodes
        node_type = pytree.namedtuple if pytree.is_namedtuple_class(kind) else kind
        leaf = _LEAF_BY_TYPE[kind] = node_type not in pytree.SUPPORTED_NODES
    return leaf


def _map(func: Callable[[Any], Any], tree: Any) -> Any:
    kind = type(tree)
    if kind is tuple:
        return tuple([_map(func, child) for child in tree])
    if kind is list:
        return [_map(func, child) for child in tree]
    if kind is dict:
        return {key: _map(func, child) for key, child in tree.items()}
    if _is_leaf_type(kind):
        return func(tree)
    return pytree.tree_map(func, tree)  # another registered node type: torch's own mapping


class _FastPytree:
    """torch.utils._pytree as executorch.exir.pass_base sees it, with tree_map and
    tree_map_only on one tree mapped directly; every other name is torch's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(pytree, name)

    @staticmethod
    def tree_map(func, tree, *rests, is_leaf=None):
        if rests or is_leaf is not None:
            return pytree.tree_map(func, tree, *rests, is_leaf=is_leaf)
        return _map(func, tree)

    @staticmethod
    def tree_map_only(type_or_types_or_pred, func, tree, is_leaf=None):
        if is_leaf is not None or not isinstance(type_or_types_or_pred, (type, tuple)):
            return pytree.tree_map_only(type_or_types_or_pred, func, tree, is_leaf=is_leaf)

        def only(leaf):
            return func(leaf) if isinstance(leaf, type_or_types_or_pred) else leaf

        return _map(only, tree)


def fast_pass_pytree() -> ContextManager[None]:
    return patched((pass_base, "pytree", _FastPytree()))


# --- reuse-fake-results ------------------------------------------------------------------------

_SCALARS = (
    bool,
    int,
    str,
    type(None),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)
_NOT_REUSED_TAGS = (
    torch.Tag.data_dependent_output,
    torch.Tag.dynamic_output_shape,
    torch.Tag.inplace_view,
    torch.Tag.nondeterministic_seeded,
)


_SEQUENCES = (tuple, list, immutable_list, torch.Size)
_MAPPINGS = (dict, immutable_dict)


class _NotReusable(Exception):
    pass


def _key(value: Any, held: list) -> Any:
    """A hashable stand-in for an argument: tensors by identity (held alive in `held`) and
    dtype and shape, scalars by type and value (floats by their exact bits), containers element
    by element."""
    kind = type(value)
    if isinstance(value, torch.Tensor):
        if getattr(value, "constant", None) is not None:
            raise _NotReusable  # fake constant propagation reads the constant's values
        shape = tuple(value.shape)
        if not all(type(size) is int for size in shape):
            raise _NotReusable  # a symbolic size (a SymInt does not hash)
        held.append(value)  # its metadata too: a tensor changed in place (.data =) misses
        return ("tensor", id(value), value.dtype, shape)
    if kind is float:
        return (float, value.hex())
    if kind in _SCALARS:
        return (kind, value)
    if kind in _SEQUENCES:
        return (kind, tuple(_key(v, held) for v in value))
    if kind in _MAPPINGS:
        return (dict, tuple((k, _key(v, held)) for k, v in value.items()))
    raise _NotReusable


_REUSABLE_OPS: dict[Any, bool] = {}


def _reusable_op(target: Any) -> bool:
    reusable = _REUSABLE_OPS.get(target)
    if reusable is None:
        op = target._op if isinstance(target, EdgeOpOverload) else target  # it wraps one
        reusable = _REUSABLE_OPS[target] = (
            isinstance(op, torch._ops.OpOverload)
            and not op.is_view
            and not op._schema.is_mutable
            and not any(tag in op.tags for tag in _NOT_REUSED_TAGS)
        )
    return reusable


class _FakeResults:
    """Fake results of the current retrace and of the one before, by _key."""

    def __init__(self) -> None:
        self.current: dict[Any, tuple[Any, list]] = {}
        self.previous: dict[Any, tuple[Any, list]] = {}

    def next_retrace(self) -> None:
        self.previous, self.current = self.current, {}

    def run(self, fake_mode: Any, target: Any, args: Any, kwargs: Any, call: Callable[[], Any]):
        if not _reusable_op(target):
            return call()
        held: list = [fake_mode]
        try:
            spec = TosaLoweringContext.tosa_spec_var.get(None)
            shape_env = TosaLoweringContext.shape_env_var.get(None)
            held += [spec, shape_env]
            key = (
                target,
                id(fake_mode),
                id(spec),
                id(shape_env),
                _key(args, held),
                _key(kwargs, held),
            )
        except _NotReusable:
            return call()
        entry = self.current.get(key) or self.previous.get(key)
        if entry is None:
            result = call()
            try:
                _key(result, [])  # a result carrying a constant (or of another kind): not kept
            except _NotReusable:
                return result
            entry = (result, held)
        self.current[key] = entry
        return entry[0]


def _fx_reusing(results: _FakeResults):
    def _fx(self, kind, target, args, kwargs, meta):  # ExecuTorch 1.5.1's _ExportPassBase._fx
        tree = pass_base.pytree  # the fast one when fast-pass-pytree is on too
        args_data, kwargs_data = tree.tree_map_only(ProxyValue, lambda x: x.data, (args, kwargs))

        def call():
            return getattr(self.interpreter, kind)(target, args_data, kwargs_data)

        if kind == "call_function":
            res_data = results.run(self.fake_tensor_mode, target, args_data, kwargs_data, call)
        else:
            res_data = call()
        args_proxy, kwargs_proxy = tree.tree_map_only(ProxyValue, lambda x: x.proxy, (args, kwargs))
        name = None
        if isinstance(target, torch._ops.OpOverload):
            name = self.tracer.graph._target_to_str(target.overloadpacket.__name__)
        res_proxy = self.tracer.create_proxy(kind, target, args_proxy, kwargs_proxy, name=name)
        res_proxy.node.meta.update(meta.data)
        self.tracer.set_metadata(res_proxy.node, res_data)
        return ProxyValue(res_data, res_proxy)

    return _fx


def reuse_fake_results() -> ContextManager[None]:
    base = pass_base._ExportPassBase
    original_call = base.call
    results = _FakeResults()

    def call(self, graph_module):
        results.next_retrace()
        return original_call(self, graph_module)

    return patched((base, "_fx", _fx_reusing(results)), (base, "call", call))


# --- skip-unneeded-retraces --------------------------------------------------------------------
# For each pass below, whether its call_operator would rewrite this node: a mirror of the
# condition under which it does more than `return super().call_operator(...)`, read from the
# node's own target, arguments and value; where an argument is not what the condition reads,
# the answer is yes (the pass runs).


def _arg(node: torch.fx.Node, index: int) -> Any:
    return node.args[index] if len(node.args) > index else None


def _dtype(value: Any) -> Any:
    val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else None


def _targeted(node: torch.fx.Node, pass_: Any) -> bool:  # ArmOpTargetedPass's own pre-scan
    return node.target in pass_.target_ops


def _promotes_bool(node: torch.fx.Node, pass_: Any) -> bool:  # PromoteBoolOperandsPass
    dtypes = [_dtype(arg) for arg in node.args]
    return _targeted(node, pass_) and (None in dtypes or torch.bool in dtypes)


def _decomposes_clamp(node: torch.fx.Node, pass_: Any) -> bool:  # DecomposeTOSAUnsupportedClamp
    if node.target in (exir_ops.edge.aten.clamp.Tensor, torch.ops.aten.clamp.Tensor):
        return True
    return _targeted(node, pass_) and _dtype(node) in (None, torch.int32)  # only int32 scalar


def _decomposes_grouped_conv(node: torch.fx.Node, pass_: Any) -> bool:  # DecomposeGroupedConv
    if not _targeted(node, pass_):
        return False
    groups, _transposed = DecomposeGroupedConvPass._get_groups_and_transposed(
        node.target, node.args
    )
    return groups is not None and groups != 1  # groups 1: left as it is


def _decomposes_strided_slice(node: torch.fx.Node, pass_: Any) -> bool:  # ...StridedSliceCopy
    step = _arg(node, 4)
    return _targeted(node, pass_) and len(node.args) == 5 and not (type(step) is int and step == 1)


def _decomposes_dynamic_full(node: torch.fx.Node, pass_: Any) -> bool:  # DecomposeDynamicFull
    if not _targeted(node, pass_):
        return False
    size = _arg(node, 0)
    return len(node.args) < 2 or (  # fewer: upstream's unpacking fails, let it
        isinstance(size, (list, tuple)) and any(type(dim) is not int for dim in size)
    )


def _inserts_dynamic_padding(node: torch.fx.Node, pass_: Any) -> bool:  # InsertDynamicPadding
    index = {
        exir_ops.backend.tosa.MAX_POOL2D.default: 3,
        exir_ops.backend.tosa.AVG_POOL2D.default: 5,
    }.get(node.target, 4)
    if not _targeted(node, pass_):
        return False
    padding = _arg(node, index)
    return len(node.args) <= index or (  # no padding argument: upstream's indexing fails
        isinstance(padding, (list, tuple)) and any(isinstance(p, torch.fx.Node) for p in padding)
    )


def _coerces_scalar(node: torch.fx.Node, pass_: Any) -> bool:  # ScalarToTensorPass
    """A Python scalar as a top-level argument the schema types Tensor (its try_coerce, applied
    per map_args)."""
    if isinstance(node.target, torch._ops.OpOverloadPacket):
        return True  # upstream would read the packet's schema
    op = node.target._op if isinstance(node.target, EdgeOpOverload) else node.target
    if not isinstance(op, torch._ops.OpOverload):
        return False  # ExportPass calls call_operator only for operator overloads
    for index, schema in enumerate(op._schema.arguments):
        if schema.name in node.kwargs:
            value = node.kwargs[schema.name]
        elif not schema.kwarg_only and index < len(node.args):
            value = node.args[index]
        else:
            continue
        if isinstance(value, (float, int, bool)) and isinstance(schema.type, torch.TensorType):
            return True
    return False


def _normalizes_transpose(node: torch.fx.Node, pass_: Any) -> bool:  # NormalizeTransposePass
    return node.target == torch.ops.aten.t.default


def _replaces_view(node: torch.fx.Node, pass_: Any) -> bool:  # ReplaceBrokenOpsWith...Pass
    if isinstance(node.target, torch._ops.OpOverloadPacket):
        return True  # upstream would read .is_view of the packet
    operator = isinstance(node.target, (torch._ops.OpOverload, EdgeOpOverload))
    return operator and getattr(node.target, "is_view", True)


def _replaces_memory_format(node: torch.fx.Node, pass_: Any) -> bool:  # MemoryFormatOpsPass
    return isinstance(node.target, EdgeOpOverload) and node.target in DimOrderOpsMap


def _static_shape(value: Any) -> tuple | None:  # RemoveNoopPass._get_static_shape, on nodes
    if isinstance(value, torch.fx.Node):
        if value.target != exir_ops.backend.tosa.CONST_SHAPE.default:
            return None
        value = _arg(value, 0)  # CONST_SHAPE's fake kernel returns its argument
    if not isinstance(value, (list, tuple)) or not all(type(dim) is int for dim in value):
        return None
    return tuple(value)


def _pad_or_slice_is_noop(node: torch.fx.Node) -> bool:  # RemoveNoopPass on a PAD or SLICE
    source = _arg(node, 0)
    val = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    is_pad = node.target == exir_ops.backend.tosa.PAD.default
    if not isinstance(val, torch.Tensor) or len(node.args) < (2 if is_pad else 3):
        return True  # not what the pass reads: let it run (and fail as upstream does)
    if is_pad:
        padding = _static_shape(_arg(node, 1))
        return padding is not None and len(padding) == 2 * val.dim() and not any(padding)
    shape = _static_shape(tuple(val.shape))
    starts, sizes = _static_shape(_arg(node, 1)), _static_shape(_arg(node, 2))
    return (
        starts is not None
        and sizes is not None
        and shape is not None
        and starts == (0,) * len(shape)
        and sizes == shape
    )


def _removes_noop(node: torch.fx.Node, pass_: Any) -> bool:  # RemoveNoopPass
    op = node.target
    if not _targeted(node, pass_):
        return False
    if op in pass_._single_input_concat_ops:
        inputs = _arg(node, 0)
        return isinstance(inputs, (list, tuple)) and len(inputs) == 1
    if op in (
        exir_ops.edge.aten.upsample_bilinear2d.vec,
        exir_ops.edge.aten.upsample_nearest2d.vec,
    ):
        return True  # none in the graphs this is for: let the pass decide
    if op in (exir_ops.backend.tosa.PAD.default, exir_ops.backend.tosa.SLICE.default):
        return _pad_or_slice_is_noop(node)
    in_dtype = _dtype(_arg(node, 0))  # a copy-like op: a no-op unless it changes the dtype
    return in_dtype is None or node.kwargs.get("dtype", in_dtype) == in_dtype


def _casts_data_layout(node: torch.fx.Node, pass_: Any) -> bool:  # InsertDataLayoutCastsPass
    if not _targeted(node, pass_):
        return False
    if node.target in pass_._concat_ops:
        inputs = _arg(node, 0)
        dtypes = [_dtype(arg) for arg in inputs] if isinstance(inputs, (list, tuple)) else [None]
    else:
        dtypes = [_dtype(_arg(node, 0))]
    known: list[torch.dtype] = [d for d in dtypes if d is not None]
    if not known or len(known) < len(dtypes):
        return True
    dtype = max(known, key=lambda d: d.itemsize)  # the first of the largest, as the pass picks
    spec = get_context_spec()
    integer = not dtype.is_floating_point and dtype != torch.bool
    return (integer and not spec.support_integer()) or (
        dtype.is_floating_point and not spec.support_float()
    )


_REWRITES: dict[type, Callable[[torch.fx.Node, Any], bool]] = {
    NormalizeTransposePass: _normalizes_transpose,
    ReplaceBrokenOpsWithFunctionalOpsPass: _replaces_view,
    ScalarToTensorPass: _coerces_scalar,
    MemoryFormatOpsPass: _replaces_memory_format,
    PromoteBoolOperandsPass: _promotes_bool,
    DecomposeTOSAUnsupportedClampPass: _decomposes_clamp,
    DecomposeGroupedConvPass: _decomposes_grouped_conv,
    DecomposeStridedSliceCopyPass: _decomposes_strided_slice,
    DecomposeDynamicFullPass: _decomposes_dynamic_full,
    InsertDynamicPaddingPass: _inserts_dynamic_padding,
    RemoveNoopPass: _removes_noop,
    InsertDataLayoutCastsPass: _casts_data_layout,
}


def _retrace_snapshot(graph_module: torch.fx.GraphModule) -> tuple:
    """What a retrace leaves that a later retrace derives its output from, by identity."""
    return tuple(
        (node, node.name, node.op, node.target, node._args, node._kwargs, node.meta.get("val"))
        for node in graph_module.graph.nodes
    )


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(p is q for p, q in zip(x, y)) for x, y in zip(a, b)
    )


class _RetraceOutputs:
    """The graph modules ExportPass built, with their snapshot as the retrace left them."""

    def __init__(self) -> None:
        self.snapshots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def record(self, graph_module: torch.fx.GraphModule) -> None:
        self.snapshots[graph_module] = _retrace_snapshot(graph_module)

    def unchanged(self, graph_module: torch.fx.GraphModule) -> bool:
        snapshot = self.snapshots.get(graph_module)
        return snapshot is not None and _same(snapshot, _retrace_snapshot(graph_module))


def _would_rewrite(pass_: Any, graph_module: torch.fx.GraphModule) -> bool:
    rewrites = _REWRITES[type(pass_)]
    return any(
        node.op == "call_function" and rewrites(node, pass_) for node in graph_module.graph.nodes
    )


# what each pass reports after a retrace that rewrote nothing (ExportPass.call: a change)
_REPORTED_UNCHANGED = {ScalarToTensorPass: False}


def _remove_dead_code(graph_module: torch.fx.GraphModule) -> None:
    """RemoveNoopPass.call after its retrace (on the retrace's output, the same graph)."""
    if graph_module.graph.eliminate_dead_code():
        graph_module.graph.lint()
        graph_module.recompile()


# what a pass's own call() does after its retrace, done on the graph a skip leaves as it is
_AFTER_RETRACE: dict[type, Callable[[torch.fx.GraphModule], None]] = {
    RemoveNoopPass: _remove_dead_code
}


def _skipping(cls: Any, own: Any, outputs: _RetraceOutputs) -> Callable:
    def call(self, graph_module):
        if (
            type(self) is cls
            and not get_control_flow_submodules(graph_module)
            and outputs.unchanged(graph_module)
            and not _would_rewrite(self, graph_module)
        ):
            if cls in _AFTER_RETRACE:
                _AFTER_RETRACE[cls](graph_module)
            return PassResult(graph_module, _REPORTED_UNCHANGED.get(cls, True))
        if own is not None:
            return own(self, graph_module)
        return super(cls, self).call(graph_module)

    return call


def skip_unneeded_retraces() -> ContextManager[None]:
    base = pass_base._ExportPassBase
    original_call = base.call
    outputs = _RetraceOutputs()

    def call(self, graph_module):
        result = original_call(self, graph_module)
        outputs.record(result.graph_module)
        return result

    own_calls = {cls: cls.__dict__.get("call") for cls in _REWRITES}
    original_retrace = PropagateViewCopyPermutePass._retrace

    def _retrace(self, graph_module):  # the pass's own retrace after its in-place rewrites
        graph_module.graph.eliminate_dead_code()  # as upstream's _retrace begins
        if not get_control_flow_submodules(graph_module) and outputs.unchanged(graph_module):
            return graph_module
        return original_retrace(self, graph_module)

    return patched(
        (base, "call", call),
        (PropagateViewCopyPermutePass, "_retrace", _retrace),
        *((cls, "call", _skipping(cls, own, outputs)) for cls, own in own_calls.items()),
    )


# --- reuse-compiled-forward --------------------------------------------------------------------


def reuse_compiled_forward() -> ContextManager[None]:
    compiled: dict[str, Any] = {}

    def _exec_with_source(src, globals, co_fields=None):  # torch 2.13's, with compile() cached
        key = fx_graph_module._loader.cache(src, globals, co_fields)
        code = compiled.get(src)
        if code is None:
            code = compiled[src] = compile(src, key, "exec", dont_inherit=True)
        exec(code, globals)

    return patched((fx_graph_module, "_exec_with_source", _exec_with_source))


# --- lazy-retrace-codegen ----------------------------------------------------------------------


class _LazyRetraceModule(_LazyGraphModule):
    """torch's _LazyGraphModule (Python source generated and compiled when first needed: a
    call, .code, str, pickling) that sets the pytree specs at once, as GraphModule.recompile
    does first: code reads _in_spec / _out_spec without calling the module."""

    def recompile(self) -> None:  # type: ignore[override]
        codegen = self._graph._codegen
        if isinstance(codegen, _PyTreeCodeGen):
            self._in_spec = codegen.pytree_info.in_spec
            self._out_spec = codegen.pytree_info.out_spec
        type(self).forward = _LazyGraphModule._lazy_forward  # this module's class


def lazy_retrace_codegen() -> ContextManager[None]:
    base = pass_base._ExportPassBase
    original_submodule = base.call_submodule
    original_new = GraphModule.__dict__["__new__"]
    depth = [0]

    def __new__(cls, *args, **kwargs):
        if cls is GraphModule and depth[0]:
            cls = _LazyRetraceModule
        return original_new.__func__(cls, *args, **kwargs)

    def call_submodule(self, graph_module, inputs):
        depth[0] += 1
        try:
            return original_submodule(self, graph_module, inputs)
        finally:
            depth[0] -= 1

    return patched(
        (GraphModule, "__new__", staticmethod(__new__)), (base, "call_submodule", call_submodule)
    )
