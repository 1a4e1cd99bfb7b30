"""Decoding a register command stream into commands, by the register map of the NPU's family.

Word 0: bits 0-9 opcode, bits 14-15 payload mode (0: cmd0, parameter only; 1: cmd1, one extra
32-bit word), bits 16-31 parameter. The opcodes and their names are the family's (families/:
Vela's register definitions for Ethos-U55/U65); the word format is the same on every Ethos-U.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import NamedTuple

import numpy as np

from .errors import PayloadError

PARAM = ".param"
# operations that only order or signal: no registers of their own, nothing to run or compare
SYNC_OPERATIONS = frozenset(
    {"NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK", "NPU_OP_IRQ"}
)


class Command(NamedTuple):
    offset: int  # byte offset in the command stream
    name: str  # e.g. "NPU_SET_IFM_BASE0", "NPU_OP_CONV"
    param: int  # 16-bit parameter
    data: int | None = None  # the 32-bit payload word of cmd1 commands

    @property
    def is_operation(self) -> bool:
        return self.name.startswith("NPU_OP_")

    @property
    def value(self) -> int:
        return self.param if self.data is None else self.data


def register_name(command: str) -> str:
    """The register a NPU_SET_* command writes; a cmd1 register's parameter field is NAME.param."""
    return command.removeprefix("NPU_SET_")


class CommandSet:
    """One family's opcodes (cmd0: parameter only; cmd1: with a payload word), by name."""

    def __init__(self, cmd0: Iterable[Enum], cmd1: Iterable[Enum]):
        self.cmd0 = {c.value: c.name for c in cmd0}
        self.cmd1 = {c.value: c.name for c in cmd1}
        # the register each NPU_SET_* writes (cmd1: its value and its parameter field)
        self._set0 = {
            code: register_name(name)
            for code, name in self.cmd0.items()
            if not name.startswith("NPU_OP_")
        }
        self._set1 = {
            code: (register_name(name), register_name(name) + PARAM)
            for code, name in self.cmd1.items()
            if not name.startswith("NPU_OP_")
        }

    def decode(self, stream: bytes) -> tuple[Command, ...]:
        words = _words(stream)
        commands = []
        i = 0
        while i < len(words):
            word = words[i]
            code, mode, param = word & 0x3FF, (word >> 14) & 0x3, word >> 16
            if mode == 0:
                name = self.cmd0.get(code)
                if name is None:
                    raise _unknown(code, "cmd0", word, i)
                commands.append(Command(i * 4, name, param))
                i += 1
            elif mode == 1:
                name = self.cmd1.get(code)
                if name is None:
                    raise _unknown(code, "cmd1", word, i)
                if i + 1 >= len(words):
                    raise _truncated(name, i)
                commands.append(Command(i * 4, name, param, words[i + 1]))
                i += 2
            else:
                raise _bad_mode(mode, word, i)
        return tuple(commands)

    def operation_registers(
        self, stream: bytes, skip: frozenset[str] = frozenset()
    ) -> list[tuple[Command, dict[str, int] | None]]:
        """Each NPU_OP_* command of the stream with the register values set before it (a fresh
        dict each), as registers.RegisterFile keeps them; None for the operations named in
        skip. decode and RegisterFile.write in one pass, with decode's errors. An operation with a
        payload word (a cmd1 NPU_OP_*) is listed as one, not written as a register."""
        words = _words(stream)
        operations: list[tuple[Command, dict[str, int] | None]] = []
        values: dict[str, int] = {}
        i, end = 0, len(words)
        while i < end:
            word = words[i]
            code, mode = word & 0x3FF, (word >> 14) & 0x3
            if mode == 0:
                register = self._set0.get(code)
                if register is not None:
                    values[register] = word >> 16
                else:
                    name = self.cmd0.get(code)
                    if name is None:
                        raise _unknown(code, "cmd0", word, i)
                    state = None if name in skip else dict(values)
                    operations.append((Command(i * 4, name, word >> 16), state))
                i += 1
            elif mode == 1:
                name = self.cmd1.get(code)
                if name is None:
                    raise _unknown(code, "cmd1", word, i)
                if i + 1 >= end:
                    raise _truncated(name, i)
                names = self._set1.get(code)
                if names is not None:
                    values[names[0]] = words[i + 1]
                    values[names[1]] = word >> 16
                else:  # an operation with a payload word (Ethos-U85's NPU_OP_BRANCH)
                    state = None if name in skip else dict(values)
                    operations.append((Command(i * 4, name, word >> 16, words[i + 1]), state))
                i += 2
            else:
                raise _bad_mode(mode, word, i)
        return operations


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
