"""BundleIO programs (.bpte): the .pte with test inputs and expected outputs, checked on the board.

ExecuTorch's Arm executor runner built with BundleIO (ET_BUNDLE_IO) loads test case 0's inputs
from the .bpte, runs the method, compares the outputs with the expected ones (atol and rtol 0.01
by default) and prints `Test_result: PASS` or `FAIL`. Built with ExecuTorch's devtools API.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..artifacts import TensorSpec
from ..atomic_write import write_atomic
from ..errors import UserError
from .tensor_checks import check_tensors

METHOD = "forward"


@dataclass(frozen=True)
class TestCase:
    inputs: tuple[np.ndarray, ...]
    expected_outputs: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Bundle:
    program: bytes  # the .pte, byte for byte
    cases: tuple[TestCase, ...]


def write_bundle(
    pte_path: Path,
    cases: Sequence[TestCase],
    input_specs: Sequence[TensorSpec],
    output_specs: Sequence[TensorSpec],
    out_path: Path,
) -> Path:
    """Write a .bpte holding the .pte at pte_path and the test cases; returns out_path."""
    import torch
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import (
        MethodTestCase,
        MethodTestSuite,
    )
    from executorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    if not cases:
        raise UserError("a BundleIO program needs at least one test case")
    tests = []
    for case in cases:
        check_tensors(case.inputs, input_specs, "input")
        check_tensors(case.expected_outputs, output_specs, "output")
        tests.append(
            MethodTestCase(
                inputs=[torch.from_numpy(np.ascontiguousarray(a)) for a in case.inputs],
                expected_outputs=[
                    torch.from_numpy(np.ascontiguousarray(a)) for a in case.expected_outputs
                ],
            )
        )
    # From the file: BundledProgram then bundles the exact bytes the FVP and host runners use.
    bundled = BundledProgram(None, [MethodTestSuite(METHOD, tests)], pte_file_path=str(pte_path))
    write_atomic(out_path, serialize_from_bundled_program_to_flatbuffer(bundled))
    return out_path


def _array(tensor) -> np.ndarray:
    import torch
    from executorch.exir.tensor import get_scalar_type

    dtype = get_scalar_type(tensor.scalar_type)
    flat = (
        torch.frombuffer(bytearray(tensor.data), dtype=dtype)
        if tensor.data
        else torch.empty(0, dtype=dtype)
    )
    return flat.reshape(list(tensor.sizes)).numpy()


def read_bundle(path: Path) -> Bundle:
    """The program bytes and test cases of a .bpte."""
    from executorch.devtools.bundled_program.serialize import (
        deserialize_from_flatbuffer_to_bundled_program,
    )

    schema = deserialize_from_flatbuffer_to_bundled_program(path.read_bytes())
    suite = next((s for s in schema.method_test_suites if s.method_name == METHOD), None)
    if suite is None:
        raise UserError(f"{path} has no test suite for method '{METHOD}'")
    cases = tuple(
        TestCase(
            tuple(_array(v.val) for v in case.inputs),
            tuple(_array(v.val) for v in case.expected_outputs),
        )
        for case in suite.test_cases
    )
    return Bundle(bytes(schema.program), cases)
