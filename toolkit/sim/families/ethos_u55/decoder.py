"""Ethos-U55/U65 operations described from their registers: which NPU_OP command runs which
description (decode_*.py), and the runs of operations that differ only in their addresses."""

from __future__ import annotations

from collections.abc import Sequence

from ...commands import Command
from ...errors import UnsupportedError, at
from ...operations import Operation
from ...registers import Registers
from ..accelerator_config import Accelerator
from ..family import AddressRun, RawOperation
from .decode_conv import describe_conv
from .decode_dma import describe_dma
from .decode_elementwise import describe_elementwise
from .decode_pool import describe_pool


def describe(accelerator: Accelerator, cmd: Command, values: dict[str, int]) -> Operation:
    regs = Registers(values, cmd)
    cores = accelerator.cores  # Vela sets PARALLEL_MODE = cores - 1 once, up front
    mode = regs.get("PARALLEL_MODE", 0)
    if mode != cores - 1:
        raise UnsupportedError(
            f"PARALLEL_MODE = {mode} is not implemented on {accelerator.name}, which has {cores} "
            f"core{'s' if cores > 1 else ''} (in {at(cmd.offset, cmd.name, cmd.param)})"
        )
    if cmd.name == "NPU_OP_CONV":
        return describe_conv(regs, accelerator, False)
    if cmd.name == "NPU_OP_DEPTHWISE":
        return describe_conv(regs, accelerator, True)
    if cmd.name == "NPU_OP_POOL":
        return describe_pool(regs, accelerator)
    if cmd.name == "NPU_OP_ELEMENTWISE":
        return describe_elementwise(regs, accelerator)
    if cmd.name == "NPU_OP_DMA_START":
        return describe_dma(regs)
    raise UnsupportedError(
        f"{at(cmd.offset, cmd.name, cmd.param)} is not implemented by the simulator"
    )


def address_run(operations: Sequence[RawOperation], first: int) -> AddressRun:
    """How far the operations from `first` repeat it with only IFM_BASE0 and OFM_BASE0 moved,
    each a constant step further than the one before (Vela's transposes: MobileNet's input
    takes 96 such 1x1 pools)."""
    cmd0, values0 = operations[first]
    ifm0, ofm0 = values0.get("IFM_BASE0", 0), values0.get("OFM_BASE0", 0)
    ifm_step = ofm_step = 0
    expected = dict(values0)  # the registers of the run's next operation
    end = first + 1  # the run so far: operations[first:end]
    for cmd, values in operations[first + 1 :]:
        if end == first + 1:  # the second operation sets the steps
            ifm_step = values.get("IFM_BASE0", 0) - ifm0
            ofm_step = values.get("OFM_BASE0", 0) - ofm0
        count = end - first
        expected["IFM_BASE0"] = ifm0 + count * ifm_step
        expected["OFM_BASE0"] = ofm0 + count * ofm_step
        if cmd.name != cmd0.name or cmd.param != cmd0.param or values != expected:
            break
        end += 1
    return AddressRun(end, ifm_step, ofm_step)
