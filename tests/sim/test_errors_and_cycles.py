"""Clear errors for bad payloads and unimplemented commands; cycles that ignore non-timing
values."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from toolkit.errors import UserError
from toolkit.sim import (
    PayloadError,
    RegionError,
    SimError,
    UnsupportedError,
    load_payload,
    simulate,
)
from toolkit.sim.diff import diff_programs
from toolkit.sim.families.ethos_u55.registers import COMMANDS

ACC = "ethos-u55-128"


@pytest.fixture(scope="module")
def conv_case(cases):
    return cases.get("conv3x3_same_relu", ACC)


@pytest.fixture(scope="module")
def program(conv_case):
    return load_payload(conv_case.npz[ACC])


@pytest.fixture(scope="module")
def bin_stream(conv_case):
    from executorch.backends.arm.arm_vela import vela_compile

    from toolkit.npu import npu_config

    flags = [*npu_config(ACC).vela_flags, "--output-format=raw"]
    return vela_compile(conv_case.tosa.read_bytes(), flags).processed_bytes


def _patch(program, name: str, value: int, nth: int = 0, param: int | None = None):
    """A copy of the program with the nth `name` command's value replaced."""
    cmd = [c for c in COMMANDS.decode(program.command_stream) if c.name == name][nth]
    words = bytearray(program.command_stream)
    if cmd.data is None:
        struct.pack_into(
            "<I",
            words,
            cmd.offset,
            (struct.unpack_from("<I", words, cmd.offset)[0] & 0xFFFF) | (value << 16),
        )
    else:
        struct.pack_into("<I", words, cmd.offset + 4, value)
        if param is not None:
            head = struct.unpack_from("<I", words, cmd.offset)[0]
            struct.pack_into("<I", words, cmd.offset, (head & 0xFFFF) | (param << 16))
    return program._replace(command_stream=bytes(words)), cmd


def test_bin_stream_and_npz_agree(conv_case, program, bin_stream):
    from_pte = load_payload(bin_stream)
    assert from_pte.command_stream == program.command_stream
    assert from_pte.weights == program.weights
    assert from_pte.inputs == program.inputs and from_pte.outputs == program.outputs
    assert from_pte.config.accelerator == ACC
    out = simulate(from_pte, [conv_case.input], ACC).outputs[0]
    assert np.array_equal(out, conv_case.expected.reshape(out.shape))


def test_truncated_payload(bin_stream):
    with pytest.raises(PayloadError, match="truncated"):
        load_payload(bin_stream[: len(bin_stream) // 2])


def test_corrupted_payload(bin_stream):
    with pytest.raises(PayloadError, match="not a vela_bin_stream"):
        load_payload(b"X" + bin_stream[1:])
    bad = bytearray(bin_stream)
    cmd_at = bin_stream.index(b"cmd_data") + 32
    bad[cmd_at : cmd_at + 4] = b"XXXX"
    with pytest.raises(PayloadError, match="COP1"):
        load_payload(bytes(bad))
    assert issubclass(PayloadError, UserError)


def _header_variants(raw: bytes) -> list[bytes]:
    """The payload cut at many places, and each byte of every block header, of the first words of
    cmd_data (the COP1 header) and of the inputs and outputs blocks set to 0, 0xFF and one more."""
    variants = [raw[:n] for n in range(0, len(raw), 5)]
    places, pos = [], 0
    while pos + 32 <= len(raw):
        name = raw[pos : pos + 16].split(b"\0", 1)[0]
        length = struct.unpack_from("<I", raw, pos + 16)[0]
        places += range(pos, pos + 32)
        body = {b"cmd_data": 24, b"inputs": length, b"outputs": length}.get(name, 0)
        places += range(pos + 32, pos + 32 + min(body, length))
        pos += 32 + (length + 15) // 16 * 16
    for at in places:
        for value in {0, 0xFF, (raw[at] + 1) & 0xFF} - {raw[at]}:
            variants.append(raw[:at] + bytes([value]) + raw[at + 1 :])
    return variants


def test_every_damaged_header_is_refused_with_a_payload_error(bin_stream):
    """Each cut and each changed header byte either still parses or raises PayloadError (the
    one-line error the CLI prints), never another exception."""
    refused = 0
    for raw in _header_variants(bin_stream):
        try:
            load_payload(raw)
        except PayloadError:
            refused += 1
    assert refused > 500, refused  # the variants reach the refusals, not only the contents


def test_unknown_opcode(program, conv_case):
    words = bytearray(program.command_stream)
    struct.pack_into("<I", words, 0, 0x3FE)  # cmd0 opcode 0x3fe does not exist
    with pytest.raises(PayloadError, match=r"unknown opcode 0x3fe .* offset 0x0"):
        simulate(program._replace(command_stream=bytes(words)), [conv_case.input], ACC)


def test_region_overflow(program, conv_case):
    bad, _ = _patch(program, "NPU_SET_OFM_BASE0", 0x7FFF0000, nth=-1)
    with pytest.raises(
        RegionError,
        match=r"NPU_OP_\w+ at command-stream offset 0x[0-9a-f]+ "
        r"\(OFM\): access to bytes .* overflows the region",
    ):
        simulate(bad, [conv_case.input], ACC)


def test_unimplemented_elementwise_mode(program, conv_case):
    op = next(c for c in COMMANDS.decode(program.command_stream) if c.name == "NPU_OP_POOL")
    words = bytearray(program.command_stream)
    struct.pack_into("<I", words, op.offset, 0x006 | (10 << 16))  # NPU_OP_ELEMENTWISE(mode 10)
    with pytest.raises(
        UnsupportedError,
        match=rf"elementwise mode unknown is not implemented by the simulator "
        rf"\(NPU_OP_ELEMENTWISE \(value 0xa\) at command-stream offset "
        rf"{op.offset:#x}\)",
    ):
        simulate(program._replace(command_stream=bytes(words)), [conv_case.input], ACC)


def test_unimplemented_elementwise_register_value(cases):
    program = load_payload(cases.get("add_broadcast", ACC).npz[ACC])
    bad, cmd = _patch(program, "NPU_SET_IFM_PRECISION", 0x8301, nth=-1)
    with pytest.raises(
        UnsupportedError,
        match=r"operand scale mode 3 is not implemented by the simulator "
        r"\(NPU_SET_IFM_PRECISION \(value 0x8301\) at command-stream offset "
        r"0x[0-9a-f]+ for NPU_OP_ELEMENTWISE at command-stream offset",
    ):
        simulate(bad, cases.get("add_broadcast", ACC).inputs, ACC)


def test_elementwise_cycles_ignore_zero_points_and_scales(cases):
    case = cases.get("add_scaled", ACC)
    program = load_payload(case.npz[ACC])
    base = simulate(program, case.inputs, ACC)
    changed, _ = _patch(program, "NPU_SET_IFM2_ZERO_POINT", 5, nth=-1)
    changed, _ = _patch(changed, "NPU_SET_OPA_SCALE", 0x40000000, param=20)
    other = simulate(changed, case.inputs, ACC)
    assert not np.array_equal(other.outputs[0], base.outputs[0])
    assert [r.kind for r in base.operations] == ["elementwise.mul", "elementwise.add"]
    assert other.total_cycles == base.total_cycles > 0
    assert other.npu_cycles == base.npu_cycles > 0
    assert other.pmu == base.pmu and base.pmu.total > 0  # FVP timeline and AXI beats


def test_unimplemented_mode_names_register(program, conv_case):
    bad, cmd = _patch(program, "NPU_SET_ACTIVATION", 3)  # tanh
    with pytest.raises(UnsupportedError, match="ACTIVATION = 3 is not implemented"):
        simulate(bad, [conv_case.input], ACC)


def test_cycles_ignore_zero_points_clips_and_scales(program, conv_case):
    base = simulate(program, [conv_case.input], ACC)
    changed = program
    for name, value in (
        ("NPU_SET_OFM_ZERO_POINT", 5),
        ("NPU_SET_IFM_ZERO_POINT", 3),
        ("NPU_SET_ACTIVATION_MIN", 0),
        ("NPU_SET_ACTIVATION_MAX", 50),
    ):
        for nth in range(sum(c.name == name for c in COMMANDS.decode(program.command_stream))):
            changed, _ = _patch(changed, name, value, nth)
    changed, _ = _patch(changed, "NPU_SET_OFM_SCALE", 0x40000000, param=30)
    other = simulate(changed, [conv_case.input], ACC)
    assert not np.array_equal(other.outputs[0], base.outputs[0])
    assert [(r.compute_cycles, r.cycles) for r in other.operations] == [
        (r.compute_cycles, r.cycles) for r in base.operations
    ]
    assert other.total_cycles == base.total_cycles > 0
    assert other.npu_cycles == base.npu_cycles > 0
    assert other.pmu == base.pmu and base.pmu.total > 0  # FVP timeline and AXI beats


def _blockdeps(program) -> list[int]:
    value, seen = 0, []
    for c in COMMANDS.decode(program.command_stream):
        if c.name == "NPU_SET_BLOCKDEP":
            value = c.param
        elif c.is_operation and c.name != "NPU_OP_DMA_START" and not c.name.endswith("_WAIT"):
            seen.append(value)
    return seen


def _without_blockdep(program):
    """The program with every NPU_SET_BLOCKDEP set to 0 (no overlap of kernels)."""
    words = bytearray(program.command_stream)
    for c in COMMANDS.decode(program.command_stream):
        if c.name == "NPU_SET_BLOCKDEP":
            struct.pack_into(
                "<I", words, c.offset, struct.unpack_from("<I", words, c.offset)[0] & 0xFFFF
            )
    return program._replace(command_stream=bytes(words))


def test_fused_and_unfused_relu_same_cycles_and_diff(cases):
    fused = cases.get("conv3x3_same_relu", ACC)
    unfused = cases.get("conv3x3_same_clamp", ACC)
    pa, pb = load_payload(fused.npz[ACC]), load_payload(unfused.npz[ACC])
    # Vela 5.1 gives the unfused program's trailing transposes BLOCKDEP 3 and the fused one's 0
    # (same addresses and blocks): the hardware may overlap those kernels in one and not the
    # other (fvp_timing), a compiler choice and not a zero point, clip bound or scale
    blockdeps = [_blockdeps(p) for p in (pa, pb)]
    assert blockdeps[0] == [0] * 41 and blockdeps[1] == [0] * 25 + [3] * 16
    # etk diff shows it (a timing difference, not an address) on the 15 pools; the 16th value
    # above is NPU_OP_STOP's, which etk diff leaves out
    assert sum(("BLOCKDEP", 0, 3) in r.changed for r in diff_programs(pa, pb)) == 15
    overlapped = simulate(pb, [unfused.input], ACC).pmu.total
    pa, pb = _without_blockdep(pa), _without_blockdep(pb)
    ra = simulate(pa, [fused.input], ACC)
    rb = simulate(pb, [unfused.input], ACC)
    assert (ra.npu_cycles, ra.total_cycles) == (rb.npu_cycles, rb.total_cycles)
    assert ra.pmu.total == rb.pmu.total > overlapped > 0
    # AXI1 beats may differ by what flash holds: the compressed weight streams (WEIGHT_LENGTH
    # below; the scales differ, so do the bytes) and the command stream, one beat per 8 bytes
    flash = [
        sum(r.read_from(0) for r in res.operations) + len(p.command_stream)
        for res, p in ((ra, pa), (rb, pb))
    ]
    assert (ra.pmu.axi0_read, ra.pmu.axi0_write) == (rb.pmu.axi0_read, rb.pmu.axi0_write)
    assert abs(ra.pmu.axi1_read - rb.pmu.axi1_read) <= -(-abs(flash[0] - flash[1]) // 8)
    rows = diff_programs(pa, pb)
    assert all(r.a is not None and r.b is not None for r in rows)
    changed = {name.split(".")[0] for r in rows for name, _, _ in r.changed}
    # WEIGHT_LENGTH: the per-channel bias/scale records travel in the compressed weight stream,
    # and the two variants' output scales differ
    assert changed <= {
        "IFM_ZERO_POINT",
        "OFM_ZERO_POINT",
        "ACTIVATION_MIN",
        "ACTIVATION_MAX",
        "OFM_SCALE",
        "WEIGHT_LENGTH",
    }, changed


def test_records_count_macs_and_bytes(program, conv_case):
    result = simulate(program, [conv_case.input], ACC)
    convs = [r for r in result.operations if r.kind == "conv"]
    assert len(convs) == 1
    assert convs[0].macs == 10 * 12 * 16 * 9 * 8
    assert convs[0].read_from(0) > 0 and convs[0].written_to(1) == 10 * 12 * 16
    assert result.total_cycles == result.pmu.total >= result.npu_cycles
    assert result.npu_cycles == sum(r.compute_cycles for r in result.operations)


def test_inputs_of_the_wrong_size_or_type_are_refused(program, conv_case):
    x = conv_case.input
    with pytest.raises(SimError, match=r"^input 0 has shape \(5,\) \(5 elements\); the program "):
        simulate(program, [x.reshape(-1)[:5]], ACC)
    with pytest.raises(SimError, match=r"^input 0 is float32; the program expects int8 \(quantize"):
        simulate(program, [x.astype(np.float32)], ACC)
    with pytest.raises(SimError, match=r"takes 1 inputs, got 2$"):
        simulate(program, [x, x], ACC)
    expected = simulate(program, [x], ACC).outputs[0]
    # the same bytes in another integer type of the same size, or not contiguous, run the same
    assert np.array_equal(simulate(program, [x.view(np.uint8)], ACC).outputs[0], expected)
    strided = np.stack([x, x], axis=-1)[..., 0]
    assert not strided.flags.c_contiguous
    assert np.array_equal(simulate(program, [strided], ACC).outputs[0], expected)
