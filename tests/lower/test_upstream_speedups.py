"""lower/upstream_speedups.py: the same compiled bytes with and without, and each speedup applies."""

from __future__ import annotations

import contextlib
import hashlib
import operator

import pytest
import torch
from executorch.exir.passes.sym_to_tensor_pass import SymToTensorPass
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export.exported_program import ExportedProgram
from torch.fx import traceback as fx_traceback

from toolkit.lower import build_variant, compiler
from toolkit.lower import upstream_speedups as speedups
from toolkit.lower.compile_cache import CACHE_DIR_ENV
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.targets import load_target


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


def _compile_both_ways(spec, variant, tmp_path, monkeypatch):
    model = load_model(spec)
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
