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
from toolkit.sim.plan_image import from_parts, to_parts
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


def test_an_image_round_trips_and_a_broken_one_is_refused(vww, tmp_path):
    npz, x = vww
    _, path = _fresh_store(tmp_path, npz, x)
    image = derived_store.load(path, load_payload(npz).weights).image
    numbers, arrays = to_parts(image)
    table, blob = arrays["image:table"], arrays["image:blob"]
    back = from_parts(numbers, table, blob)
    assert bytes(back.table) == bytes(image.table) and bytes(back.blob) == bytes(image.blob)
    assert (back.steps, back.slots) == (image.steps, image.slots)
    assert back.slots == tuple(sorted({s for s in table[:, 1:5].ravel().tolist() if s >= 0}))
    assert (back.extent, back.constant_regions, back.operation_count) == (
        image.extent,
        image.constant_regions,
        image.operation_count,
    )

    def changed(row: int, word: int, value: int) -> np.ndarray:
        table_copy = table.copy()
        table_copy[row, word] = value
        return table_copy

    aligned = np.zeros(len(blob) + 16, np.uint8)
    refused = {
        "an array past the blob's end": (table, blob[:16]),
        "an array before the blob": (changed(0, -1, -16), blob),
        "a description reaching past the blob's end": (changed(0, 5, len(blob) - 8), blob),
        "a memory slot that does not exist": (changed(0, 1, 9), blob),
        "a kernel that does not exist": (changed(0, 0, 7), blob),
        "a blob not 16-byte aligned": (table, aligned[1 : len(blob) + 1]),
        "a row cut short": (table.reshape(-1)[:-1], blob),
    }
    for why, (bad_table, bad_blob) in refused.items():
        with pytest.raises(ValueError, match="do not fit together"):
            from_parts(numbers, bad_table, bad_blob)
            pytest.fail(why)
    with pytest.raises(ValueError, match="do not fit together"):
        from_parts(dict(numbers, operations=1), table, blob)  # steps past the last operation


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
