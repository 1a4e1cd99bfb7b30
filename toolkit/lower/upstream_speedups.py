"""Work upstream (torch 2.13 / ExecuTorch 1.5.1) repeats while quantizing and lowering, skipped
without changing what it produces: `with upstream_speedups(): ...` around a compile.

shared-provenance: torch.fx.traceback.NodeSource(node) deep-copies node.meta["from_node"], the
node's whole provenance chain, every time a pass re-creates the node (ExportPass retraces every
node of the graph, ~40 times in a lowering). The chain grows by one level per pass, so the copies
grow quadratically: on MobileNetV2 (0.35, 96x96) 28,462 copies cost ~10 s of a ~95 s compile.
NodeSource objects are never changed after construction (torch only reads them: to_dict,
print_readable, __eq__ by value; the graph-transform observer appends to node.meta's own list,
never to a NodeSource's), so the new NodeSource can share its parent's entries in a list of its
own: the same provenance by value, without the copies.

skip-noop-decompositions: ExecuTorch's to_edge_transform_and_lower runs
ExportedProgram.run_decompositions three times for the Arm partitioner (once with no table, which
functionalizes, then with the default table minus the ops the partitioner keeps, then with the
whole default table around its EDGE_DO_NOT_DECOMP rewrite). Each call retraces the whole graph
through AOT autograd with fake tensors (~6 s on MobileNetV2 0.35), also when no operator in the
table occurs in the graph: the retrace then returns the same graph. ExecuTorch 1.5.1 already
skips such a call on its other branch (`contains_any_call_fn_target_op`, "safe to skip when none
of those targets occur in the graph"); this applies the same test to every call with a non-empty
table on a program already in ATen (inference) IR, the state the first call leaves it in (that
call also did the clean-ups a retrace does: dead code, duplicate getitems, needless copies).

skip-unchanged-recompile: GraphModule.recompile() regenerates the module's Python source from its
graph and compiles it (~25 ms for a 1,000-node graph). ExecuTorch's pass managers call it after
every pass that reports a change, right after ExportPass built a new GraphModule from the
retraced graph, whose constructor had just compiled the same graph: 146 of the 508 recompiles of
a MobileNetV2 (0.35) compile regenerate the source they replace. A recompile is skipped when no
node, argument, target, name or code-comment metadata changed since this module's last one
(checked by identity: an fx Node's args and kwargs are immutable and replaced on each change);
it then returns that compile's PythonCode, and still recompiles the submodules.

skip-static-sym-to-tensor: ExecuTorch's SymToTensorPass (the first aten-to-edge pass) retraces the
whole graph (~2 s) to wrap symbolic scalars (SymInt/SymFloat/SymBool values) passed where an
operator takes a tensor. A graph with static shapes holds no symbolic value, so there is nothing
to wrap: the pass is skipped when no node's value is one (the next pass retraces it anyway).

cache-dialect-fake-kernels: every retrace runs each node's operator on fake tensors to compute
its output's metadata. torch's FakeTensorMode caches that result by operator and argument
metadata, but only for built-in (aten, prims) operators: the TOSA dialect's and the quantize /
dequantize operators (ExecuTorch's "tosa" and torch's "quantized_decomposed" namespaces) bypass
the cache ("non-builtin") and run their Python fake kernels again, ~93k times in the 49-step GRU
keyword net's lowering (~30 s). Their fake kernels compute the output from the arguments alone
(and the lowering's TOSA spec, one per lowering), so they are let into the cache when they are
neither views nor mutating nor data-dependent; torch's own checks on the arguments and the
output (fake tensors only, no aliasing) still apply. Their entries are dropped when the context
starts (torch's bypass entries) and ends, so no entry outlives the TOSA spec it was computed under.

serial-histogram-observers: torchao's HistogramObserver (every activation observer of the
quantizer) runs a few small tensor operations per calibration sample (aminmax, histc, and to
widen its range a 32,768-element linspace / bucketize / bincount) and ~10 more per observer to
choose its range (_non_linear_param_search). torch hands the larger ones to its two OpenMP
threads; on a 2-core machine with another process busy, each such operation waits for a time
slice of the busy core: the GRU keyword net's ~1,100 observers x 8 samples took 11-17 s instead
of 2 s. Inside the observer's forward and calculate_qparams the intra-op thread count is 1, and
restored after. The values are the same: each of those operations computes its elements
independently of the others (linspace, bucketize, elementwise arithmetic), exactly (min/max,
histc's counts: whole numbers, summed exactly), or serially whatever the thread count
(bincount's weighted sums; the sums over 2,048 bins are below torch's parallel grain size).
The model's own operators (matrix products) keep their threads.

fast-pass-pytree, reuse-fake-results, skip-unneeded-retraces, reuse-compiled-forward,
lazy-retrace-codegen: in lower/retrace_speedups.py (ExportPass's retrace and the graph modules it builds).

Each speedup is installed only inside the context and restored after it; tests/lower pins that
a compile's TOSA flatbuffer and Vela command stream are the same bytes with and without them.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack, contextmanager
from importlib.metadata import version

import torch
from executorch.exir.graph_module import contains_any_call_fn_target_op, get_control_flow_submodules
from executorch.exir.pass_base import PassResult
from executorch.exir.passes.sym_to_tensor_pass import SymToTensorPass
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export.exported_program import ExportedProgram
from torch.fx import GraphModule
from torch.fx import traceback as fx_traceback
from torch.fx.experimental import _config as fx_experimental_config
from torchao.quantization.pt2e.observer import HistogramObserver

from ..errors import UserError
from .patching import patched
from .retrace_speedups import (
    fast_pass_pytree,
    lazy_retrace_codegen,
    reuse_compiled_forward,
    reuse_fake_results,
    skip_unneeded_retraces,
)


def _node_source_init_sharing(original):
    def __init__(self, node=None, pass_name="", action=None):
        original(self, None, pass_name, action)  # action checks; node_info None, from_node []
        if node:
            self.node_info = fx_traceback.NodeSource.NodeInfo(
                name=node.name, target=str(node.target), graph_id=id(node.graph)
            )
            self.from_node = list(node.meta.get("from_node", ()))

    return __init__


def _shared_provenance() -> ContextManager[None]:
    cls = fx_traceback.NodeSource
    return patched((cls, "__init__", _node_source_init_sharing(cls.__init__)))


def _is_noop_decomposition(program: ExportedProgram, table) -> bool:
    return (
        bool(table)
        and program.verifiers[0].dialect == "ATEN"
        and not contains_any_call_fn_target_op(program.graph_module, table)
    )


def _skip_noop_decompositions() -> ContextManager[None]:
    original = ExportedProgram.run_decompositions

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        if not decompose_custom_triton_ops and _is_noop_decomposition(self, decomp_table):
            return self
        return original(self, decomp_table, decompose_custom_triton_ops)

    return patched((ExportedProgram, "run_decompositions", run_decompositions))


# node.meta keys GraphModule's code generation reads (comments, wrapped calls), torch 2.13
_CODEGEN_META = ("stack_trace", "custom", "is_wrapped", "recompute", "ac_graph_id", "desc")


def _codegen_inputs(module: GraphModule) -> tuple:
    graph = module.graph
    nodes = tuple(
        (node, node.name, node.op, node.target, node._args, node._kwargs, node.type)
        + tuple(node.meta.get(key) for key in _CODEGEN_META)
        for node in graph.nodes
    )
    codegen = graph._codegen
    pytree = getattr(codegen, "pytree_info", None)
    return (graph, codegen, pytree, fx_experimental_config.enrich_profiler_metadata, nodes)


def _same(a: tuple, b: tuple) -> bool:
    """Element by element, by identity (nested tuples element-wise): no __eq__ of tensors or
    args runs, and an object replaced by an equal one counts as a change."""
    if len(a) != len(b):
        return False
    return all(
        (_same(x, y) if type(x) is tuple and type(y) is tuple else x is y) for x, y in zip(a, b)
    )


def _skip_unchanged_recompile() -> ContextManager[None]:
    original = GraphModule.recompile
    attribute = "_etk_last_recompile"  # on the module's own class (one per GraphModule)

    def recompile(self):
        cls = type(self)
        inputs = _codegen_inputs(self)
        last = cls.__dict__.get(attribute)
        if last is not None and last[2] is cls.forward and _same(last[0], inputs):
            self._recompile_submodules()
            return last[1]
        python_code = original(self)
        setattr(cls, attribute, (inputs, python_code, cls.forward))
        return python_code

    return patched((GraphModule, "recompile", recompile))


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _holds_symbolic_values(module: torch.fx.GraphModule) -> bool:
    modules = [module]
    while modules:
        current = modules.pop()
        for node in current.graph.nodes:
            leaves = torch.utils._pytree.tree_leaves(node.meta.get("val"))
            if any(isinstance(leaf, _SYMBOLIC) for leaf in leaves):
                return True
        modules.extend(sub for _, sub, _ in get_control_flow_submodules(current))
    return False


def _skip_static_sym_to_tensor() -> ContextManager[None]:
    original = SymToTensorPass.call  # ExportPass.call: the retrace

    def call(self, graph_module):
        if not _holds_symbolic_values(graph_module):
            return PassResult(graph_module, False)
        return original(self, graph_module)

    return patched((SymToTensorPass, "call", call))  # its own, over ExportPass's inherited one


# operator namespaces whose fake kernels depend only on their arguments (and the TOSA spec)
_PURE_FAKE_NAMESPACES = frozenset({"tosa", "quantized_decomposed"})
_UNCACHEABLE_TAGS = (
    torch.Tag.data_dependent_output,
    torch.Tag.dynamic_output_shape,
    torch.Tag.inplace_view,
)


def _pure_dialect_fake(func) -> bool:
    return (
        isinstance(func, torch._ops.OpOverload)
        and func.namespace in _PURE_FAKE_NAMESPACES
        and not func.is_view
        and not func._schema.is_mutable
        and not any(tag in func.tags for tag in _UNCACHEABLE_TAGS)
    )


@contextmanager
def _cache_dialect_fake_kernels() -> Iterator[None]:
    original = FakeTensorMode._validate_cache_key

    def _validate_cache_key(self, func, args, kwargs):
        if _pure_dialect_fake(func):
            return None
        return original(self, func, args, kwargs)

    _drop_dialect_entries()  # torch keeps a "non-builtin" bypass entry per key it has seen
    try:
        with patched((FakeTensorMode, "_validate_cache_key", _validate_cache_key)):
            yield
    finally:
        _drop_dialect_entries()


def _drop_dialect_entries() -> None:
    cache = FakeTensorMode.cache
    for key in [key for key in cache if _pure_dialect_fake(key.key[0])]:
        del cache[key]


def _single_threaded(method):
    def run(self, *args):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return method(self, *args)
        finally:
            torch.set_num_threads(threads)

    return run


def _serial_histogram_observers() -> ContextManager[None]:
    return patched(
        *(
            (HistogramObserver, name, _single_threaded(HistogramObserver.__dict__[name]))
            for name in ("forward", "calculate_qparams")
        )
    )


SPEEDUPS = {
    "shared-provenance": _shared_provenance,
    "skip-noop-decompositions": _skip_noop_decompositions,
    "skip-unchanged-recompile": _skip_unchanged_recompile,
    "skip-static-sym-to-tensor": _skip_static_sym_to_tensor,
    "cache-dialect-fake-kernels": _cache_dialect_fake_kernels,
    "serial-histogram-observers": _serial_histogram_observers,
    "fast-pass-pytree": fast_pass_pytree,
    "reuse-fake-results": reuse_fake_results,
    "skip-unneeded-retraces": skip_unneeded_retraces,
    "reuse-compiled-forward": reuse_compiled_forward,
    "lazy-retrace-codegen": lazy_retrace_codegen,
}
# The packages whose code each speedup replaces or mirrors, and the versions it was written
# against (their source read line by line): on any other version of one of them the speedup is
# not installed and upstream's code runs as it is (etk says so once per process).
WRITTEN_FOR = {"torch": "2.13.0", "executorch": "1.5.1", "torchao": "0.18.0"}
PATCHED_PACKAGES: dict[str, tuple[str, ...]] = {
    "shared-provenance": ("torch",),
    "skip-noop-decompositions": ("torch", "executorch"),
    "skip-unchanged-recompile": ("torch", "executorch"),
    "skip-static-sym-to-tensor": ("torch", "executorch"),
    "cache-dialect-fake-kernels": ("torch", "executorch"),
    "serial-histogram-observers": ("torch", "torchao"),
    "fast-pass-pytree": ("torch", "executorch"),
    "reuse-fake-results": ("torch", "executorch"),
    "skip-unneeded-retraces": ("torch", "executorch"),
    "reuse-compiled-forward": ("torch",),
    "lazy-retrace-codegen": ("torch", "executorch"),
}


@functools.cache
def installed_versions() -> dict[str, str]:
    """The release of each package WRITTEN_FOR names (a local build tag such as +cpu dropped)."""
    return {name: version(name).split("+")[0] for name in WRITTEN_FOR}


def version_mismatches(name: str) -> list[str]:
    """What differs from the versions the speedup was written for: ["torch 2.14.0 (written for
    2.13.0)"], or [] when it may be installed."""
    installed = installed_versions()
    return [
        f"{package} {installed[package]} (written for {WRITTEN_FOR[package]})"
        for package in PATCHED_PACKAGES[name]
        if installed[package] != WRITTEN_FOR[package]
    ]


_told: set[str] = set()


def _usable(names: tuple[str, ...]) -> tuple[str, ...]:
    """The speedups written for the installed versions; one stderr line, once, for the others."""
    skipped = {name: version_mismatches(name) for name in names}
    skipped = {name: why for name, why in skipped.items() if why}
    untold = sorted(set(skipped) - _told)
    if untold:
        why = sorted({reason for name in untold for reason in skipped[name]})
        print(
            f"etk: installed {', '.join(why)}: {', '.join(untold)} not installed, upstream's "
            "code runs unpatched (the same results, slower compiles)",
            file=sys.stderr,
        )
        _told.update(untold)
    return tuple(name for name in names if name not in skipped)


# ETK_UPSTREAM_SPEEDUPS: "none", or the comma-separated names to install (default: all). For
# measuring each alone (scripts/bench_compile.py --per-patch) and as a way out when one misbehaves.
SPEEDUPS_ENV = "ETK_UPSTREAM_SPEEDUPS"


def chosen_speedups() -> tuple[str, ...]:
    setting = os.environ.get(SPEEDUPS_ENV)
    if setting is None:
        return tuple(SPEEDUPS)
    names = tuple(n.strip() for n in setting.split(",") if n.strip() and n.strip() != "none")
    unknown = [n for n in names if n not in SPEEDUPS]
    if unknown:
        raise UserError(
            f"{SPEEDUPS_ENV}: unknown speedup {', '.join(unknown)}; "
            f"give none or some of {', '.join(SPEEDUPS)}"
        )
    return names


@contextmanager
def upstream_speedups(names: tuple[str, ...] | None = None) -> Iterator[None]:
    with ExitStack() as stack:
        for name in _usable(chosen_speedups() if names is None else names):
            stack.enter_context(SPEEDUPS[name]())
        yield
