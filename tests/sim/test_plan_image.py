"""A program whose every operation ran natively keeps its plan's image in its store
(toolkit/sim/plan_image.py): a later process runs it from the image without planning, with the
same outputs, records and cycle figures; an image that cannot be trusted or used is not."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from toolkit.lower.tflite import compile_tflite
from toolkit.sim import derived_store, forget_programs, load_payload, simulate
from toolkit.sim import plan as plan_module
from toolkit.sim.native import batch
from toolkit.sim.plan_image import MAGIC, image_body, open_image
from toolkit.targets import load_target

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ACC = "ethos-u55-128"

pytestmark = pytest.mark.skipif(not batch.available(), reason="the native kernels are not built")


@pytest.fixture(scope="module")
def vww(tmp_path_factory):
    """Visual wake words on Ethos-U55: transposes, DMA'd streams, pools; its folder and input."""
    out = tmp_path_factory.mktemp("vww")
    compiled = compile_tflite(
        FIXTURES / "vww_96_int8.tflite", load_target("corstone-300").npu(ACC), out
    )
    shape = compiled.input_specs[0].shape
    x = np.random.default_rng(5).integers(-128, 128, shape, dtype=np.int8)
    return compiled.delegates[0].vela_npz_path, x


def _fresh_store(tmp_path: Path, npz, x):
    forget_programs()
    planned = simulate(load_payload(npz), [x], ACC, store=tmp_path)  # writes the image
    (path,) = tmp_path.glob("sim_*.bin")
    forget_programs()  # as a new process
    return planned, path


def test_a_new_process_runs_the_image_without_planning(vww, tmp_path, monkeypatch):
    npz, x = vww
    planned, path = _fresh_store(tmp_path, npz, x)
    kept = derived_store.load(path, load_payload(npz).weights)
    assert kept.image is not None and kept.weights == {} and kept.scales == []

    def no_planning(*args):
        raise AssertionError("planned")

    monkeypatch.setattr(plan_module, "_build", no_planning)
    again = simulate(load_payload(npz), [x], ACC, store=tmp_path)
    assert all(np.array_equal(a, b) for a, b in zip(again.outputs, planned.outputs))
    assert (again.npu_cycles, again.total_cycles, again.pmu) == (
        planned.npu_cycles,
        planned.total_cycles,
        planned.pmu,
    )
    assert again.operation_count == len(planned.operations)
    monkeypatch.undo()  # the records are planned when asked for, with the stored figures
    assert pickle.loads(pickle.dumps(again)).operations == planned.operations  # whole, with them
    assert again.operations == planned.operations
    forget_programs()


def _file(words: list[int], table: np.ndarray, blob: np.ndarray) -> bytes:
    """A store file (an unchecked digest first) of these header words, table and blob, laid
    out as plan_image.image_body lays them out."""

    def padded(chunk: bytes) -> bytes:
        return chunk + bytes(-len(chunk) % 16)

    head = MAGIC + np.array(words[1:], np.int64).tobytes()
    return bytes(32) + padded(head) + padded(table.tobytes()) + blob.tobytes()


def test_an_image_round_trips_and_a_broken_one_is_refused(vww, tmp_path):
    npz, x = vww
    _, path = _fresh_store(tmp_path, npz, x)
    kept = derived_store.load(path, load_payload(npz).weights)
    image = kept.image
    raw = bytes(32) + image_body(image, kept.timing)
    back, timing = open_image(raw)
    assert bytes(back.table) == bytes(image.table) and bytes(back.blob) == bytes(image.blob)
    assert (back.steps, back.regions, timing) == (image.steps, image.regions, kept.timing)
    table = np.frombuffer(image.table, np.int64).reshape(-1, 11)
    slots = sorted({s for s in table[:, 1:5].ravel().tolist() if s >= 0})
    assert back.regions == tuple((s, -1 if s == 8 else s) for s in slots)
    assert (back.extent, back.constant_regions, back.operation_count) == (
        image.extent,
        image.constant_regions,
        image.operation_count,
    )
    blob = np.frombuffer(image.blob, np.uint8)
    words = np.frombuffer(raw[32:], np.int64, count=int.from_bytes(raw[40:48], "little"))
    assert _file(words.tolist(), table, blob) == raw  # the layout as the test builds it

    def changed(array: np.ndarray, at, value: int) -> np.ndarray:
        array = array.copy()
        array[at] = value
        return array

    extent_at, constant_at = 5, 5 + 2 * len(image.extent)
    timing_at = constant_at + 1 + len(image.constant_regions) + len(image.steps)
    assert words[timing_at] == len(kept.timing) == 1
    refused = {
        "an array past the blob's end": (words, table, blob[:16]),
        "an array before the blob": (words, changed(table, (0, -1), -16), blob),
        "a description past the blob's end": (words, changed(table, (0, 5), len(blob) - 8), blob),
        "a memory slot that does not exist": (words, changed(table, (0, 1), 9), blob),
        "a kernel that does not exist": (words, changed(table, (0, 0), 7), blob),
        "a step past the last operation": (changed(words, 2, 1), table, blob),
        "more rows than the header holds": (changed(words, 3, 10**6), table, blob),
        "a header longer than the file": (changed(words, 1, 10**9), table, blob),
        "a header shorter than its numbers": (changed(words, 1, len(words) - 1), table, blob),
        "a region that does not exist": (changed(words, extent_at, 8), table, blob),
        "negative bytes": (changed(words, extent_at + 1, -1), table, blob),
        "a constant region that does not exist": (changed(words, constant_at + 1, 8), table, blob),
        "a count past the header": (changed(words, constant_at, 10**6), table, blob),
        "a negative operation count": (changed(words, timing_at + 2, -1), table, blob),
        "a negative figure count": (changed(words, timing_at + 3, -1), table, blob),
        "figures past the header": (changed(words, timing_at + 3, 10**6), table, blob),
    }
    for why, (bad_words, bad_table, bad_blob) in refused.items():
        assert open_image(_file(list(bad_words), bad_table, bad_blob)) is None, why
    assert open_image(raw[:-1] + b"\0") is not None  # a blob byte is only data
    assert open_image(memoryview(b"\0" + raw)[1:]) is None  # not 16-byte aligned
    assert open_image(raw[: 32 + 8 * len(words)]) is None  # cut after the header


def test_no_file_makes_open_image_reach_outside_it(vww, tmp_path):
    """Random words anywhere in a real image's header and table: each file is refused or opens
    (a crash here ends the test run)."""
    npz, x = vww
    _, path = _fresh_store(tmp_path, npz, x)
    kept = derived_store.load(path, load_payload(npz).weights)
    raw = bytearray(bytes(32) + image_body(kept.image, kept.timing))
    words = int.from_bytes(raw[40:48], "little")
    table_end = 32 + -(-8 * words // 16) * 16 + len(bytes(kept.image.table))
    rng = np.random.default_rng(11)
    opened = 0
    for _ in range(2000):
        bad = bytearray(raw)
        for at in rng.integers(4, table_end // 8, size=rng.integers(1, 4)):
            value = int(rng.choice([-1, 0, 1, 8, 9, 2**31, 2**62, int(rng.integers(0, 64))]))
            bad[8 * at : 8 * at + 8] = value.to_bytes(8, "little", signed=True)
        opened += open_image(bytes(bad)) is not None
    assert 0 < opened < 2000  # some mutations are harmless (a figure), most are refused


def test_without_native_batches_the_image_is_not_used(vww, tmp_path, monkeypatch):
    npz, x = vww
    planned, path = _fresh_store(tmp_path, npz, x)
    monkeypatch.setattr(plan_module, "native_batches", lambda: False)  # ETK_SIM_NATIVE=0's
    program = load_payload(npz)
    again = simulate(program, [x], ACC, store=tmp_path)
    assert plan_module.plan_for(program, ACC).planned is not None
    assert all(np.array_equal(a, b) for a, b in zip(again.outputs, planned.outputs))
    assert derived_store.load(path, program.weights).image is not None  # still kept
    forget_programs()
