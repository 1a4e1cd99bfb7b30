"""Ethos-U85 command streams executed by the simulator (issue 47): Vela 5.2.0's streams for
ethos-u85-256, bit-exact with the TOSA reference model, and what is refused up front.

The operation cases of conftest.py (convolutions of every shape the sweep covers, depthwise,
fully connected, pools, elementwise with broadcasts and scalars, transposed convolutions) are
compiled again for ethos-u85-256 (their TOSA graphs are the ones the U55 tests lower); zoo:ds_cnn
comes through the toolkit's own chain for corstone-320, fused and unfused. The slow sweep
(test_u85_sweep.py) runs the zoo on every U85 configuration.
"""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.sim import load_payload, simulate

from .conftest import DEFAULT_CASES

U85 = "ethos-u85-256"


@pytest.mark.parametrize("name", DEFAULT_CASES)
def test_operation_cases_run_bit_exact_on_u85(cases, name):
    case = cases.get(name, U85)
    program = load_payload(case.npz[U85])
    got = simulate(program, case.inputs, U85).outputs[0]
    assert np.array_equal(got.reshape(-1), np.asarray(case.expected).reshape(-1))
