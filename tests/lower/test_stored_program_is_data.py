"""A stored program (OUT/VARIANT, an ETK_CACHE_DIR entry) is data, whoever wrote it: a crafted
host graph with its checksums recomputed runs nothing and writes nothing, and a changed .tosa
never reaches a native reader in etk's own process (issue 45, item 1)."""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from toolkit.lower.build_variant import compile_variant
from toolkit.lower.program_store import (
    HOST_GRAPH_FILE,
    PROGRAM_FILE,
    StoreDamaged,
    _checksums,
    load_stored_program,
)
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.runners.host_interpreter import execute
from toolkit.targets import load_target

MODEL = "zoo:conv2d_relu"


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A program compiled once for the module: its folder, copied by each test before crafting."""
    model = load_model(MODEL)
    out = tmp_path_factory.mktemp("stored")
    npu = load_target("corstone-300").npu()
    compile_variant(model, random_calibration(model.example_inputs, 4, 0), "fused", npu, out)
    return out / "fused"


def _reseal(folder: Path) -> None:
    """What an attacker with write access does: recompute program.json's list of checksums."""
    data = json.loads((folder / PROGRAM_FILE).read_text())
    data["files"] = _checksums(folder)
    (folder / PROGRAM_FILE).write_text(json.dumps(data))


def _crafted(stored: Path, tmp_path: Path, nodes_of) -> Path:
    folder = tmp_path / "crafted"
    shutil.copytree(stored, folder)
    graph = json.loads((folder / HOST_GRAPH_FILE).read_text())
    graph["nodes"] = nodes_of(graph["nodes"])
    (folder / HOST_GRAPH_FILE).write_text(json.dumps(graph))
    _reseal(folder)
    return folder


def _payload_nodes(library: Path, size: int):
    """The issue's attack: map a file shared and writable, copy bytes into it, load it as a library
    (reached through __self__), in each spelling an attacker might try."""
    source = {"node": "x"}
    return [
        {
            "op": "call_function",
            "name": "mapped",
            "target": target,
            "args": {"seq": [str(library), True, size], "tuple": True},
            "kwargs": {},
        }
        for target in (
            "aten.from_file.default",
            "edge:aten.from_file.default",
            "aten:aten.from_file.default",
        )
    ] + [
        {
            "op": "call_function",
            "name": f"step{i}",
            "target": target,
            "args": {"seq": [source, str(library)], "tuple": True},
            "kwargs": {},
        }
        for i, target in enumerate(
            (
                "aten.copy_.default",
                "aten.from_file.__self__",
                "aten.__class__.__init__",
                "aten:torch.ops.load_library",
                "torch.ops.load_library",
                "aten.from_file.default.__self__.load_library",
                "quantized_decomposed.choose_qparams.tensor",
                "aten.rand.default",
                "aten._print.default",
            )
        )
    ]


@pytest.mark.parametrize("index", range(12))
def test_a_crafted_node_is_refused_and_nothing_is_written(stored, tmp_path, index):
    library = tmp_path / "evil.so"
    attack = _payload_nodes(library, 1 << 16)[index]

    def inject(nodes):
        placeholder = next(n for n in nodes if n["op"] == "placeholder")
        attack["args"]["seq"][0] = (
            {"node": placeholder["name"]} if index >= 3 else attack["args"]["seq"][0]
        )
        return [nodes[0], attack, *nodes[1:]]

    folder = _crafted(stored, tmp_path, inject)
    with pytest.raises(StoreDamaged, match="operator etk does not run"):
        load_stored_program(folder)
    assert not library.exists()


def test_a_crafted_cache_entry_is_compiled_again_by_etk_and_runs_nothing(tmp_path):
    """The issue's end-to-end case: the crafted program sits in ETK_CACHE_DIR under the key etk
    asks for; `etk compile` into a new folder says it is damaged, compiles, exits 0."""
    library = tmp_path / "evil.so"
    cache = tmp_path / "cache"
    env = {**os.environ, "ETK_CACHE_DIR": str(cache)}

    def compile_into(out: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "toolkit.cli", "compile", MODEL, "-o", str(tmp_path / out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )

    assert compile_into("first").returncode == 0
    entry = next(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))
    graph = json.loads((entry / HOST_GRAPH_FILE).read_text())
    nodes = graph["nodes"]
    graph["nodes"] = [nodes[0], *_payload_nodes(library, 64)[:1], *nodes[1:]]
    (entry / HOST_GRAPH_FILE).write_text(json.dumps(graph))
    _reseal(entry)
    done = compile_into("second")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-2000:]
    assert "damaged" in said and "operator etk does not run" in said, said[-2000:]
    assert "Traceback" not in said
    assert not library.exists()


def test_a_graph_not_compiled_here_runs_in_a_child_of_its_own_with_the_same_bits(
    stored, monkeypatch
):
    """A stored graph passed the zero-input probe; any other input could still crash it, so
    etk runs it in a child (lower/tosa_isolated.py), and gets the in-process bits."""
    import tosa_reference_model

    from toolkit.lower import tosa_isolated, tosa_probe
    from toolkit.runners.tosa_ref import run_tosa_delegate

    program = load_stored_program(stored)
    assert program is not None
    delegate = program.delegates[0]
    inputs = [np.random.default_rng(3).integers(-128, 128, (1, 3, 16, 16)).astype(np.int8)]
    here, _status = tosa_reference_model.run(delegate.tosa_path.read_bytes(), inputs)
    monkeypatch.setattr(tosa_probe, "_COMPILED", set())  # as in a later etk process
    before = set(tosa_isolated._Children.live)
    outputs = run_tosa_delegate(delegate, inputs)
    assert len(set(tosa_isolated._Children.live) - before) == 1
    assert [o.tobytes() for o in outputs] == [o.tobytes() for o in here]


def _regions_offset(graph: bytes) -> int:
    """Where the root table (TosaGraph) of a .tosa flatbuffer holds its uoffset to `regions`."""
    root = struct.unpack_from("<I", graph, 0)[0]
    vtable = root - struct.unpack_from("<i", graph, root)[0]
    return root + struct.unpack_from("<H", graph, vtable + 4 + 2)[0]  # field 1: regions


def test_a_graph_that_kills_the_reference_model_is_one_line_and_etk_lives(stored, tmp_path):
    """The graph's offset to its regions (TosaGraph's second field) pointed 2 GiB past the
    file kills the reference model (SIGSEGV) on any input: in a child, that is a ToolError naming
    the file, and the next run starts a new child. (A damage near the buffer, such as byte 48 set
    to 0xff, kills it only on some runs: what lies past the buffer varies.)"""
    from dataclasses import replace

    from toolkit.errors import ToolError
    from toolkit.runners.tosa_ref import run_tosa_delegate

    program = load_stored_program(stored)
    assert program is not None
    delegate = program.delegates[0]
    damaged = bytearray(delegate.tosa_path.read_bytes())
    damaged[_regions_offset(damaged) + 3] = 0x7F  # the offset's high byte: 2 GiB further on
    path = tmp_path / "delegate0.tosa"
    path.write_bytes(bytes(damaged))
    zeros = [np.zeros((1, 3, 16, 16), np.int8)]
    with pytest.raises(ToolError, match=r"died \(signal 11\) running .*delegate0.tosa") as died:
        run_tosa_delegate(replace(delegate, tosa_path=path), zeros)
    assert "\n" not in str(died.value)
    assert run_tosa_delegate(delegate, zeros)[0].shape == (1, 8, 16, 16)


def test_vela_reads_a_stored_graph_in_a_child_and_a_damaged_one_is_a_tool_error(
    stored, tmp_path, monkeypatch
):
    """Vela's C++ core is a native reader too: a graph not compiled here is estimated in a child
    (sim/vela_estimate_isolated.py) with the in-process figures; a file it cannot read is one line."""
    from dataclasses import replace

    from toolkit.errors import ToolError
    from toolkit.lower import tosa_probe
    from toolkit.sim.vela_estimate import _cached_estimates, vela_estimates

    program = load_stored_program(stored)
    assert program is not None
    delegate, npu = program.delegates[0], program.npu
    here = vela_estimates(str(delegate.tosa_path), npu.accelerator)
    monkeypatch.setattr(tosa_probe, "_COMPILED", set())
    _cached_estimates.cache_clear()
    child = _cached_estimates(str(delegate.tosa_path), npu.accelerator, None, None)

    def unnamed(estimates):  # Vela numbers the operations it adds per process ('#43')
        return [e._replace(name="#") if e.name.startswith("#") else e for e in estimates]

    assert unnamed(child) == unnamed(here)
    assert [e.operator for e in here].count("Conv2D") == 1
    path = tmp_path / "delegate0.tosa"
    path.write_bytes(bytes(random.Random(1).randrange(256) for _ in range(4000)))
    with pytest.raises(ToolError, match="Vela could not read .*delegate0.tosa") as failed:
        _cached_estimates(
            str(replace(delegate, tosa_path=path).tosa_path), npu.accelerator, None, None
        )
    assert "\n" not in str(failed.value)


def test_constants_are_raw_numbers_not_a_pickle(stored, tmp_path):
    folder = tmp_path / "crafted"
    shutil.copytree(stored, folder)
    assert not list(folder.glob("*.pt"))  # no torch.load of anything stored
    constants = folder / "host_graph.constants.bin"
    if constants.exists():
        constants.write_bytes(b"\x80\x04\x95" + constants.read_bytes()[3:])  # pickle's opening
        _reseal(folder)
        load_stored_program(folder)  # bytes are numbers: nothing to unpickle, nothing runs


def _mutate(nodes: list[dict], rng: random.Random, pool: list[str]) -> list[dict]:
    nodes = json.loads(json.dumps(nodes))
    for _ in range(rng.choice((1, 1, 2, 3))):
        node = rng.choice(nodes)
        what = rng.randrange(8)
        if what == 0 and "target" in node:
            node["target"] = rng.choice(pool)
        elif what == 1:
            node["args"] = rng.choice(
                [
                    7,
                    None,
                    "x",
                    [1, 2],
                    {"seq": [], "tuple": True},
                    {"node": rng.choice(nodes)["name"]},
                    {"seq": [{"node": rng.choice(nodes)["name"]}, 1.5, "a"], "tuple": True},
                    {"dtype": "load"},
                ]
            )
        elif what == 2:
            node["kwargs"] = rng.choice(
                [
                    {"__class__": 1},
                    {"out": {"node": nodes[0]["name"]}},
                    [],
                    {"x": {"layout": "strided"}},
                ]
            )
        elif what == 3 and "shape" in node:
            node["shape"] = rng.choice(
                [[], [0], [1 << 40, 1 << 40], [-1], "1,2", [1, 2, 3, 4, 5, 6, 7, 8, 9]]
            )
        elif what == 4:
            node["op"] = rng.choice(
                ["call_module", "call_method", "get_attr", "placeholder", "output"]
            )
        elif what == 5:
            node["name"] = rng.choice(["__class__", "x y", nodes[0]["name"], "", 3])
        elif what == 6:
            rng.shuffle(nodes)
        elif "constant" in node:
            node["constant"] = rng.choice(
                [
                    {"dtype": "object", "shape": [1], "offset": 0, "size": 8},
                    {"dtype": "float32", "shape": [4], "offset": -4, "size": 16},
                    {"dtype": "int8", "shape": [1 << 30], "offset": 0, "size": 1 << 30},
                ]
            )
    return nodes


def _zeros_delegate(delegate, inputs):
    return [np.zeros((1, 16, 16, 8), np.int8) for _ in delegate.outputs]


@pytest.mark.parametrize("seed", range(4))
def test_a_fuzz_of_crafted_host_graphs_runs_nothing_and_raises_only_damage(stored, tmp_path, seed):
    """100 mutations per seed (500 under -m slow): every one loads and runs, or is damaged; no
    other exception, no file written outside the folder."""
    from toolkit.errors import ToolError

    rng = random.Random(seed)
    pool = [
        "aten.from_file.default",
        "aten.copy_.default",
        "aten.add.Tensor",
        "aten.relu.default",
        "aten.full.default",
        "aten.empty.memory_format",
        "getitem",
        "delegate",
        "quantized_decomposed.dequantize_per_tensor.default",
        "aten.view_copy.default",
        "aten.__init__.x",
        "edge:aten.add.Tensor",
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    original = json.loads((stored / HOST_GRAPH_FILE).read_text())["nodes"]
    outcomes = {"damaged": 0, "ran": 0, "failed in one line": 0}
    for _ in range(100):
        folder = _crafted(stored, tmp_path, lambda nodes: _mutate(original, rng, pool))
        try:
            program = load_stored_program(folder)
        except StoreDamaged:
            outcomes["damaged"] += 1
        else:
            try:
                execute(
                    program,
                    [np.zeros(s.shape, np.float32) for s in program.input_specs],
                    _zeros_delegate,
                )
                outcomes["ran"] += 1
            except ToolError as exc:
                assert "\n" not in str(exc)
                outcomes["failed in one line"] += 1
        shutil.rmtree(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert outcomes["damaged"] > 50, outcomes
