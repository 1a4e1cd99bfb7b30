import math
from dataclasses import replace

import numpy as np
import pytest

from toolkit.artifacts import TensorQuant
from toolkit.evaluation.evaluate import is_logits
from toolkit.evaluation.metrics import (
    Accuracy,
    OutputAccuracy,
    cosine_similarity,
    exact_match_rate,
    low_sqnr_warnings,
    max_abs_err_lsb,
    output_accuracy,
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


# scale 0.1, zero point 0: int8 holds -12.8..12.7; a float value beyond 12.75 is clipped at qmax
QUANT = TensorQuant(0.1, 0, -128, 127, "int8")


def _two_outputs() -> tuple[OutputAccuracy, OutputAccuracy]:
    """Two samples of logits (1, 3), one step off once, and a regression (1, 2) clipped once."""
    logits = output_accuracy(
        0,
        [np.array([[1.0, 2.0, 3.0]]), np.array([[3.0, 1.0, 0.5]])],
        [np.array([[1.0, 2.1, 3.0]]), np.array([[3.0, 1.0, 0.5]])],
        QUANT,
        classifier=True,
    )
    regression = output_accuracy(
        1,
        [np.array([[20.0, 1.0]]), np.array([[-1.0, 2.0]])],
        [np.array([[12.7, 1.0]]), np.array([[-1.0, 2.0]])],
        QUANT,
        classifier=False,
    )
    return logits, regression


def test_output_accuracy_of_each_output():
    logits, regression = _two_outputs()
    # signal 24.25 over noise 0.1^2
    assert logits.sqnr_db == pytest.approx(10 * math.log10(24.25 / 0.01), abs=1e-9)
    assert logits.shape == (1, 3) and logits.top1_agreement == 1.0
    assert logits.max_abs_err_lsb == pytest.approx(1.0, abs=1e-9)
    assert (logits.clipped, logits.clipped_error_share) == (0, 0.0)
    # 20.0 came out as qmax (12.7): signal 406 over noise 7.3^2, all of it clipping
    assert regression.sqnr_db == pytest.approx(10 * math.log10(406 / 7.3**2), abs=1e-9)
    assert regression.max_abs_err_lsb == pytest.approx(73.0, abs=1e-9)
    assert regression.top1_agreement is None
    assert (regression.clipped, regression.clipped_error_share) == (1, 1.0)


def test_values_at_qmin_the_float_model_also_has_are_not_clipped():
    """A fused ReLU's zero point is qmin: its zeros sit at qmin and are exact."""
    relu = TensorQuant(0.1, -128, -128, 127, "int8")
    out = output_accuracy(0, [np.array([0.0, 0.0, 2.0])], [np.array([0.0, 0.0, 2.1])], relu, False)
    assert (out.clipped, out.clipped_error_share) == (0, 0.0)


def test_headline_is_the_worst_output():
    logits, regression = _two_outputs()
    acc = Accuracy(2, (logits, regression))
    assert acc.worst is regression
    assert (acc.sqnr_db, acc.cosine, acc.max_abs_err_lsb, acc.top1_agreement) == (
        regression.sqnr_db,
        regression.cosine,
        regression.max_abs_err_lsb,
        None,
    )


def test_one_warning_line_per_output_below_20_db_with_its_cause():
    logits, regression = _two_outputs()
    assert low_sqnr_warnings(Accuracy(2, (logits, regression))) == [
        "output 1 SQNR 8.8 dB vs float (below 20 dB): 1 of 4 values clipped at qmin/qmax, "
        "100% of the error: the calibrated range is too narrow; calibrate on more or "
        "representative data (--calibration-data, --calibration-samples)"
    ]
    # 0.04 rounds to 0 at step 0.1: 17.6 dB, nothing clipped
    coarse = output_accuracy(0, [np.array([0.3, 0.04])], [np.array([0.3, 0.0])], QUANT, False)
    assert coarse.sqnr_db == pytest.approx(10 * math.log10(0.0916 / 0.0016), abs=1e-9)
    assert low_sqnr_warnings(Accuracy(1, (coarse,))) == [
        "output 0 SQNR 17.6 dB vs float (below 20 dB): rounding, not clipping (0 of 2 values "
        "clipped at qmin/qmax, 0% of the error): a dynamic range wider than int8 holds, in this "
        "output or a tensor before it"
    ]


def test_a_runner_below_a_good_host_reference_is_blamed():
    logits, regression = _two_outputs()
    host = Accuracy(2, (logits, replace(regression, sqnr_db=30.0)))
    assert low_sqnr_warnings(Accuracy(2, (logits, regression)), host) == [
        "output 1 SQNR 8.8 dB vs float (below 20 dB): the host reference has 30.0 dB: the "
        "runner's outputs differ from it"
    ]


def test_logits_are_two_dimensional_with_fewer_classes_than_input_values():
    assert is_logits((1, 10), (1, 3, 8, 8)) and is_logits((4, 10), (4, 3, 8, 8))
    assert not is_logits((1, 1, 8, 8), (1, 3, 8, 8))  # a regression map
    assert not is_logits((1, 1), (1, 3, 8, 8))  # one value
    assert not is_logits((1, 640), (1, 640))  # a reconstruction
