"""Decoding the register command stream into commands.

Word 0: bits 0-9 opcode, bits 14-15 payload mode (0: cmd0, parameter only; 1: cmd1, one extra
32-bit word), bits 16-31 parameter. Names come from Vela's register definitions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from .errors import PayloadError

_CMD0 = {c.value: c.name for c in cmd0}
_CMD1 = {c.value: c.name for c in cmd1}
OPERATIONS = frozenset(n for n in _CMD0.values() if n.startswith("NPU_OP_"))


class Command(NamedTuple):  # a tuple: a program's thousand commands are made on its first run
    offset: int  # byte offset in the command stream
    name: str  # e.g. "NPU_SET_IFM_BASE0", "NPU_OP_CONV"
    param: int  # 16-bit parameter
    data: int | None = None  # the 32-bit payload word of cmd1 commands

    @property
    def is_operation(self) -> bool:
        return self.name in OPERATIONS

    @property
    def value(self) -> int:
        return self.param if self.data is None else self.data


def decode(stream: bytes) -> tuple[Command, ...]:
    return tuple(_commands(stream, None))


_SET0 = {code: name.removeprefix("NPU_SET_") for code, name in _CMD0.items()}


def operation_registers(
    stream: bytes, skip: frozenset[str] = frozenset()
) -> list[tuple[Command, dict[str, int] | None]]:
    """Each NPU_OP_* command of the stream with the register values set before it (a fresh
    dict each, names without NPU_SET_; a cmd1 register's parameter field as NAME.param), as
    registers.RegisterFile keeps them; None for the operations named in skip. decode and
    RegisterFile.write in one pass, without a Command for each register write (most of a
    program's commands)."""
    operations: list[tuple[Command, dict[str, int] | None]] = []
    _commands(stream, operations, skip)
    return operations


def _commands(stream: bytes, operations: list | None, skip: frozenset[str] = frozenset()):
    """decode's commands; with `operations`, only operation_registers' list is filled."""
    if len(stream) % 4:
        raise PayloadError(f"command stream is {len(stream)} bytes, not whole 32-bit words")
    words = np.frombuffer(stream, dtype="<u4").tolist()
    commands: list[Command] = []
    values: dict[str, int] = {}
    i = 0
    while i < len(words):
        word = words[i]
        code, mode, param = word & 0x3FF, (word >> 14) & 0x3, word >> 16
        if mode == 0:
            name = _CMD0.get(code)
            if name is None:
                raise PayloadError(
                    f"unknown opcode {code:#05x} (cmd0, word {word:#010x}) at "
                    f"command-stream offset {i * 4:#x}"
                )
            if operations is None:
                commands.append(Command(i * 4, name, param))
            elif name in OPERATIONS:
                state = None if name in skip else dict(values)
                operations.append((Command(i * 4, name, param), state))
            else:
                values[_SET0[code]] = param
            i += 1
        elif mode == 1:
            name = _CMD1.get(code)
            if name is None:
                raise PayloadError(
                    f"unknown opcode {code:#05x} (cmd1, word {word:#010x}) at "
                    f"command-stream offset {i * 4:#x}"
                )
            if i + 1 >= len(words):
                raise PayloadError(
                    f"{name} at command-stream offset {i * 4:#x} lacks its "
                    "payload word: the stream is truncated"
                )
            if operations is None:
                commands.append(Command(i * 4, name, param, words[i + 1]))
            else:
                register = name.removeprefix("NPU_SET_")
                values[register] = words[i + 1]
                values[register + ".param"] = param
            i += 2
        else:
            raise PayloadError(
                f"bad payload mode {mode} in word {word:#010x} at command-stream offset {i * 4:#x}"
            )
    return commands
