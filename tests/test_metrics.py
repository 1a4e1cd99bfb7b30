import math

import numpy as np
import pytest

from toolkit.evaluation.metrics import (
    accuracy,
    cosine_similarity,
    exact_match_rate,
    max_abs_err_lsb,
    sqnr_db,
    top1_agreement,
)


def test_sqnr_known_values():
    ref = np.array([1.0, -1.0, 1.0, -1.0])
    assert sqnr_db(ref, ref) == math.inf
    # noise power 0.01 per element vs signal 1 per element: 20 dB
    assert sqnr_db(ref, ref + 0.1) == pytest.approx(20.0)
    assert sqnr_db(np.zeros(3), np.ones(3)) == -math.inf


def test_max_abs_err_in_lsb():
    assert max_abs_err_lsb(np.array([0.0, 0.5]), np.array([0.25, 0.5]), 0.125) == 2.0


def test_exact_match_and_cosine_and_top1():
    assert exact_match_rate(np.array([1, 2, 3, 4]), np.array([1, 2, 0, 4])) == 0.75
    assert cosine_similarity([1, 0], [0, 1]) == 0.0
    assert cosine_similarity([1, 2], [2, 4]) == pytest.approx(1.0)
    ref = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    test = np.array([[0.2, 0.8], [0.1, 0.9], [0.0, 1.0]])
    assert top1_agreement(ref, test) == pytest.approx(2 / 3)


def test_accuracy_aggregates_samples():
    floats = [np.array([[1.0, 2.0]]), np.array([[2.0, 1.0]])]
    quant = [np.array([[1.0, 2.5]]), np.array([[2.0, 1.0]])]
    acc = accuracy(floats, quant, output_scale=0.25, classifier=True)
    assert acc.samples == 2 and acc.max_abs_err_lsb == 2.0 and acc.top1_agreement == 1.0
    assert acc.sqnr_db == pytest.approx(10 * math.log10(10 / 0.25))
