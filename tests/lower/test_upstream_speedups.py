"""lower/upstream_speedups.py: the same compiled bytes with and without, and each speedup applies."""

from __future__ import annotations

import contextlib
import hashlib
import operator
from pathlib import Path

import pytest
import torch
from executorch.exir.passes.sym_to_tensor_pass import SymToTensorPass
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export.exported_program import ExportedProgram
from torch.fx import traceback as fx_traceback
from torchao.quantization.pt2e.observer import HistogramObserver

from toolkit.errors import UserError
from toolkit.lower import build_variant, compiler
from toolkit.lower import upstream_speedups as speedups
from toolkit.lower.compile_cache import CACHE_DIR_ENV
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.targets import load_target

HISTOGRAM_FORWARD = HistogramObserver.__dict__["forward"]


def _graph_with_provenance():
    graph = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU())).graph
    node = next(n for n in graph.nodes if n.op == "call_module")
    root = fx_traceback.NodeSource(None, "trace", fx_traceback.NodeSourceAction.CREATE)
    node.meta["from_node"] = [root]
    return node, root


def test_shared_provenance_equals_the_deep_copy_and_shares_the_parents():
    node, root = _graph_with_provenance()
    copied = fx_traceback.NodeSource(node, "pass_a", fx_traceback.NodeSourceAction.CREATE)
    with speedups.upstream_speedups(("shared-provenance",)):
        shared = fx_traceback.NodeSource(node, "pass_a", fx_traceback.NodeSourceAction.CREATE)
    assert shared.to_dict() == copied.to_dict()
    assert shared.from_node[0] is root and copied.from_node[0] is not root
    assert shared.from_node is not node.meta["from_node"]  # its own list: appends stay apart
    restored = fx_traceback.NodeSource(node, "pass_b")
    assert restored.from_node[0] is not root  # upstream's constructor is back after the context


def _exported():
    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.hardtanh(x, 0.0, 6.0) + 1

    return torch.export.export(Net(), (torch.ones(2),)).run_decompositions({})


def test_noop_decomposition_test_needs_aten_ir_and_no_op_of_the_table():
    program = _exported()
    present = {n.target for n in program.graph.nodes if n.op == "call_function"}
    absent = {torch.ops.aten.addmm.default: None}
    assert program.verifiers[0].dialect == "ATEN"
    assert speedups._is_noop_decomposition(program, absent)
    assert not speedups._is_noop_decomposition(program, {op: None for op in present})
    assert not speedups._is_noop_decomposition(program, {})
    training = torch.export.export(torch.nn.ReLU(), (torch.ones(2),))
    assert training.verifiers[0].dialect == "TRAINING"
    assert not speedups._is_noop_decomposition(training, absent)


def test_noop_decomposition_returns_the_program_itself():
    program = _exported()
    with speedups.upstream_speedups(("skip-noop-decompositions",)):
        assert program.run_decompositions({torch.ops.aten.addmm.default: None}) is program
    assert ExportedProgram.run_decompositions.__name__ == "run_decompositions"
    assert program.run_decompositions({torch.ops.aten.addmm.default: None}) is not program


def test_recompile_is_skipped_only_while_the_graph_is_unchanged():
    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    module = torch.fx.symbolic_trace(Net())
    x = torch.tensor([-2.0, 3.0])
    with speedups.upstream_speedups(("skip-unchanged-recompile",)):
        first = module.recompile()
        assert module.recompile() is first  # nothing changed: the same PythonCode, no codegen
        add = next(n for n in module.graph.nodes if n.target is operator.add)
        add.args = (add.args[0], 5)
        changed = module.recompile()
        assert changed is not first and "5" in changed.src
        assert module(x).tolist() == [5.0, 8.0]
        add.meta["stack_trace"] = 'File "net.py", line 3, in forward'
        assert module.recompile() is not changed  # a code comment changed: compiled again
    assert module.recompile() is not module.recompile()  # upstream's recompile is back


def test_sym_to_tensor_is_skipped_only_without_symbolic_values():
    class Net(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0] * 2, -1) + 1

    x = torch.ones(4, 6)
    static = torch.export.export(Net(), (x,)).graph_module
    batch = torch.export.Dim("batch", min=2)
    dynamic = torch.export.export(Net(), (x,), dynamic_shapes={"x": {0: batch}}).graph_module
    assert not speedups._holds_symbolic_values(static)
    assert speedups._holds_symbolic_values(dynamic)  # x.shape[0] * 2 is a SymInt node
    with speedups.upstream_speedups(("skip-static-sym-to-tensor",)):
        result = SymToTensorPass()(static)
        assert result.graph_module is static and not result.modified
        assert SymToTensorPass()(dynamic).graph_module is not dynamic  # upstream's retrace


def _quantize_twice(mode: FakeTensorMode) -> tuple[int, int]:
    """(hits, non-builtin bypasses) of two identical quantize_per_tensor calls on fake tensors."""
    quantize = torch.ops.quantized_decomposed.quantize_per_tensor.default
    before = FakeTensorMode.cache_info()
    x = mode.from_tensor(torch.empty(2, 3))  # a conversion, not a dispatch
    with mode:
        outputs = [quantize(x, 0.1, -128, -128, 127, torch.int8) for _ in range(2)]
    after = FakeTensorMode.cache_info()
    assert [(o.shape, o.dtype) for o in outputs] == [(torch.Size([2, 3]), torch.int8)] * 2
    bypassed = after.bypasses.get("non-builtin", 0) - before.bypasses.get("non-builtin", 0)
    return after.hits - before.hits, bypassed


def test_dialect_fake_kernels_are_cached_only_inside_the_context():
    assert speedups._pure_dialect_fake(torch.ops.quantized_decomposed.quantize_per_tensor.default)
    assert not speedups._pure_dialect_fake(torch.ops.aten.view.default)  # aten: torch's own rule
    assert _quantize_twice(FakeTensorMode()) == (0, 2)  # upstream: both bypass the cache
    assert any(speedups._pure_dialect_fake(key.key[0]) for key in FakeTensorMode.cache)  # bypass
    with speedups.upstream_speedups(("cache-dialect-fake-kernels",)):
        assert _quantize_twice(FakeTensorMode()) == (1, 0)  # the second is a hit
    # no entry outlives the context (a later lowering's TOSA spec may differ)
    assert not any(speedups._pure_dialect_fake(key.key[0]) for key in FakeTensorMode.cache)
    assert _quantize_twice(FakeTensorMode()) == (0, 2)


def _fingerprint(program) -> list[str]:
    parts = [d.payload for d in program.delegates]
    parts += [d.tosa_path.read_bytes() for d in program.delegates]
    parts.append(program.pte_path.read_bytes())  # each compile dumps into its own temp folder
    return [hashlib.sha256(p).hexdigest() for p in parts]


def _compile_both_ways(spec, variant, tmp_path, monkeypatch, input_shape=None):
    model = load_model(spec, input_shape)
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu(None, None, None)
    runs: list[list[bool]] = []
    real = ExportedProgram.run_decompositions

    def counting(self, table=None, custom=False):  # under the speedup: sees what it lets run
        runs[-1].append(speedups._is_noop_decomposition(self, table))
        return real(self, table, custom)

    monkeypatch.setattr(ExportedProgram, "run_decompositions", counting)
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)  # both compiles for real: same cache key
    monkeypatch.setattr(build_variant, "_CACHE", {})
    runs.append([])
    fast = build_variant.compile_variant(model, calibration, variant, npu, tmp_path / "on")
    monkeypatch.setattr(build_variant, "_CACHE", {})
    monkeypatch.setattr(compiler, "upstream_speedups", contextlib.nullcontext)
    runs.append([])
    slow = build_variant.compile_variant(model, calibration, variant, npu, tmp_path / "off")
    return fast, slow, runs


def test_compile_is_the_same_bytes_with_and_without_the_speedups(tmp_path, monkeypatch):
    fast, slow, runs = _compile_both_ways("zoo:conv2d_bn_relu6", "fused", tmp_path, monkeypatch)
    assert _fingerprint(fast) == _fingerprint(slow)
    assert b"etk-lower-" not in fast.pte_path.read_bytes()  # the dump folder is not in the .pte
    # without: functionalize, decompose, and a third retrace with nothing left to decompose
    assert runs == [[False, False], [False, False, True]]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("spec", ["zoo:ds_cnn", "zoo:mobilenet_v1_025", "zoo:resnet8"])
def test_zoo_compiles_are_the_same_bytes_with_and_without(spec, variant, tmp_path, monkeypatch):
    fast, slow, _ = _compile_both_ways(spec, variant, tmp_path, monkeypatch)
    assert _fingerprint(fast) == _fingerprint(slow)


@pytest.mark.slow  # a compile with a symbolic batch, 20 s on 2 cores
def test_a_fake_tensor_of_symbolic_size_is_not_reused(tmp_path, monkeypatch):
    """reuse-fake-results keyed a tensor by its shape, and a SymInt does not hash: compiling this
    model ended in "TypeError: unhashable type: non-nested SymInt"."""
    spec = str(Path(__file__).parents[1] / "fixtures" / "user_models.py") + ":scaled_input_prelu"
    fast, slow, _ = _compile_both_ways(spec, "fused", tmp_path, monkeypatch, "1,3,8,8")
    assert _fingerprint(fast) == _fingerprint(slow)


# 4 time steps: the same unrolled GRU cells as the 49-step net (scripts/bench_compile.py), whose
# compile without the speedups ran past 15 minutes on CI (8 steps: 3-6 minutes here)
GRU_KEYWORD = "tests/collection/held_out_kinds.py:gru_keyword"


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["fused", "unfused"])
def test_gru_compiles_are_the_same_bytes_with_and_without(variant, tmp_path, monkeypatch):
    fast, slow, _ = _compile_both_ways(GRU_KEYWORD, variant, tmp_path, monkeypatch, "1,4,10")
    assert _fingerprint(fast) == _fingerprint(slow)


def test_fast_pass_pytree_maps_as_torch_pytree_does():
    from collections import namedtuple

    from executorch.exir import pass_base
    from torch.fx.immutable_collections import immutable_list
    from torch.utils import _pytree as pytree

    from toolkit.lower import retrace_speedups

    Pair = namedtuple("Pair", "a b")
    tree = (1, [2.0, None, {"z": 3, "a": (4,)}], immutable_list([5, 6]), Pair(7, [8]), "s")
    with speedups.upstream_speedups(("fast-pass-pytree",)):
        fast = pass_base.pytree
        assert isinstance(fast, retrace_speedups._FastPytree)
        for func in (lambda x: x, lambda x: (x, type(x).__name__)):
            expected = pytree.tree_map(func, tree)
            mapped = fast.tree_map(func, tree)
            assert mapped == expected
            assert pytree.tree_structure(mapped) == pytree.tree_structure(expected)  # types too
        only = fast.tree_map_only(int, lambda x: -x, tree)
        assert only == pytree.tree_map_only(int, lambda x: -x, tree)
        assert type(only[2]) is immutable_list and type(only[3]) is Pair
        assert list(only[1][2]) == ["z", "a"]  # key order kept
    assert pass_base.pytree is pytree


def _retraced_twice(names):
    """Two retraces of the same graph by an ExportPass; (first, second) output values of add."""
    from executorch.exir.pass_base import ExportPass

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.add.Tensor(x, 1.0).relu()

    module = torch.export.export(Net(), (torch.ones(2, 3),)).graph_module
    with speedups.upstream_speedups(names):
        first = ExportPass()(module).graph_module
        second = ExportPass()(first).graph_module

    def add_value(graph_module):
        node = next(n for n in graph_module.graph.nodes if n.target is torch.ops.aten.add.Tensor)
        return node.meta["val"]

    return add_value(first), add_value(second)


def test_fake_results_are_reused_only_for_the_same_arguments():
    first, second = _retraced_twice(("reuse-fake-results",))
    assert second is first  # the same placeholder value in: the same fake output reused
    assert (second.shape, second.dtype) == (torch.Size([2, 3]), torch.float32)
    first, second = _retraced_twice(())
    assert second is not first  # upstream runs the fake kernel again


def test_fake_result_keys_tell_scalar_types_and_refuse_unknown_arguments():
    from toolkit.lower import retrace_speedups as rs

    held: list = []
    keys = {rs._key(value, held) for value in (1, 1.0, True, -0.0, 0.0)}
    assert len(keys) == 5  # 1 == 1.0 == True, -0.0 == 0.0 in Python: not here
    x = torch.ones(2)
    tensor = ("tensor", id(x), torch.float32, (2,))
    assert rs._key((x, [x]), held) == (tuple, (tensor, (list, (tensor,))))
    assert held[-1] is x  # kept alive while the key is in use
    with pytest.raises(rs._NotReusable):
        rs._key(object(), [])
    assert not rs._reusable_op(torch.ops.aten.view.default)  # a view: its output aliases
    assert not rs._reusable_op(torch.ops.aten.add_.Tensor)  # mutates
    assert rs._reusable_op(torch.ops.aten.add.Tensor)


def test_scalar_to_tensor_is_skipped_only_without_scalars_for_tensors():
    from executorch.exir.pass_base import ExportPass
    from executorch.exir.passes.scalar_to_tensor_pass import ScalarToTensorPass

    from toolkit.lower import retrace_speedups as rs

    class Net(torch.nn.Module):
        def __init__(self, other):
            super().__init__()
            self.other = other

        def forward(self, x):
            return torch.ops.aten.add.Tensor(x, self.other)

    x = torch.ones(3)
    with speedups.upstream_speedups(("skip-unneeded-retraces",)):
        with_scalar = ExportPass()(torch.export.export(Net(2.0), (x,)).graph_module).graph_module
        without = ExportPass()(torch.export.export(Net(x), (x,)).graph_module).graph_module
        add = next(n for n in with_scalar.graph.nodes if n.target is torch.ops.aten.add.Tensor)
        assert rs._coerces_scalar(add, None)  # add.Tensor(x, 2.0): other is a Tensor
        skipped = ScalarToTensorPass()(without)
        assert skipped.graph_module is without and not skipped.modified  # as upstream reports
        coerced = ScalarToTensorPass()(with_scalar)
        assert coerced.modified and coerced.graph_module is not with_scalar  # upstream's retrace
    assert "call" in ScalarToTensorPass.__dict__  # its own call() is back
    assert ScalarToTensorPass()(without).graph_module is not without


def _export_pass_output(transpose: bool):
    from executorch.exir.pass_base import ExportPass

    class Net(torch.nn.Module):
        def forward(self, x):
            return (x.t() if transpose else x) + 1

    module = torch.export.export(Net(), (torch.ones(2, 2),)).graph_module
    return ExportPass()(module).graph_module  # a retrace's output (recorded in the context)


def test_unneeded_retrace_is_skipped_only_when_the_pass_would_rewrite_nothing():
    from executorch.exir.passes.normalize_transpose_pass import NormalizeTransposePass

    with speedups.upstream_speedups(("skip-unneeded-retraces",)):
        plain = _export_pass_output(transpose=False)
        assert NormalizeTransposePass()(plain).graph_module is plain  # nothing to normalize
        with_t = _export_pass_output(transpose=True)
        result = NormalizeTransposePass()(with_t).graph_module
        assert result is not with_t
        targets = {n.target for n in result.graph.nodes}
        assert torch.ops.aten.t_copy.default in targets and torch.ops.aten.t.default not in targets
        # changed in place since its retrace: a retrace would rename or recompute, so it runs
        edited = _export_pass_output(transpose=False)
        add = next(n for n in edited.graph.nodes if n.target is torch.ops.aten.add.Tensor)
        add.args = (add.args[0], 2)
        assert NormalizeTransposePass()(edited).graph_module is not edited
    assert "call" not in NormalizeTransposePass.__dict__  # upstream's (ExportPass's) is back
    plain = _export_pass_output(transpose=False)
    assert NormalizeTransposePass()(plain).graph_module is not plain


def test_each_skipped_pass_has_a_rewrite_test_and_keeps_exportpass_call():
    from executorch.exir.pass_base import ExportPass

    from toolkit.lower import retrace_speedups as rs

    for cls in rs._REWRITES:  # a pass with its own call() is skippable only when it says so
        own = cls in rs._REPORTED_UNCHANGED or cls in rs._AFTER_RETRACE
        assert cls.call is ExportPass.call or own, cls
    slice_copy = torch.ops.aten.slice_copy.Tensor

    class Targeted:
        target_ops = (slice_copy,)

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    unit = graph.call_function(slice_copy, (x, 0, 0, 4, 1))
    strided = graph.call_function(slice_copy, (x, 0, 0, 4, 2))
    assert not rs._decomposes_strided_slice(unit, Targeted())
    assert rs._decomposes_strided_slice(strided, Targeted())


def test_compiled_forward_is_reused_for_the_same_source_only():
    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    graph = torch.fx.symbolic_trace(Net()).graph
    x = torch.tensor([-2.0, 3.0])
    with speedups.upstream_speedups(("reuse-compiled-forward",)):
        a = torch.fx.GraphModule(torch.nn.Module(), graph)
        b = torch.fx.GraphModule(torch.nn.Module(), graph)
        assert type(b).forward.__code__ is type(a).forward.__code__
        assert b(x).tolist() == [1.0, 4.0]
        add = next(n for n in graph.nodes if n.target is operator.add)
        add.args = (add.args[0], 5)
        c = torch.fx.GraphModule(torch.nn.Module(), graph)  # another source: compiled anew
        assert type(c).forward.__code__ is not type(a).forward.__code__
        assert c(x).tolist() == [5.0, 8.0]
    d = torch.fx.GraphModule(torch.nn.Module(), graph)
    e = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert type(d).forward.__code__ is not type(e).forward.__code__  # upstream compiles each


def test_the_upstream_functions_copied_with_a_change_are_the_ones_read():
    """reuse-fake-results and reuse-compiled-forward replace two upstream functions with copies
    (one call each made reusable): an ExecuTorch or torch upgrade that changes them must be read
    again (torch 2.13.0, ExecuTorch 1.5.1)."""
    import hashlib
    import inspect

    from executorch.exir import pass_base
    from torch.fx import graph_module

    digests = {
        f.__qualname__: hashlib.sha256(inspect.getsource(f).encode()).hexdigest()[:16]
        for f in (pass_base._ExportPassBase._fx, graph_module._exec_with_source)
    }
    assert digests == {
        "_ExportPassBase._fx": "d21aacbb5c107fba",
        "_exec_with_source": "3a1510761d07726e",
    }


def test_histogram_observers_run_single_threaded_to_the_same_state(monkeypatch):
    from torchao.quantization.pt2e.observer import HistogramObserver

    samples = [
        torch.randn(64, generator=torch.Generator().manual_seed(k)) * (k + 1) for k in range(4)
    ]
    plain = HistogramObserver()
    for x in samples:
        plain(x)
    threads = []
    upscale = HistogramObserver._upscale_histogram

    def counting(self, *args):
        threads.append(torch.get_num_threads())
        return upscale(self, *args)

    monkeypatch.setattr(HistogramObserver, "_upscale_histogram", counting)
    before = torch.get_num_threads()
    with speedups.upstream_speedups(("serial-histogram-observers",)):
        serial = HistogramObserver()
        for x in samples:
            serial(x)
        qparams = serial.calculate_qparams()
        assert torch.get_num_threads() == before  # restored after each call
    assert threads and set(threads) == {1}  # each sample widened the range: upscaled serially
    for name in ("histogram", "min_val", "max_val"):
        assert torch.equal(getattr(serial, name), getattr(plain, name))
    assert all(torch.equal(a, b) for a, b in zip(qparams, plain.calculate_qparams()))
    assert (
        "forward" in HistogramObserver.__dict__ and HistogramObserver.forward.__name__ == "forward"
    )


def _node_graph():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(1, 4, dtype=torch.int8)
    return graph, x


def test_noop_and_layout_cast_predicates_read_the_nodes_as_the_passes_do():
    from executorch.backends.arm._passes import InsertDataLayoutCastsPass, RemoveNoopPass
    from executorch.backends.arm.tosa.specification import (
        TosaLoweringContext,
        TosaSpecification,
    )
    from executorch.exir.dialects._ops import ops as exir_ops

    from toolkit.lower import retrace_speedups as rs

    graph, x = _node_graph()
    noop, edge, tosa = RemoveNoopPass(), exir_ops.edge, exir_ops.backend.tosa
    call = graph.call_function
    assert rs._removes_noop(call(edge.aten.cat.default, ([x],)), noop)  # one input: x itself
    assert not rs._removes_noop(call(edge.aten.cat.default, ([x, x],)), noop)
    shape = call(tosa.CONST_SHAPE.default, ([0, 0],))
    sizes = call(tosa.CONST_SHAPE.default, ([1, 4],))
    part = call(tosa.CONST_SHAPE.default, ([1, 2],))
    assert rs._removes_noop(call(tosa.SLICE.default, (x, shape, sizes)), noop)  # the whole of x
    assert not rs._removes_noop(call(tosa.SLICE.default, (x, shape, part)), noop)
    assert not rs._removes_noop(call(tosa.SLICE.default, (x, [0, 1], [1, 3])), noop)
    assert rs._removes_noop(call(tosa.PAD.default, (x, [0, 0, 0, 0])), noop)
    assert not rs._removes_noop(call(tosa.PAD.default, (x, [0, 1, 0, 0])), noop)
    copy = edge.dim_order_ops._to_dim_order_copy.default
    assert rs._removes_noop(call(copy, (x,), {"dtype": torch.int8}), noop)
    assert not rs._removes_noop(call(copy, (x,), {"dtype": torch.int32}), noop)
    assert not rs._removes_noop(call(edge.aten.view_copy.default, (x, [4])), noop)  # no target

    casts = InsertDataLayoutCastsPass()
    view = call(edge.aten.view_copy.default, (x, [4]))
    floats = graph.placeholder("y")
    floats.meta["val"] = torch.empty(4)
    float_view = call(edge.aten.view_copy.default, (floats, [4]))
    with TosaLoweringContext(TosaSpecification.create_from_string("TOSA-1.0+INT")):
        assert not rs._casts_data_layout(view, casts)  # int8 in an integer profile
        assert rs._casts_data_layout(float_view, casts)  # float: the INT profile casts it
        assert not rs._casts_data_layout(call(edge.aten.add.Tensor, (x, x)), casts)

    for cls in (RemoveNoopPass, InsertDataLayoutCastsPass):
        assert cls in rs._REWRITES


def test_propagation_retrace_is_skipped_only_when_nothing_changed_since_the_last():
    from executorch.backends.transforms.propagate_view_copy_permute_pass import (
        PropagateViewCopyPermuteDownPass,
        PropagateViewCopyPermutePass,
    )

    upstream = PropagateViewCopyPermutePass._retrace
    with speedups.upstream_speedups(("skip-unneeded-retraces",)):
        plain = _export_pass_output(transpose=False)
        assert PropagateViewCopyPermuteDownPass()._retrace(plain) is plain
        edited = _export_pass_output(transpose=False)
        add = next(n for n in edited.graph.nodes if n.target is torch.ops.aten.add.Tensor)
        add.args = (add.args[0], 2)
        assert PropagateViewCopyPermuteDownPass()._retrace(edited) is not edited
    assert PropagateViewCopyPermutePass._retrace is upstream


def test_retrace_outputs_generate_their_code_when_first_needed():
    from executorch.exir.pass_base import ExportPass
    from torch.fx._lazy_graph_module import _LazyGraphModule

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    module = torch.export.export(Net(), (torch.ones(2),)).graph_module
    eager = ExportPass()(module).graph_module
    with speedups.upstream_speedups(("lazy-retrace-codegen",)):
        lazy = ExportPass()(module).graph_module
        assert isinstance(lazy, _LazyGraphModule) and type(lazy)._needs_recompile()
        for spec in ("_in_spec", "_out_spec"):  # set at once, as an eager recompile does
            assert getattr(lazy, spec, None) == getattr(eager, spec, None)
        assert not isinstance(torch.fx.GraphModule(module, module.graph), _LazyGraphModule)
    x = torch.tensor([-2.0, 3.0])
    assert lazy(x)[0].tolist() == eager(x)[0].tolist() == [1.0, 4.0]  # generated on the call
    assert not type(lazy)._needs_recompile() and lazy.code == eager.code
    assert not isinstance(ExportPass()(module).graph_module, _LazyGraphModule)  # restored
    from toolkit.lower.retrace_speedups import _LazyRetraceModule

    unlifted = torch.export.export(Net(), (torch.ones(2),)).module()  # a pytree codegen
    lazy_unlifted = _LazyRetraceModule(unlifted, unlifted.graph)
    assert lazy_unlifted._in_spec == unlifted._in_spec is not None
    assert lazy_unlifted._out_spec == unlifted._out_spec is not None


def test_on_other_versions_upstream_runs_unpatched_and_etk_says_so_once(monkeypatch, capsys):
    from torch.fx import GraphModule

    monkeypatch.setattr(speedups, "_told", set())
    monkeypatch.setattr(
        speedups, "installed_versions", lambda: {**speedups.WRITTEN_FOR, "torchao": "0.19.0"}
    )
    upstream = GraphModule.__dict__["recompile"]
    for _ in range(2):
        with speedups.upstream_speedups(("skip-unchanged-recompile", "serial-histogram-observers")):
            assert GraphModule.__dict__["recompile"] is not upstream  # torch's: patched
            assert HistogramObserver.__dict__["forward"] is HISTOGRAM_FORWARD  # torchao's: not
    assert capsys.readouterr().err == (
        "etk: installed torchao 0.19.0 (written for 0.18.0): serial-histogram-observers not "
        "installed, upstream's code runs unpatched (the same results, slower compiles)\n"
    )
    assert GraphModule.__dict__["recompile"] is upstream


def test_the_written_for_versions_are_the_installed_ones():
    assert speedups.installed_versions() == speedups.WRITTEN_FOR
    assert set(speedups.PATCHED_PACKAGES) == set(speedups.SPEEDUPS)
    assert all(speedups.version_mismatches(name) == [] for name in speedups.SPEEDUPS)


def test_the_environment_chooses_the_speedups(monkeypatch):
    monkeypatch.setenv(speedups.SPEEDUPS_ENV, "none")
    assert speedups.chosen_speedups() == ()
    monkeypatch.setenv(speedups.SPEEDUPS_ENV, "fast-pass-pytree, shared-provenance")
    assert speedups.chosen_speedups() == ("fast-pass-pytree", "shared-provenance")
    monkeypatch.setenv(speedups.SPEEDUPS_ENV, "fast-pytree")
    with pytest.raises(
        UserError,
        match=r"^ETK_UPSTREAM_SPEEDUPS: unknown speedup fast-pytree; give none or some of shared-provenance, ",
    ):
        speedups.chosen_speedups()
    monkeypatch.delenv(speedups.SPEEDUPS_ENV)
    assert speedups.chosen_speedups() == tuple(speedups.SPEEDUPS)


def test_a_patch_restores_an_inherited_attribute_by_deleting_its_own():
    assert "call" not in SymToTensorPass.__dict__  # ExportPass's
    with speedups.upstream_speedups(("skip-static-sym-to-tensor",)):
        assert "call" in SymToTensorPass.__dict__
    assert "call" not in SymToTensorPass.__dict__


def test_the_table_attribution_hook_leaves_other_executorch_versions_alone(monkeypatch):
    from executorch.backends.arm._passes.insert_table_ops import InsertTableOpsPass

    from toolkit.lower import tosa_sources

    upstream = InsertTableOpsPass.call
    with tosa_sources._table_nodes_keep_their_call():
        assert InsertTableOpsPass.call is not upstream
    assert InsertTableOpsPass.call is upstream
    other = {**speedups.WRITTEN_FOR, "executorch": "1.6.0"}
    monkeypatch.setattr(tosa_sources, "installed_versions", lambda: other)
    with tosa_sources._table_nodes_keep_their_call():
        assert InsertTableOpsPass.call is upstream
