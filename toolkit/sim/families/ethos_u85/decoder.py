"""Ethos-U85 operations described from their registers: which NPU_OP command runs which
description (decode_*.py). What the simulator does not run is refused here, while the program is
planned, naming the command, its offset and the register that asks for it."""

from __future__ import annotations

from ...commands import Command
from ...errors import UnsupportedError, at
from ...operations import Operation
from ...registers import Registers
from ..accelerator_config import Accelerator
from .decode_conv import describe_conv
from .decode_dma import describe_dma
from .decode_elementwise import describe_elementwise
from .decode_pool import describe_pool
from .decode_resize import describe_resize


def describe(accelerator: Accelerator, cmd: Command, values: dict[str, int]) -> Operation:
    regs = Registers(values, cmd)
    if cmd.name == "NPU_OP_CONV":
        return describe_conv(regs, accelerator, False)
    if cmd.name == "NPU_OP_DEPTHWISE":
        return describe_conv(regs, accelerator, True)
    if cmd.name == "NPU_OP_POOL":
        return describe_pool(regs, accelerator)
    if cmd.name == "NPU_OP_ELEMENTWISE":
        return describe_elementwise(regs, accelerator)
    if cmd.name == "NPU_OP_RESIZE":
        return describe_resize(regs)
    if cmd.name == "NPU_OP_DMA_START":
        return describe_dma(regs)
    raise UnsupportedError(
        f"{at(cmd.offset, cmd.name, cmd.param)} is not implemented by the simulator"
    )
