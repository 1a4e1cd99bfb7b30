"""A Vela-compiled .tflite whose fields do not hold together is one PayloadError line (the
CLI's exit 2), never a traceback or an allocation the size a field claims. Each case edits one
field of Vela's own output for KWS in place (the flatbuffer's vectors, found by the reader)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ethosu.vela.tflite.Model import Model

from toolkit.sim.errors import PayloadError
from toolkit.sim.vela_tflite import load_compiled_tflite

from .test_fuzz_data_files import vela_compiled_kws

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ETK = [sys.executable, "-m", "toolkit.cli"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return vela_compiled_kws(tmp_path_factory.mktemp("vela"))


def _vector(table, slot: int) -> int:
    """Where the elements of a table's vector field (its vtable slot) start in the buffer."""
    return table._tab.Vector(table._tab.Offset(slot))


def _npu_operator(model: Model):
    graph = model.Subgraphs(0)
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).CustomCode() == b"ethos-u":
            return graph, op
    raise AssertionError("no ethos-u operator")


def _edited(path: Path, tmp_path: Path, edit) -> Path:
    data = bytearray(path.read_bytes())
    model = Model.GetRootAs(bytes(data), 0)
    at, value = edit(model)
    struct.pack_into("<i", data, at, value)
    edited = tmp_path / "edited_vela.tflite"
    edited.write_bytes(bytes(data))
    return edited


def _ifm_input(value):
    def edit(model):
        _, op = _npu_operator(model)
        return _vector(op, 6) + 4 * 4, value  # inputs[4]: the first IFM

    return edit


def _first_ifm_dimension(value):
    def edit(model):
        graph, op = _npu_operator(model)
        tensor = graph.Tensors(op.Inputs(4))
        return _vector(tensor, 4) + 4, value  # shape[1]

    return edit


def _producer_free_tensor(model):
    """The first IFM made to name the NPU operator's own output: no one makes it before."""
    _, op = _npu_operator(model)
    return _vector(op, 6) + 4 * 4, op.Outputs(0)


CASES = {
    "input index -1": (
        _ifm_input(-1),
        "edited_vela.tflite operator 0: ethos-u operator names tensor -1, which does "
        "not exist (the graph has {count})",
    ),
    "input index past the tensors": (
        _ifm_input(999),
        "edited_vela.tflite operator 0: ethos-u operator names tensor 999, which does "
        "not exist (the graph has {count})",
    ),
    "a tensor nobody makes": (
        _producer_free_tensor,
        "edited_vela.tflite: operator 0 (ethos-u) reads tensor {output} ('{name}'), which "
        "no earlier operator or input makes",
    ),
    "dimension -1": (_first_ifm_dimension(-1), "has shape (1, -1,"),
    "dimension 2^31 - 1": (_first_ifm_dimension(2**31 - 1), "is larger than 2 GiB"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_field_is_one_payload_error(compiled, tmp_path, case):
    edit, message = CASES[case]
    model = Model.GetRootAs(compiled.read_bytes(), 0)
    graph, op = _npu_operator(model)
    expected = message.format(
        count=graph.TensorsLength(),
        output=op.Outputs(0),
        name=graph.Tensors(op.Outputs(0)).Name().decode(),
    )
    with pytest.raises(PayloadError) as caught:
        load_compiled_tflite(_edited(compiled, tmp_path, edit))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_the_cli_says_it_in_one_line_exit_2(compiled, tmp_path):
    edited = _edited(compiled, tmp_path, _first_ifm_dimension(2**31 - 1))
    done = subprocess.run(
        [*ETK, "deploy", str(edited), "--runner", "sim", "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("etk: error: ") and "is larger than 2 GiB" in line


def test_random_byte_flips_are_a_run_or_one_error(compiled, tmp_path):
    """200 seeded single-byte flips of the compiled file: each loads, or is a PayloadError or
    UnsupportedError; never another exception."""
    from toolkit.sim.errors import SimError

    data = compiled.read_bytes()
    rng = np.random.default_rng(11)
    loaded = refused = 0
    for _ in range(200):
        mutated = bytearray(data)
        at = int(rng.integers(0, len(mutated)))
        mutated[at] ^= 1 << int(rng.integers(0, 8))
        path = tmp_path / "flip_vela.tflite"
        path.write_bytes(bytes(mutated))
        try:
            load_compiled_tflite(path)
            loaded += 1
        except SimError:
            refused += 1
    assert loaded + refused == 200 and loaded > 0
