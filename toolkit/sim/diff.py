"""Register-level comparison of two programs: their NPU operations side by side."""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import NamedTuple

from .commands import SYNC_OPERATIONS
from .families import commands
from .payload import NpuProgram

# Registers that hold a byte address (Vela's cmd1_with_address for tensors, weights, scales and
# DMA): where data lives rather than what the operation does. Not BLOCKDEP (how far the kernel
# may overlap the previous one, Vela's calc_blockdep), strides, lengths or regions: those change
# what runs or how long it takes. The names mean the same on every family that has them;
# Ethos-U85 adds two more weight streams and the gather/scatter DMA's index table.
ADDRESS_REGISTERS = frozenset(
    [f"{fm}_BASE{i}" for fm in ("IFM", "OFM", "IFM2") for i in range(4)]
    + ["WEIGHT_BASE", "WEIGHT1_BASE", "SCALE_BASE", "SCALE1_BASE", "DMA0_SRC", "DMA0_DST"]
    + ["WEIGHT2_BASE", "WEIGHT3_BASE", "DMA0_IDX"]
)


class ProgramOp(NamedTuple):
    number: int  # the operation's place in its program
    name: str  # NPU_OP_CONV, ...
    param: int
    offset: int
    registers: tuple[tuple[str, int], ...]

    @property
    def kind(self) -> str:
        return f"{self.name.removeprefix('NPU_OP_')}({self.param})"


class OpDiff(NamedTuple):
    a: ProgramOp | None  # None: only in B
    b: ProgramOp | None  # None: only in A
    changed: tuple[tuple[str, int | None, int | None], ...]  # register, value in A, value in B

    @property
    def same(self) -> bool:
        return self.a is not None and self.b is not None and not self.changed


def operations(program: NpuProgram) -> tuple[ProgramOp, ...]:
    """Every NPU operation with the registers it runs with (waits and STOP excluded)."""
    ops: list[ProgramOp] = []
    skip = SYNC_OPERATIONS | {"NPU_OP_STOP"}
    # the driver header names the NPU the stream is for (as DriverConfig reads it: U55 if none)
    accelerator = program.config.accelerator if program.config else "ethos-u55-128"
    for cmd, values in commands(accelerator).operation_registers(program.command_stream, skip):
        if values is not None:
            registers = tuple(sorted(values.items()))
            ops.append(ProgramOp(len(ops), cmd.name, cmd.param, cmd.offset, registers))
    return tuple(ops)


def diff_programs(
    a: NpuProgram, b: NpuProgram, ignore_addresses: bool = True
) -> tuple[OpDiff, ...]:
    """Ops aligned by kind; for aligned pairs, the registers whose values differ."""
    ops_a, ops_b = operations(a), operations(b)
    matcher = SequenceMatcher(a=[o.kind for o in ops_a], b=[o.kind for o in ops_b], autojunk=False)
    rows: list[OpDiff] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for oa, ob in zip(ops_a[i1:i2], ops_b[j1:j2]):
                rows.append(OpDiff(oa, ob, _changed(oa, ob, ignore_addresses)))
        else:
            rows.extend(OpDiff(o, None, ()) for o in ops_a[i1:i2])
            rows.extend(OpDiff(None, o, ()) for o in ops_b[j1:j2])
    return tuple(rows)


def _changed(a: ProgramOp, b: ProgramOp, ignore_addresses: bool):
    ra, rb = dict(a.registers), dict(b.registers)
    # a DMA reads its own registers only: the rest of the state it carries (ACTIVATION_MIN set
    # for the next kernel) is no difference of the DMA's
    dma = a.name == "NPU_OP_DMA_START"
    out = []
    for name in sorted(set(ra) | set(rb)):
        base = name.split(".")[0]
        if ignore_addresses and base in ADDRESS_REGISTERS or dma and not base.startswith("DMA"):
            continue
        if ra.get(name) != rb.get(name):
            out.append((name, ra.get(name), rb.get(name)))
    return tuple(out)
