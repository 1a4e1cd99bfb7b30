"""Compiled programs are reused from OUT by later processes, and only when nothing changed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import toolkit.lower.build_variant as compile_module
import toolkit.lower.compiler as compiler
from toolkit.lower.build_variant import compile_variant
from toolkit.models.loader import live_model, load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target

pytestmark = pytest.mark.usefixtures("no_shared_compile_cache")  # these test compiling itself


def test_program_is_reloaded_from_disk_and_runs_identically(tmp_path, monkeypatch):
    model = load_model("zoo:conv2d_bn_relu")
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    monkeypatch.setattr(compile_module, "_CACHE", {})  # not copied from an earlier test's compile
    first = compile_variant(model, calibration, "fused", npu, tmp_path)
    assert set(first.timings) == {"quantize", "lower", "reports"}
    monkeypatch.setattr(compile_module, "_CACHE", {})  # as in a new process
    monkeypatch.setattr(compiler, "quantize", lambda *a, **k: 1 / 0)  # must not compile
    second = compile_variant(model, calibration, "fused", npu, tmp_path)
    assert second.timings == {}
    assert second.delegates == first.delegates  # payload, ops, estimates, quantization
    assert (second.cpu_ops, second.decisions, second.output_quant) == (
        first.cpu_ops,
        first.decisions,
        first.output_quant,
    )
    x = [model.example_inputs[0].numpy()]
    assert np.array_equal(
        TosaReferenceRunner().run(first, x).outputs[0],
        TosaReferenceRunner().run(second, x).outputs[0],
    )


class ConvThenTransposed1d(torch.nn.Module):
    """Conv1d on the NPU, then a ConvTranspose1d the partitioner leaves to the CPU (it takes only
    2-D transposed convolutions; without the rewrite conv-transpose-1d-as-2d): the host graph
    reads the CPU op's weight by a dotted name."""

    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv1d(8, 16, 3, stride=2, padding=1)
        self.up = torch.nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1)

    def forward(self, x):
        return self.up(torch.relu(self.down(x)))


class ConvThenWhere(torch.nn.Module):
    """A torch.where left to the CPU: its scalar_tensor is a torch op (not an edge op) with a
    layout and a device among its arguments."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(8, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.where(y > 0.5, y, -1.0)


@pytest.mark.parametrize(
    "module,cpu_op",
    [(ConvThenTransposed1d, "aten.convolution.default"), (ConvThenWhere, "aten.where.self")],
)
def test_the_host_graph_of_cpu_operators_is_stored_and_reloaded(
    module, cpu_op, tmp_path, monkeypatch
):
    """Each failed to store or to load: AttributeError 'up.weight'; "cannot store graph argument
    of type layout"; then the loaded name "aten:scalar_tensor.default" lacked its namespace, so
    every later run called the stored program damaged and compiled it again."""
    torch.manual_seed(0)
    model = live_model(module().eval(), (torch.randn(1, 8, 32),))
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    monkeypatch.setattr(compile_module, "_CACHE", {})
    first = compile_variant(model, calibration, "fused", npu, tmp_path, rewrites=())
    assert cpu_op in [op.op for op in first.cpu_ops]
    monkeypatch.setattr(compile_module, "_CACHE", {})  # as in a new process
    monkeypatch.setattr(compiler, "quantize", lambda *a, **k: 1 / 0)  # must not compile
    second = compile_variant(model, calibration, "fused", npu, tmp_path, rewrites=())
    assert second.timings == {}  # loaded, not compiled again
    x = [model.example_inputs[0].numpy()]
    assert np.array_equal(
        TosaReferenceRunner().run(first, x).outputs[0],
        TosaReferenceRunner().run(second, x).outputs[0],
    )


def test_same_program_into_another_folder_is_copied_not_compiled(tmp_path, monkeypatch):
    model = load_model("zoo:conv2d_relu")
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    first = compile_variant(model, calibration, "fused", npu, tmp_path / "a")
    (first.out_dir / "reference").mkdir()
    (first.out_dir / "reference" / "output_0_0.npy").write_bytes(b"a run's file")
    monkeypatch.setattr(compiler, "quantize", lambda *a, **k: 1 / 0)  # must not compile
    second = compile_variant(model, calibration, "fused", npu, tmp_path / "b")
    assert second.out_dir == tmp_path / "b" / "fused" and second.timings == {}
    assert second.delegates[0].payload == first.delegates[0].payload
    assert second.delegates[0].tosa_path == second.out_dir / first.delegates[0].tosa_path.name
    assert not (second.out_dir / "reference").exists()  # only what the store lists is copied
    import shutil

    shutil.rmtree(tmp_path / "a")
    shutil.rmtree(tmp_path / "b")  # no copy left: compiled again (here: refused)
    try:
        compile_variant(model, calibration, "fused", npu, tmp_path / "c")
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("compiled from a folder that no longer exists")


def test_changed_calibration_recompiles(tmp_path, monkeypatch):
    model = load_model("zoo:conv2d_relu")
    npu = load_target("corstone-300").npu()
    compile_variant(model, random_calibration(model.example_inputs, 4, 0), "fused", npu, tmp_path)
    monkeypatch.setattr(compile_module, "_CACHE", {})
    again = compile_variant(
        model, random_calibration(model.example_inputs, 4, 1), "fused", npu, tmp_path
    )
    assert "lower" in again.timings


def _flip_byte(folder):
    data = bytearray((folder / "delegate0.bin").read_bytes())
    data[100] ^= 0xFF
    (folder / "delegate0.bin").write_bytes(bytes(data))


def _drop_estimate(folder):
    data = json.loads((folder / "program.json").read_text())
    del data["delegates"][0]["estimate"]
    (folder / "program.json").write_text(json.dumps(data))


def test_damaged_store_entries_are_compiled_again_with_a_note(tmp_path, monkeypatch):
    model = load_model("zoo:conv2d_relu")
    calibration = random_calibration(model.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    first = compile_variant(model, calibration, "fused", npu, tmp_path)
    folder = tmp_path / "fused"
    damages = [
        (_flip_byte, "delegate0.bin does not match its checksum"),
        (
            lambda f: (f / "vela_delegate0" / "delegate0_vela.npz").unlink(),
            "vela_delegate0/delegate0_vela.npz is missing",
        ),
        (_drop_estimate, "program.json is incomplete (KeyError: 'estimate')"),
        (
            lambda f: (f / "program.json").write_text('{"store_version": 2, "cach'),
            "program.json is unreadable",
        ),
    ]
    for damage, reason in damages:
        damage(folder)
        monkeypatch.setattr(compile_module, "_CACHE", {})
        notes = []
        again = compile_variant(model, calibration, "fused", npu, tmp_path, note=notes.append)
        assert len(notes) == 1 and reason in notes[0] and "compiling it again" in notes[0]
        assert "lower" in again.timings
        # (Vela numbers unnamed layers per process: compare the program and totals, not names)
        assert (again.delegates[0].payload, again.delegates[0].estimate.total_cycles) == (
            first.delegates[0].payload,
            first.delegates[0].estimate.total_cycles,
        )
        assert (folder / "delegate0.bin").read_bytes() == first.delegates[0].payload


def test_a_stored_graph_names_only_torch_constants_of_their_kind():
    """host_graph.json is data: a "dtype" must name a torch.dtype, not any attribute of torch."""
    from toolkit.lower.host_graph import _decode, _encode

    for value in (torch.int8, torch.strided, torch.contiguous_format, torch.device("cpu")):
        assert _decode(_encode(value), {}) == value
    for crafted in ({"dtype": "load"}, {"layout": "float32"}, {"device": "no such device"}):
        with pytest.raises(ValueError, match="not a torch"):
            _decode(crafted, {})


@pytest.mark.parametrize(
    "nodes",
    [
        [{"op": "placeholder", "name": "x"}, {"op": "output", "name": "output", "args": 7}],
        [{"op": "output", "name": "output", "args": {"seq": [{"node": "x"}], "tuple": True}}],
        [
            {"op": "placeholder", "name": "x"},
            {"op": "call_function", "name": "a", "target": "aten.relu.default", "args": 3},
        ],
    ],
    ids=["output-args-an-int", "unknown-node", "args-an-int"],
)
def test_a_stored_graph_that_is_not_one_is_an_error_not_a_crash(nodes, tmp_path):
    """torch.fx asserts on a malformed node (AssertionError, IndexError): from a file, that is a
    damaged store (ValueError, which load_stored_program reports as such)."""
    from toolkit.lower.host_graph import load_host_graph

    path = tmp_path / "host_graph.json"
    path.write_text(json.dumps({"nodes": nodes}))
    with pytest.raises(ValueError, match="host_graph.json is not a graph"):
        load_host_graph(path)
