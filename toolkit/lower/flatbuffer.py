"""A FlatBuffers table reader for untrusted files: every offset is checked before it is followed.

FlatBuffers' own Python runtime trusts the bytes (a damaged offset reads past the buffer or far
into it). This reads only what the .pte and .ptd readers need: tables, scalars, strings, byte
vectors and vectors of tables, each position checked against the buffer, each failure one
PayloadError line naming the file.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..sim.errors import PayloadError

_U8, _U16, _U32, _I32, _U64 = (struct.Struct(f) for f in ("<B", "<H", "<I", "<i", "<Q"))


class Table(NamedTuple):
    """A table at `pos`, its vtable at `vtable` with `fields` entries."""

    pos: int
    vtable: int
    fields: int


class FlatBuffer:
    def __init__(self, data: bytes, size: int, source: str):
        """`size`: how many bytes from the start hold the flatbuffer (the rest are segments)."""
        if not 8 <= size <= len(data):
            raise PayloadError(f"{source}: flatbuffer of {size} bytes in a {len(data)}-byte file")
        self.data, self.size, self.source = data, size, source

    def _read(self, fmt: struct.Struct, pos: int) -> int:
        if pos < 0 or pos + fmt.size > self.size:
            raise PayloadError(f"{self.source}: damaged: an offset points outside the flatbuffer")
        return fmt.unpack_from(self.data, pos)[0]

    def root(self) -> Table:
        return self.table_at(self._read(_U32, 0))

    def table_at(self, pos: int) -> Table:
        vtable = pos - self._read(_I32, pos)
        vtable_size = self._read(_U16, vtable)
        if vtable_size < 4 or vtable_size % 2:
            raise PayloadError(f"{self.source}: damaged: a table's vtable has {vtable_size} bytes")
        self._read(_U16, vtable + vtable_size - 2)  # the whole vtable lies inside
        return Table(pos, vtable, (vtable_size - 4) // 2)

    def _field(self, table: Table, index: int) -> int | None:
        if index >= table.fields:
            return None
        offset = self._read(_U16, table.vtable + 4 + 2 * index)
        return None if offset == 0 else table.pos + offset

    def scalar(self, table: Table, index: int, kind: str, default: int = 0) -> int:
        """A scalar field: kind "u8", "u32" or "u64"."""
        fmt = {"u8": _U8, "u32": _U32, "u64": _U64}[kind]
        pos = self._field(table, index)
        return default if pos is None else self._read(fmt, pos)

    def _target(self, table: Table, index: int) -> int | None:
        pos = self._field(table, index)
        return None if pos is None else pos + self._read(_U32, pos)

    def table(self, table: Table, index: int) -> Table | None:
        target = self._target(table, index)
        return None if target is None else self.table_at(target)

    def _vector(self, table: Table, index: int, element: int) -> tuple[int, int]:
        """(first element's position, length) of a vector field; (0, 0) when absent."""
        start = self._target(table, index)
        if start is None:
            return 0, 0
        length = self._read(_U32, start)
        if start + 4 + length * element > self.size:
            raise PayloadError(f"{self.source}: damaged: a vector runs past the flatbuffer")
        return start + 4, length

    def tables(self, table: Table, index: int) -> list[Table]:
        first, length = self._vector(table, index, 4)
        return [
            self.table_at(first + 4 * i + self._read(_U32, first + 4 * i)) for i in range(length)
        ]

    def byte_vector(self, table: Table, index: int) -> bytes:
        first, length = self._vector(table, index, 1)
        return self.data[first : first + length]

    def string(self, table: Table, index: int) -> str:
        return self.byte_vector(table, index).decode("utf-8", "replace")
