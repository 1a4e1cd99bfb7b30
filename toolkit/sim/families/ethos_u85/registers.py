"""Ethos-U85's register map: the commands its streams are made of (so operation counts, `etk
diff` and the fused/unfused register comparison read U85 programs) and the driver's product id.

The opcodes were transcribed by hand from Vela 5.1.0's source distribution,
`ethosu/regor/architecture/ethosu85/ethos_u85_interface.hpp` (Apache-2.0; enums `cmd0_opcode`
and `cmd1_opcode`, architecture version 2.0.0): Vela's wheel has no Python register module for
U85. The names are the ones Vela's disassembly (`--verbose-register-command-stream`) prints, the
NPU_SET_*/NPU_OP_* names of ethos_u55_regs for what U55 also has; tests/sim/test_u85_decode.py
checks the table command by command against that disassembly of real U85 programs.

Against Ethos-U55/U65 the word format is the same (bits 0-9 opcode, 14-15 payload mode, 16-31
parameter) but many opcodes mean something else: cmd1 146 is WEIGHT2_BASE here, SCALE1_BASE on
U55; cmd1 37/38 are IFM_SCALE/IFM2_SCALE (OPA/OPB_SCALE on U55); cmd0 291 (PARALLEL_MODE), 301
(AB_START), 269 (IFM_IB_END) are gone or reused. So U85 has a map of its own.
"""

from __future__ import annotations

from enum import Enum

from ...commands import CommandSet

__all__ = ["COMMANDS", "PRODUCTS", "cmd0", "cmd1"]


class cmd0(Enum):  # noqa: N801 - named as Vela's cmd0_opcode and ethos_u55_regs.cmd0
    """Commands whose value is their 16-bit parameter (no payload word)."""

    NPU_OP_STOP = 0
    NPU_OP_IRQ = 1
    NPU_OP_CONV = 2
    NPU_OP_DEPTHWISE = 3
    NPU_OP_POOL = 5
    NPU_OP_ELEMENTWISE = 6
    NPU_OP_RESIZE = 7
    NPU_OP_DMA_START = 16
    NPU_OP_DMA_WAIT = 17
    NPU_OP_KERNEL_WAIT = 18
    NPU_OP_PMU_MASK = 19
    NPU_SET_IFM_PAD_TOP = 256
    NPU_SET_IFM_PAD_LEFT = 257
    NPU_SET_IFM_PAD_RIGHT = 258
    NPU_SET_IFM_PAD_BOTTOM = 259
    NPU_SET_IFM_DEPTH_M1 = 260
    NPU_SET_IFM_PRECISION = 261
    NPU_SET_IFM_UPSCALE = 263
    NPU_SET_IFM_BROADCAST = 264
    NPU_SET_IFM_ZERO_POINT = 265
    NPU_SET_IFM_WIDTH0_M1 = 266
    NPU_SET_IFM_HEIGHT0_M1 = 267
    NPU_SET_IFM_HEIGHT1_M1 = 268
    NPU_SET_IFM_REGION = 271
    NPU_SET_OFM_WIDTH_M1 = 273
    NPU_SET_OFM_HEIGHT_M1 = 274
    NPU_SET_OFM_DEPTH_M1 = 275
    NPU_SET_OFM_PRECISION = 276
    NPU_SET_OFM_BLK_WIDTH_M1 = 277
    NPU_SET_OFM_BLK_HEIGHT_M1 = 278
    NPU_SET_OFM_BLK_DEPTH_M1 = 279
    NPU_SET_OFM_ZERO_POINT = 280
    NPU_SET_OFM_WIDTH0_M1 = 282
    NPU_SET_OFM_HEIGHT0_M1 = 283
    NPU_SET_OFM_HEIGHT1_M1 = 284
    NPU_SET_OFM_REGION = 287
    NPU_SET_KERNEL_WIDTH_M1 = 288
    NPU_SET_KERNEL_HEIGHT_M1 = 289
    NPU_SET_KERNEL_STRIDE = 290
    NPU_SET_ACC_FORMAT = 292
    NPU_SET_ACTIVATION = 293
    NPU_SET_ACTIVATION_MIN = 294
    NPU_SET_ACTIVATION_MAX = 295
    NPU_SET_WEIGHT_REGION = 296
    NPU_SET_SCALE_REGION = 297
    NPU_SET_RESIZE_X_SCALE_N_M1 = 298
    NPU_SET_RESIZE_Y_SCALE_N_M1 = 299
    NPU_SET_RESIZE_X_OFFSET = 300
    NPU_SET_RESIZE_Y_OFFSET = 301
    NPU_SET_WEIGHT_FORMAT = 302
    NPU_SET_BLOCKDEP = 303
    NPU_SET_DMA0_SRC_REGION = 304
    NPU_SET_DMA0_DST_REGION = 305
    NPU_SET_DMA0_SIZE0 = 306
    NPU_SET_DMA0_SIZE1 = 307
    NPU_SET_DMA0_IDX_REGION = 308
    NPU_SET_IFM2_BROADCAST = 384
    NPU_SET_IFM2_PRECISION = 389
    NPU_SET_IFM2_ZERO_POINT = 393
    NPU_SET_IFM2_WIDTH0_M1 = 394
    NPU_SET_IFM2_HEIGHT0_M1 = 395
    NPU_SET_IFM2_HEIGHT1_M1 = 396
    NPU_SET_IFM2_REGION = 399


class cmd1(Enum):  # noqa: N801 - named as Vela's cmd1_opcode and ethos_u55_regs.cmd1
    """Commands followed by one 32-bit payload word. Address registers carry bits 32-39 of a
    40-bit address in their parameter field."""

    NPU_SET_IFM_BASE0 = 0
    NPU_SET_IFM_BASE1 = 1
    NPU_SET_IFM_BASE2 = 2
    NPU_SET_IFM_BASE3 = 3
    NPU_SET_IFM_STRIDE_X = 4
    NPU_SET_IFM_STRIDE_Y = 5
    NPU_SET_IFM_STRIDE_C = 6
    NPU_SET_OFM_BASE0 = 16
    NPU_SET_OFM_BASE1 = 17
    NPU_SET_OFM_BASE2 = 18
    NPU_SET_OFM_BASE3 = 19
    NPU_SET_OFM_STRIDE_X = 20
    NPU_SET_OFM_STRIDE_Y = 21
    NPU_SET_OFM_STRIDE_C = 22
    NPU_SET_WEIGHT_BASE = 32
    NPU_SET_WEIGHT_LENGTH = 33
    NPU_SET_SCALE_BASE = 34
    NPU_SET_SCALE_LENGTH = 35
    NPU_SET_OFM_SCALE = 36
    NPU_SET_IFM_SCALE = 37
    NPU_SET_IFM2_SCALE = 38
    NPU_SET_OP_SCALAR = 39
    NPU_SET_DMA0_SRC = 48
    NPU_SET_DMA0_DST = 49
    NPU_SET_DMA0_LEN = 50
    NPU_SET_DMA0_SRC_STRIDE0 = 51
    NPU_SET_DMA0_SRC_STRIDE1 = 52
    NPU_SET_DMA0_DST_STRIDE0 = 53
    NPU_SET_DMA0_DST_STRIDE1 = 54
    NPU_SET_DMA0_IDX = 55
    NPU_SET_DMA0_IDX_MAX = 56
    NPU_SET_DMA0_IDX_SKIP1 = 57
    NPU_SET_IFM2_BASE0 = 128
    NPU_SET_IFM2_BASE1 = 129
    NPU_SET_IFM2_BASE2 = 130
    NPU_SET_IFM2_BASE3 = 131
    NPU_SET_IFM2_STRIDE_X = 132
    NPU_SET_IFM2_STRIDE_Y = 133
    NPU_SET_IFM2_STRIDE_C = 134
    NPU_SET_WEIGHT1_BASE = 144
    NPU_SET_WEIGHT1_LENGTH = 145
    NPU_SET_WEIGHT2_BASE = 146
    NPU_SET_WEIGHT2_LENGTH = 147
    NPU_SET_WEIGHT3_BASE = 148
    NPU_SET_WEIGHT3_LENGTH = 149
    # the opcode enum calls these two RESIZE_X / RESIZE_Y; the command structs and Vela's
    # disassembly call them RESIZE_X_STEP / RESIZE_Y_STEP (integer and fractional steps)
    NPU_SET_RESIZE_X_STEP = 150
    NPU_SET_RESIZE_Y_STEP = 151
    # a jump: the payload word is the target's byte offset in the stream (control flow)
    NPU_OP_BRANCH = 256


# DriverConfig.product -> family: Vela's U85 architecture writes product 2 in the config word of
# its COP1 driver payload (ArchEthosU85::ConfigRegisters; U55 writes 0, U65 1)
PRODUCTS = {2: "ethos-u85"}
COMMANDS = CommandSet(cmd0, cmd1)
