"""Task accuracy on labelled data: metrics, the data folder rules, and a job with --eval-data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from toolkit.errors import UserError
from toolkit.evaluation.eval_data import load_labelled
from toolkit.evaluation.task_eval import float_accuracy, task_metric
from toolkit.evaluation.task_metrics import reconstruction_scores, roc_auc, top1
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import calibration_subset, folder_calibration


def test_top1_and_reconstruction_scores():
    assert top1(np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), np.array([1, 1, 1])) == 2 / 3
    x = np.array([[[1.0, 1.0], [0.0, 0.0]]])  # one clip, two windows of two features
    assert reconstruction_scores(x, np.zeros_like(x)).tolist() == [0.5]


def test_roc_auc_known_values():
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    # pairs (anomalous, normal): (0.5 vs 0.1) win, (0.5 vs 0.5) tie, (0.3 vs 0.1) win, (0.3 vs 0.5) loss
    assert roc_auc([0.5, 0.1, 0.3, 0.5], [1, 0, 1, 0]) == pytest.approx((1 + 0.5 + 1 + 0) / 4)


def test_roc_auc_agrees_with_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 300)
    scores = np.round(rng.normal(labels * 0.7, 1.0), 1)  # rounded: many ties
    assert roc_auc(scores, labels) == pytest.approx(
        metrics.roc_auc_score(labels, scores), abs=1e-12
    )


def test_eval_folder_rules(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((5, 1, 49, 10), np.float32))
    with pytest.raises(UserError, match=r"holds x.npy but no y.npy"):
        load_labelled(tmp_path, (1, 1, 49, 10))
    np.save(tmp_path / "y.npy", np.zeros(4, np.int64))
    with pytest.raises(UserError, match=r"y.npy is int64 \(4,\): expected 5 integer labels"):
        load_labelled(tmp_path, (1, 1, 49, 10))
    with pytest.raises(
        UserError, match=r"x.npy has shape \(5, 1, 49, 10\): expected \(N, 49, 10, 1\)"
    ):
        load_labelled(tmp_path, (1, 49, 10, 1))
    np.save(tmp_path / "x.npy", np.zeros((4, 1, 49, 10), np.int8))
    with pytest.raises(UserError, match=r"x.npy is int8: expected float32 model inputs"):
        load_labelled(tmp_path, (1, 1, 49, 10))


def test_calibration_takes_the_labelled_layout_and_subsets(tmp_path):
    x = np.arange(6 * 32, dtype=np.float32).reshape(6, 32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.arange(6))  # ignored by calibration
    full = folder_calibration(tmp_path, (torch.zeros(1, 32),))
    assert len(full.samples) == 6 and torch.equal(full.samples[2][0], torch.from_numpy(x[2:3]))
    a, b = calibration_subset(full, 3, 0), calibration_subset(full, 3, 1)
    assert len(a.samples) == len(b.samples) == 3 and a.content_hash != b.content_hash
    assert a.source == f"{tmp_path} (subset of 3, seed 0)"
    with pytest.raises(UserError, match=r"a calibration subset of 7 samples: the set holds 6"):
        calibration_subset(full, 7, 0)


def test_autoencoder_auc_over_clip_windows(tmp_path):
    """fc_autoencoder@mlperf: clips whose windows are its own reconstructions score low, clips
    of noise high: ROC AUC 1 over (N, windows, 640) data."""
    model = load_model("zoo:fc_autoencoder@mlperf").module
    rng = np.random.default_rng(0)
    with torch.no_grad():
        normal = model(torch.from_numpy(rng.uniform(-20, 20, (12, 640)).astype(np.float32)))
        normal = model(normal).numpy().reshape(4, 3, 640)  # near a fixed point: small error
    anomalous = rng.uniform(-60, 60, (4, 3, 640)).astype(np.float32)
    np.save(tmp_path / "x.npy", np.concatenate([normal, anomalous]))
    np.save(tmp_path / "y.npy", np.array([0] * 4 + [1] * 4))
    data = load_labelled(tmp_path, (1, 640))
    assert task_metric((1, 640), (1, 640)) == "auc"
    result = float_accuracy(model, data, (1, 640), "auc")
    assert (result.metric, result.value, result.samples) == ("auc", 1.0, 8)


def test_compare_with_eval_data_and_seeds(tmp_path, capsys):
    """A job with --eval-data and --seeds 2: per variant one top-1 per calibration subset, their
    mean in report.json, and the float model's top-1 (1.0: labels are its own predictions)."""
    from toolkit.cli import main

    model = load_model("zoo:linear_relu").module
    x = np.random.default_rng(0).normal(size=(40, 32)).astype(np.float32)
    with torch.no_grad():
        y = model(torch.from_numpy(x)).numpy().argmax(1)
    for name in ("cal", "eval"):
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "x.npy", x)
        np.save(tmp_path / name / "y.npy", y)
    out = tmp_path / "out"
    assert (
        main(
            [
                "compare",
                "zoo:linear_relu",
                "--calibration-data",
                str(tmp_path / "cal"),
                "--calibration-samples",
                "10",
                "--eval-data",
                str(tmp_path / "eval"),
                "--seeds",
                "2",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads((out / "report.json").read_text())
    assert report["eval"]["float"] == 1.0
    assert report["eval"]["calibrations"] == [
        f"{tmp_path / 'cal'} (subset of 10, seed {k})" for k in (0, 1)
    ]
    for variant in ("fused", "unfused"):
        acc = report["variants"][variant]["accuracy"]
        assert len(acc["top1_seeds"]) == 2 and acc["top1"] == pytest.approx(
            np.mean(acc["top1_seeds"])
        )
        assert 0.5 < acc["top1"] <= 1.0 and acc["float_top1"] == 1.0 and acc["eval_samples"] == 40
        assert acc["eval_runner"] == "sim"
    assert (out / "seeds" / "seed_1" / "fused").is_dir()
    printed = capsys.readouterr().out
    assert "top-1 (mean of 2)" in printed and "float model" in printed


def test_a_tflite_files_own_accuracy_on_the_simulator(tmp_path):
    """kws_ref_model.tflite on the first 100 KWS inputs given as float NHWC features: the job
    quantizes them with the file's input parameters (which gives back the stored int8 codes
    exactly) and scores the file's outputs on the simulator."""
    from pathlib import Path

    from toolkit.cli import main

    repo = Path(__file__).parents[2]
    data = repo / "examples" / "data" / "kws-speech-commands"
    codes = np.load(data / "kws_x_int8.npy")[:100]
    np.save(tmp_path / "x.npy", (codes.astype(np.float32) - 83) * np.float32(0.5847029089927673))
    np.save(tmp_path / "y.npy", np.load(data / "kws_y.npy")[:100])
    out = tmp_path / "out"
    assert (
        main(
            [
                "compile",
                str(repo / "tests" / "fixtures" / "kws_ref_model.tflite"),
                "--eval-data",
                str(tmp_path),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    acc = json.loads((out / "report.json").read_text())["variants"]["tflite"]["accuracy"]
    assert (acc["top1"], acc["eval_samples"], acc["eval_runner"]) == (0.94, 100, "sim")
