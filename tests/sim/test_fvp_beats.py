"""AXI beats of one small program, counted by hand from its command stream.

The program: a DMA of 480 bytes (weights 320 + scales 160) from region 0 to region 1, a DMA_WAIT,
a 1x1 convolution 4x4x16 -> 4x4x16 int8 (IFM NHWC, OFM NHCWB16, OFM block 2x4x16), and STOP.
Memory mode Shared_Sram: region 0 (and the command stream) behind AXI1, region 1 behind AXI0.
Ethos-U55: a beat is 8 bytes.

By hand:
- command stream: 4 commands of 4 bytes = 16 bytes = 2 beats, AXI1 read.
- DMA: 480 bytes read from region 0 = 60 beats AXI1 read; written to region 1 = 60 beats AXI0
  write.
- conv IFM: two OFM blocks in y (rows 0-1, 2-3), one in x (4 wide); a 1x1 kernel reads 2 rows of
  4 positions per block, 4 rows in all. NHWC with the whole depth (16 channels)
  in one IFM depth step: each row is one contiguous run of 4 x 16 = 64 bytes = 8 beats:
  4 x 8 = 32 beats; one OFM depth slice (16 of 16), so read once: 32 beats AXI0 read.
- weights (320 bytes) and scales (160 bytes) stream again for each of the 2 OFM block
  positions: 2 x (40 + 20) = 120 beats AXI0 read.
- OFM NHCWB16: 4 rows of one 16-channel brick column, 4 x 16 = 64 bytes each: 32 beats AXI0
  write.
Totals: AXI0 read 32 + 120 = 152, AXI0 write 60 + 32 = 92, AXI1 read 2 + 60 = 62.
"""

from __future__ import annotations

import struct

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0

from toolkit.npu import npu_config
from toolkit.sim.families import accelerator
from toolkit.sim.families.ethos_u55.timeline import predict_pmu
from toolkit.sim.fvp_timing import fvp_memory
from toolkit.sim.records import OpRecord

ACC = "ethos-u55-128"


def _stream(*ops: tuple[str, int]) -> bytes:
    return b"".join(
        struct.pack("<I", getattr(cmd0, name).value | (param << 16)) for name, param in ops
    )


def _program(ifm_zero_point: int = 0):
    stream = _stream(
        ("NPU_OP_DMA_START", 0), ("NPU_OP_DMA_WAIT", 0), ("NPU_OP_CONV", 0), ("NPU_OP_STOP", 0)
    )
    dma = OpRecord("dma", 0, 0, ((0, 480),), ((1, 480),))
    conv = OpRecord(
        "conv",
        8,
        4 * 4 * 16 * 16,
        ((1, 256), (1, 320), (1, 160)),
        ((1, 256),),
        ofm_shape=(4, 4, 16),
        ifm_shape=(4, 4, 16),
        block=(2, 4, 16),
        ofm_brick=True,
        compute_cycles=1000,
        registers={"IFM_ZERO_POINT": ifm_zero_point},
    )
    return stream, (dma, conv)


def test_beats_of_a_small_program_by_hand():
    npu = npu_config(ACC)
    memory = fvp_memory(accelerator(ACC), npu.system_config, npu.memory_mode, str(npu.config_path))
    stream, records = _program()
    pmu = predict_pmu(stream, records, memory, accelerator(ACC))
    assert pmu.beats == {"axi0_read": 152, "axi0_write": 92, "axi1_read": 62}
    # the conv waits for the DMA: flash at 50 words per 400 cycles (0.125 beats/cycle) moves the
    # 60 beats in 480 cycles, + its 64-cycle latency = 544; then the conv's 1000 compute cycles
    # (its 152 + 32 AXI0 beats take fewer cycles)
    assert pmu.active == 544 + 1000
    assert predict_pmu(stream, _program(ifm_zero_point=-128)[1], memory, accelerator(ACC)) == pmu


def test_the_fvp_ports_follow_an_inheriting_vendor_section(tmp_path):
    """fvp_memory reads the ini with Vela's reader: a vendor system config that inherits Arm's
    and changes one burst length gets the parent's ports (its own configparser read defaulted
    the missing axi1_port to Sram with a 32-byte burst)."""
    arm = npu_config(ACC).config_path.read_text()
    ini = tmp_path / "vendor.ini"
    ini.write_text(
        arm + "\n[System_Config.Vendor_Child]\ninherit=System_Config.Ethos_U55_High_End_Embedded\n"
        "OffChipFlash_burst_length=64\n"
    )
    memory = fvp_memory(accelerator(ACC), "Vendor_Child", "Shared_Sram", str(ini))
    assert (memory.ports["axi0"].burst_beats, memory.ports["axi1"].burst_beats) == (4, 8)
    assert memory.region_port == {0: "axi1", 1: "axi0", 2: "axi0", "command_stream": "axi1"}
