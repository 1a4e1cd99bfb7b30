"""A program's weight streams are decoded once and kept with it; results stay bit-exact."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from ethosu import mlw_codec
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd1
from tflite_edit import without_final_softmax

from toolkit.lower.tflite import compile_tflite
from toolkit.sim import conv as conv_module
from toolkit.sim import decoded as decoded_module
from toolkit.sim import forget_programs, load_payload, simulate
from toolkit.sim import plan as plan_module
from toolkit.sim.commands import Command
from toolkit.sim.errors import PayloadError
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.families.ethos_u55 import weights
from toolkit.sim.families.ethos_u55.registers import COMMANDS
from toolkit.sim.memory import Memory
from toolkit.sim.native import conv as native_conv
from toolkit.sim.registers import RegisterFile
from toolkit.targets import load_target

from .test_tflite_reference_exact import ACC, EXPECTED, FIXTURES
from .tflite_builder import seeded_outputs

NAME = "kws_ref_model"  # DS-CNN: 11 convolution and depthwise operations, each its own stream


@pytest.fixture(scope="module")
def kws_npz(tmp_path_factory):
    out = tmp_path_factory.mktemp(NAME)
    body = out / f"{NAME}_body.tflite"
    body.write_bytes(without_final_softmax((FIXTURES / f"{NAME}.tflite").read_bytes(), NAME))
    return (
        compile_tflite(body, load_target("corstone-300").npu(ACC), out).delegates[0].vela_npz_path
    )


def test_weights_are_decoded_once_per_program(kws_npz, monkeypatch):
    calls = []

    def counting_decode(stream):
        calls.append(stream)
        return decode(stream)

    decode = weights.mlw_decode
    monkeypatch.setattr(weights, "mlw_decode", counting_decode)
    forget_programs()
    shape, expected = EXPECTED[NAME]
    assert seeded_outputs(load_payload(kws_npz), shape, 2, ACC) == expected[:2]
    streams = len(calls)
    operations = simulate(load_payload(kws_npz), [np.zeros(shape, np.int8)], ACC).operations
    assert streams == sum(op.kind in ("conv", "depthwise") for op in operations) == 11
    assert len(set(calls)) == streams  # each stream once
    # a program loaded again from the same bytes is the same program: nothing decoded again
    assert seeded_outputs(load_payload(kws_npz), shape, 4, ACC) == expected
    assert len(calls) == streams
    forget_programs()  # a fresh start decodes again
    assert seeded_outputs(load_payload(kws_npz), shape, 1, ACC) == expected[:1]
    assert len(calls) == 2 * streams


@pytest.mark.parametrize(
    "values",
    [
        [0] * 7 + [1, -1, 255, -255] * 30,  # zero runs
        list(np.random.default_rng(0).integers(-255, 256, 5000)),
        list(np.random.default_rng(1).integers(-3, 4, 20000)),  # a small palette
    ],
)
def test_mlw_decode_is_the_codec_s_decode(values):
    stream = bytes(mlw_codec.encode([int(v) for v in values]))
    ours = weights.mlw_decode(stream)
    assert ours.dtype == np.int16
    assert ours.tolist() == mlw_codec.decode(bytearray(stream))
    assert ours[: len(values)].tolist() == [int(v) for v in values]


def _run(npz, shape):
    x = np.random.default_rng(7).integers(-128, 128, shape, dtype=np.int8)
    return simulate(load_payload(npz), [x], ACC)


def _counting(monkeypatch) -> list:
    calls = []
    decode = weights.mlw_decode

    def counting_decode(stream):
        calls.append(stream)
        return decode(stream)

    monkeypatch.setattr(weights, "mlw_decode", counting_decode)
    return calls


def test_scale_records_decode_as_their_bytes_read_one_by_one():
    # 10 bytes a channel: bias 40-bit signed, scale 32-bit unsigned, shift in the low 6 bits
    rng = np.random.default_rng(6)
    raw = rng.integers(0, 256, 10 * 300 + 4, dtype=np.uint8)
    raw[:10], raw[10:20] = 0xFF, 0  # the most negative bias, the largest scale; all zero
    raw[24], raw[34] = 0x7F, 0x80  # biases at both sides of the sign bit
    bias, scale, shift = weights.decode_scales(raw, 300, "test")
    records = [raw[10 * c : 10 * c + 10].tobytes() for c in range(300)]
    assert bias.tolist() == [int.from_bytes(r[:5], "little", signed=True) for r in records]
    assert scale.tolist() == [int.from_bytes(r[5:9], "little") for r in records]
    assert shift.tolist() == [r[9] & 0x3F for r in records]
    assert bias[0] == -1 and bias[1] == 0 and bias[2] >= 0x7F << 32 and bias[3] < -(1 << 38)
    assert scale[0] == (1 << 32) - 1 and (bias.dtype, scale.dtype, shift.dtype) == (np.int64,) * 3


def _registers_in_turn(stream: bytes) -> list[tuple[Command, dict[str, int]]]:
    """What planning took before operation_registers: decode, then RegisterFile writes."""
    registers, operations = RegisterFile(), []
    for cmd in COMMANDS.decode(stream):
        if cmd.is_operation:
            operations.append((cmd, dict(registers.snapshot(cmd).values)))
        else:
            registers.write(cmd)
    return operations


def test_one_pass_register_states_are_those_of_decode_and_register_writes(kws_npz):
    stream = load_payload(kws_npz).command_stream
    expected = _registers_in_turn(stream)
    assert len(expected) > 30
    assert COMMANDS.operation_registers(stream) == expected
    skip = frozenset({"NPU_OP_KERNEL_WAIT", "NPU_OP_DMA_WAIT"})
    skipped = COMMANDS.operation_registers(stream, skip)
    assert [c for c, _ in skipped] == [c for c, _ in expected]
    assert [v for c, v in skipped if c.name not in skip] == [
        v for c, v in expected if c.name not in skip
    ]
    assert {v is None for c, v in skipped if c.name in skip} == {True}


@pytest.mark.parametrize(
    "words",
    [
        [0x3FE],  # no such cmd0
        [0x43FE, 0],  # no such cmd1
        [0x4000 | cmd1.NPU_SET_IFM_BASE0.value],  # its payload word missing
        [0x8000],  # payload mode 2
    ],
)
def test_one_pass_decoding_refuses_what_decode_refuses(words):
    stream = np.array(words, "<u4").tobytes()
    with pytest.raises(PayloadError) as one_pass:
        COMMANDS.operation_registers(stream)
    with pytest.raises(PayloadError) as in_turn:
        COMMANDS.decode(stream)
    assert str(one_pass.value) == str(in_turn.value)
    with pytest.raises(PayloadError, match="not whole 32-bit words"):
        COMMANDS.operation_registers(stream + b"\0")


def _format(depthwise: bool = False, ifm_bits: int = 8) -> weights.WeightFormat:
    return weights.WeightFormat(
        ofm_depth=2,
        kernel_height=1,
        kernel_width=1,
        ifm_depth=3,
        ofm_block_depth=16,
        depthwise=depthwise,
        part_kernel_first=False,
        ifm_bits=ifm_bits,
        dilation_y=1,
        dilation_x=1,
        ifm_ublock_depth=8,
        ofm_ublock_depth=8,
    )


def test_float32_products_only_where_every_partial_sum_is_below_2_24():
    # a column's |weights| summing to S bounds its partial sums by 255 * S for 8-bit IFMs
    largest = (2**24 - 1) // 255  # 65793: 255 * 65793 = 2^24 - 1
    column = np.array([[largest - 2, 5], [1, -5], [-1, 5]], np.int64)
    assert conv_module.exact_in_float32(column, 8)
    column[0, 0] += 1  # one more: 255 * 65794 >= 2^24
    assert not conv_module.exact_in_float32(column, 8)
    assert conv_module.exact_in_float32(np.full((3, 2), 85, np.int16), 16)  # 3 * 85 * 65535 < 2^24
    assert not conv_module.exact_in_float32(np.full((3, 2), 86, np.int16), 16)


def test_float32_products_give_the_float64_outputs(kws_npz, monkeypatch):
    """On the numpy path (where the native kernels are not built) convolutions whose products
    are exact in float32 multiply so, with the outputs of float64 products."""
    shape, expected = EXPECTED[NAME]
    monkeypatch.setattr(native_conv, "_KERNEL", None)
    exact = []
    exact_in_float32 = conv_module.exact_in_float32

    def recorded(matrix, ifm_bits):
        exact.append(exact_in_float32(matrix, ifm_bits))
        return exact[-1]

    monkeypatch.setattr(conv_module, "exact_in_float32", recorded)
    forget_programs()
    try:
        assert seeded_outputs(load_payload(kws_npz), shape, 4, ACC) == expected
        # the DS-CNN's first convolution (two streams), pointwise convolutions and FC
        assert exact == [True] * 7
        monkeypatch.setattr(conv_module, "exact_in_float32", lambda matrix, ifm_bits: False)
        forget_programs()
        assert seeded_outputs(load_payload(kws_npz), shape, 4, ACC) == expected
    finally:
        forget_programs()


def test_later_runs_find_their_streams_without_a_lookup_by_content(kws_npz, monkeypatch):
    """Each operation compares the bytes at its stream's address with the stream it last
    decoded there: a run after the first hashes no stream (DMA'd ones included)."""
    forget_programs()
    program = load_payload(kws_npz)
    plan = plan_module.plan_for(program, configuration(ACC))
    assert plan.decoded.constant_regions == {0}  # scratch and fast scratch are written
    shape, expected = EXPECTED[NAME]
    assert seeded_outputs(program, shape, 1, ACC) == expected[:1]
    by_content = []
    lookup = decoded_module.DecodedStreams.weights
    monkeypatch.setattr(
        decoded_module.DecodedStreams,
        "weights",
        lambda self, stream, fmt: by_content.append(stream) or lookup(self, stream, fmt),
    )
    assert seeded_outputs(program, shape, 4, ACC) == expected
    assert by_content == []
    convs = [s.record for s in plan.steps if s.record.kind in ("conv", "depthwise")]
    assert [r.register("WEIGHT_REGION") & 7 for r in convs] == [1] * 10 + [0]  # 10 DMA'd


def test_a_stream_slot_decodes_again_when_the_bytes_there_change():
    decoded = decoded_module.DecodedStreams(configuration(ACC).family)
    memory = Memory({0: np.arange(8, dtype=np.uint8), 1: np.zeros(8, np.uint8)})
    calls = []

    def decode(stream, tag):
        calls.append(stream)
        return (tag, stream)

    moving, fixed = decoded.slot(1, 2, 4), decoded.slot(0, 0, 2)
    decoded.constant_regions = frozenset({0})
    assert moving.get(memory, decode, "w") == ("w", bytes(4))
    assert moving.get(memory, decode, "w") == ("w", bytes(4))
    memory.regions[1][3] = 7  # another stream DMA'd into the same buffer
    assert moving.get(memory, decode, "w") == ("w", bytes([0, 7, 0, 0]))
    assert fixed.get(memory, decode, "w") == ("w", bytes([0, 1]))
    memory.regions[0][0] = 9  # nothing in a program writes here: not read again
    assert fixed.get(memory, decode, "w") == ("w", bytes([0, 1]))
    assert calls == [bytes(4), bytes([0, 7, 0, 0]), bytes([0, 1])]


def test_a_run_zeroes_only_the_scratch_its_plan_checked(kws_npz):
    """Planning bounds-checks every access, so a run's scratch regions are as large as the
    highest byte checked (the .pte payload's 1 MiB fast scratch is mostly unused)."""
    # as a .pte payload gives it: a fast scratch of 1 MiB, which this program never touches
    program = load_payload(kws_npz)._replace(scratch_fast_size=1 << 20)
    plan = plan_module.plan_for(program, configuration(ACC))
    memory = plan_module.new_memory(program, configuration(ACC), plan)
    sizes = {r: len(memory.regions.get(r, ())) for r in (1, 2)}
    assert sizes == {r: plan.extent.get(r, 0) for r in (1, 2)}
    assert 0 < sizes[1] <= program.scratch_size and 2 not in memory.regions  # none to zero
    for tensor in (*program.inputs, *program.outputs):
        assert tensor.offset + tensor.nbytes <= sizes[tensor.region]
    full = plan_module.new_memory(
        program, configuration(ACC)
    )  # without a plan: the sizes the payload gives
    assert (len(full.regions[1]), len(full.regions[2])) == (
        program.scratch_size,
        program.scratch_fast_size,
    )


def test_a_run_s_records_keep_their_registers_and_pickle(kws_npz):
    """Records carry each operation's registers as a mapping (planning shares the operation's
    own); a SimResult still crosses process boundaries (pickle) whole."""
    shape, _ = EXPECTED[NAME]
    result = simulate(load_payload(kws_npz), [np.zeros(shape, np.int8)], ACC)
    first = next(op for op in result.operations if op.kind == "conv")
    assert first.register("IFM_REGION") == first.registers["IFM_REGION"]
    assert first.register("NOT_A_REGISTER", 7) == 7
    assert pickle.loads(pickle.dumps(result.operations)) == result.operations


def test_a_program_file_is_read_again_only_when_it_changes(kws_npz, tmp_path):
    """A .tflite program's runs each load its .npz by path: read and parsed once while the file
    (its size, time and inode) stays the same."""
    path = tmp_path / "program.npz"
    path.write_bytes(Path(kws_npz).read_bytes())
    first = load_payload(path)
    assert load_payload(str(path)) is first
    path.write_bytes(b"not a payload")
    with pytest.raises(PayloadError):
        load_payload(path)
