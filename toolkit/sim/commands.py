"""Decoding the register command stream into commands.

Word 0: bits 0-9 opcode, bits 14-15 payload mode (0: cmd0, parameter only; 1: cmd1, one extra
32-bit word), bits 16-31 parameter. Names come from Vela's register definitions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import PayloadError
from .families.ethos_u55 import cmd0, cmd1

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


def _unknown(code: int, kind: str, word: int, i: int) -> PayloadError:
    return PayloadError(
        f"unknown opcode {code:#05x} ({kind}, word {word:#010x}) at command-stream offset {i * 4:#x}"
    )


def _truncated(name: str, i: int) -> PayloadError:
    return PayloadError(
        f"{name} at command-stream offset {i * 4:#x} lacks its payload word: the stream is "
        "truncated"
    )


def _bad_mode(mode: int, word: int, i: int) -> PayloadError:
    return PayloadError(
        f"bad payload mode {mode} in word {word:#010x} at command-stream offset {i * 4:#x}"
    )


def _words(stream: bytes) -> list[int]:
    if len(stream) % 4:
        raise PayloadError(f"command stream is {len(stream)} bytes, not whole 32-bit words")
    return np.frombuffer(stream, dtype="<u4").tolist()


def decode(stream: bytes) -> tuple[Command, ...]:
    words = _words(stream)
    commands = []
    i = 0
    while i < len(words):
        word = words[i]
        code, mode, param = word & 0x3FF, (word >> 14) & 0x3, word >> 16
        if mode == 0:
            name = _CMD0.get(code)
            if name is None:
                raise _unknown(code, "cmd0", word, i)
            commands.append(Command(i * 4, name, param))
            i += 1
        elif mode == 1:
            name = _CMD1.get(code)
            if name is None:
                raise _unknown(code, "cmd1", word, i)
            if i + 1 >= len(words):
                raise _truncated(name, i)
            commands.append(Command(i * 4, name, param, words[i + 1]))
            i += 2
        else:
            raise _bad_mode(mode, word, i)
    return tuple(commands)


def register_name(command: str) -> str:
    """The register a NPU_SET_* command writes; a cmd1 register's parameter field is NAME.param."""
    return command.removeprefix("NPU_SET_")


PARAM = ".param"
_SET0 = {c: register_name(n) for c, n in _CMD0.items() if n not in OPERATIONS}
_SET1 = {c: (register_name(n), register_name(n) + PARAM) for c, n in _CMD1.items()}

# operations that only order or signal: no registers of their own, nothing to run or compare
SYNC_OPERATIONS = frozenset(
    {"NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK", "NPU_OP_IRQ"}
)


def operation_registers(
    stream: bytes, skip: frozenset[str] = frozenset()
) -> list[tuple[Command, dict[str, int] | None]]:
    """Each NPU_OP_* command of the stream with the register values set before it (a fresh
    dict each), as registers.RegisterFile keeps them; None for the operations named in skip.
    decode and RegisterFile.write in one pass, without a Command for each register write
    (most of a program's commands), with decode's errors."""
    words = _words(stream)
    operations: list[tuple[Command, dict[str, int] | None]] = []
    values: dict[str, int] = {}
    i, end = 0, len(words)
    while i < end:
        word = words[i]
        code, mode = word & 0x3FF, (word >> 14) & 0x3
        if mode == 0:
            register = _SET0.get(code)
            if register is not None:
                values[register] = word >> 16
            else:
                name = _CMD0.get(code)
                if name is None:
                    raise _unknown(code, "cmd0", word, i)
                state = None if name in skip else dict(values)
                operations.append((Command(i * 4, name, word >> 16), state))
            i += 1
        elif mode == 1:
            names = _SET1.get(code)
            if names is None:
                raise _unknown(code, "cmd1", word, i)
            if i + 1 >= end:
                raise _truncated(_CMD1[code], i)
            values[names[0]] = words[i + 1]
            values[names[1]] = word >> 16
            i += 2
        else:
            raise _bad_mode(mode, word, i)
    return operations
