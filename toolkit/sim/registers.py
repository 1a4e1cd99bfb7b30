"""Register state: the stream only sends registers that change, so state persists across ops."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from .commands import PARAM, Command, register_name
from .errors import UnsupportedError


def signed16(value: int) -> int:
    return value - 0x10000 if value & 0x8000 else value


class Registers(NamedTuple):
    """The register values an operation runs with (frozen snapshot at its NPU_OP command)."""

    values: Mapping[str, int] = MappingProxyType({})  # name without NPU_SET_ -> value
    op: Command | None = None

    @property
    def command(self) -> Command:
        """op, where it must be there: planning makes an operation's registers with its NPU_OP
        command (registers read back from a record, as simulator.op_outputs reads them, have
        none)."""
        if self.op is None:
            raise ValueError("these registers come without their NPU_OP command")
        return self.op

    def get(self, name: str, default: int | None = None) -> int:
        value = self.values.get(name)  # one lookup: planning asks some 60 times an operation
        if value is not None:
            return value
        if default is not None:
            return default
        raise self._never_set(name)

    def required(self, names: tuple[str, ...]) -> list[int]:
        """get(name) of each name, in one call (planning reads some 50 registers an operation)."""
        values = self.values
        try:
            return [values[name] for name in names]
        except KeyError as missing:
            raise self._never_set(missing.args[0]) from None

    def _never_set(self, name: str) -> UnsupportedError:
        where = f"{self.op.name} at command-stream offset {self.op.offset:#x}" if self.op else "?"
        return UnsupportedError(f"{where} needs register {name}, which the stream never set")

    def s16(self, name: str, default: int | None = None) -> int:
        return signed16(self.get(name, default))

    def cmd1_param(self, name: str) -> int:
        """The 16-bit parameter field that some cmd1 registers carry (OFM_SCALE shift)."""
        return self.values.get(name + PARAM, 0)


class RegisterFile:
    def __init__(self) -> None:
        self._values: dict[str, int] = {}

    def write(self, cmd: Command) -> None:
        name = register_name(cmd.name)
        if cmd.data is None:
            self._values[name] = cmd.param
        else:
            self._values[name] = cmd.data
            self._values[name + PARAM] = cmd.param

    def snapshot(self, op: Command) -> Registers:
        return Registers(MappingProxyType(dict(self._values)), op)
