"""`etk diff`'s register comparison: addresses are hidden by default, everything else is shown."""

from __future__ import annotations

import struct

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from toolkit.sim.diff import ADDRESS_REGISTERS, diff_programs
from toolkit.sim.families import ethos_u85
from toolkit.sim.payload import NpuProgram


def _program(commands: list[tuple[str, int]]) -> NpuProgram:
    """A program of (command name, value) pairs, then NPU_OP_CONV and NPU_OP_STOP."""
    words: list[int] = []
    for name, value in [*commands, ("NPU_OP_CONV", 0), ("NPU_OP_STOP", 0xFFFF)]:
        if name in cmd1.__members__:
            words += [cmd1[name].value | 1 << 14, value]
        else:
            words.append(cmd0[name].value | value << 16)
    return NpuProgram(
        command_stream=struct.pack(f"<{len(words)}I", *words),
        weights=b"",
        scratch_size=0,
        scratch_fast_size=0,
        inputs=(),
        outputs=(),
        config=None,
        source="test",
    )


def test_blockdep_difference_is_shown_and_addresses_are_hidden():
    a = _program(
        [
            ("NPU_SET_IFM_BASE0", 0x100),
            ("NPU_SET_WEIGHT1_BASE", 0x40),
            ("NPU_SET_SCALE1_BASE", 0x80),
            ("NPU_SET_BLOCKDEP", 0),
        ]
    )
    b = _program(
        [
            ("NPU_SET_IFM_BASE0", 0x200),
            ("NPU_SET_WEIGHT1_BASE", 0x50),
            ("NPU_SET_SCALE1_BASE", 0x90),
            ("NPU_SET_BLOCKDEP", 3),
        ]
    )
    (row,) = diff_programs(a, b)
    assert row.a is not None and row.a.kind == "CONV(0)"
    assert row.changed == (("BLOCKDEP", 0, 3),)
    (row,) = diff_programs(a, b, ignore_addresses=False)
    assert row.changed == (
        ("BLOCKDEP", 0, 3),
        ("IFM_BASE0", 0x100, 0x200),
        ("SCALE1_BASE", 0x80, 0x90),
        ("WEIGHT1_BASE", 0x40, 0x50),
    )


def test_address_registers_are_the_u55_and_u85_address_registers():
    # every cmd1 register Vela writes with an address (register_command_stream_generator's
    # cmd1_with_address, less the strides), by its Ethos-U55 register name, and the three that
    # Ethos-U85 adds (its third and fourth weight streams, the gather DMA's index table)
    u85 = {c.name.removeprefix("NPU_SET_") for c in ethos_u85.cmd1}
    assert ADDRESS_REGISTERS <= {c.name.removeprefix("NPU_SET_") for c in cmd1} | u85
    assert sorted(ADDRESS_REGISTERS) == sorted(
        [f"{fm}_BASE{i}" for fm in ("IFM", "IFM2", "OFM") for i in range(4)]
        + ["WEIGHT_BASE", "WEIGHT1_BASE", "SCALE_BASE", "SCALE1_BASE", "DMA0_SRC", "DMA0_DST"]
        + ["WEIGHT2_BASE", "WEIGHT3_BASE", "DMA0_IDX"]
    )
    assert {"WEIGHT2_BASE", "WEIGHT3_BASE", "DMA0_IDX"} <= u85


def test_a_dma_shows_only_its_own_registers():
    """A DMA carries the register state set for the kernels around it; only its DMA0_* registers
    are what it does, so a changed ACTIVATION_MIN is the convolution's difference, not the DMA's."""

    def program(activation_min: int, length: int) -> NpuProgram:
        words = [
            cmd0.NPU_SET_ACTIVATION_MIN.value | activation_min << 16,
            cmd1.NPU_SET_DMA0_LEN.value | 1 << 14,
            length,
            cmd0.NPU_OP_DMA_START.value,
            cmd0.NPU_OP_CONV.value,
            cmd0.NPU_OP_STOP.value | 0xFFFF << 16,
        ]
        return _program([])._replace(command_stream=struct.pack(f"<{len(words)}I", *words))

    dma, conv = diff_programs(program(0, 64), program(0x80, 64))
    assert (dma.a.kind, dma.changed) == ("DMA_START(0)", ())
    assert (conv.a.kind, conv.changed) == ("CONV(0)", (("ACTIVATION_MIN", 0, 0x80),))
    dma, conv = diff_programs(program(0, 64), program(0, 96))
    assert dma.changed == (("DMA0_LEN", 64, 96),)
