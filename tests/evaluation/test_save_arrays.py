"""save_arrays: a later run with fewer samples leaves no arrays of the earlier one behind."""

from __future__ import annotations

import numpy as np

from toolkit.evaluation.evaluate import save_arrays


def _samples(count: int, tensors: int, start: int):
    return [
        tuple(np.full((2,), start + 10 * k + i, np.int8) for i in range(tensors))
        for k in range(count)
    ]


def test_a_smaller_run_removes_the_earlier_runs_extra_files(tmp_path):
    save_arrays(tmp_path, "input", _samples(3, 2, 0))
    save_arrays(tmp_path, "output", _samples(3, 1, 0))
    save_arrays(tmp_path, "float_output", _samples(3, 1, 0))
    np.save(tmp_path / "notes.npy", np.zeros(1))  # not ours: kept

    save_arrays(tmp_path, "input", _samples(1, 1, 50))
    save_arrays(tmp_path, "output", _samples(2, 1, 60))

    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "float_output_0_0.npy",  # another prefix ("output" is its suffix): untouched
        "float_output_1_0.npy",
        "float_output_2_0.npy",
        "input_0_0.npy",
        "notes.npy",
        "output_0_0.npy",
        "output_1_0.npy",
    ]
    assert np.load(tmp_path / "input_0_0.npy").tolist() == [50, 50]
    assert np.load(tmp_path / "output_1_0.npy").tolist() == [70, 70]
    assert np.load(tmp_path / "float_output_2_0.npy").tolist() == [20, 20]
