"""RunFrame: a plan's memory kept from one run for the next, made as new in between."""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.sim.errors import RegionError, SimError
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.payload import IOTensor, NpuProgram
from toolkit.sim.run_frame import RunFrame

ACC = "ethos-u55-128"


def _program(output_offset: int = 8) -> NpuProgram:
    return NpuProgram(
        command_stream=b"",
        weights=bytes(range(32)),
        scratch_size=64,
        scratch_fast_size=0,
        inputs=(IOTensor.of((1, 1, 1, 1, 2, 4), 1, 0, 1),),
        outputs=(IOTensor.of((1, 1, 1, 1, 1, 4), 2, output_offset, 1),),
        config=None,
        source="test program",
    )


@pytest.mark.parametrize("shared_weights", [False, True])
def test_a_released_memory_comes_back_as_new(shared_weights):
    frame = RunFrame(
        _program(), configuration(ACC), None, frozenset({0}) if shared_weights else frozenset()
    )
    memory = frame.memory()
    memory.regions[1][:] = 7  # what a run leaves behind
    memory.internal[:] = 9
    if not shared_weights:
        memory.regions[0][:] = 5
    frame.release(memory)
    again = frame.memory()
    assert again is memory  # kept, not made again
    assert not again.regions[1].any() and not again.internal.any()
    assert again.regions[0].tobytes() == bytes(range(32))
    assert again.regions[0].flags.writeable is not shared_weights


def test_inputs_placed_and_outputs_copied():
    frame = RunFrame(_program(), configuration(ACC), None, frozenset())
    memory = frame.memory()
    frame.place_inputs(memory, [np.arange(8, dtype=np.uint8).reshape(2, 4)])  # the other sign
    assert memory.regions[1][:8].tolist() == list(range(8))
    memory.regions[1][8:16] = np.array([1, 0, 255, 255, 0, 128, 2, 0], np.uint8)
    (out,) = frame.read_outputs(memory)
    assert out.dtype == np.int16 and out.shape == (4,) and out.tolist() == [1, -1, -32768, 2]
    frame.release(memory)
    assert out.tolist() == [1, -1, -32768, 2]  # a copy: the memory was zeroed under it


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            np.zeros(7, np.int8),
            r"input 0 has shape \(7,\) \(7 elements\); the program expects \(2, 4\)",
        ),
        (
            np.zeros(8, np.float32),
            r"input 0 is float32; the program expects int8 \(quantize it first\)",
        ),
        (np.zeros(8, np.int16), r"input 0 is int16; the program expects int8"),
    ],
)
def test_bad_inputs_are_named(value, message):
    frame = RunFrame(_program(), configuration(ACC), None, frozenset())
    with pytest.raises(SimError, match=message):
        frame.place_inputs(frame.memory(), [value])


def test_the_wrong_number_of_inputs_is_named():
    frame = RunFrame(_program(), configuration(ACC), None, frozenset())
    with pytest.raises(SimError, match="test program takes 1 inputs, got 2"):
        frame.place_inputs(frame.memory(), [np.zeros(8, np.int8)] * 2)


def test_an_output_outside_its_region_is_refused_up_front():
    with pytest.raises(RegionError, match=r"output 0: access to bytes \[0x3c, 0x44\) of region 1"):
        RunFrame(_program(output_offset=60), configuration(ACC), None, frozenset())


def test_extent_sizes_the_scratch():
    frame = RunFrame(_program(), configuration(ACC), {1: 16}, frozenset())
    assert len(frame.memory().regions[1]) == 16
