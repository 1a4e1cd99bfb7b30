"""The Ethos-U delegates of a .pte, with Vela blocks stored as named data put back in place.

ExecuTorch 1.5 can keep a delegate's Vela blocks outside its payload (pytorch/executorch#21893:
EthosUCompileSpec(external_block_placements=VelaExternalBlockPlacements(cmd_data=TAG,
weight_data=TAG))): the block in the vela_bin_stream then holds a key (a SHA-256 hex digest)
with its external flag set, and the bytes are named data under that key. ExecuTorch 1.5.1 writes
them to a .ptd file named after the tag (`to_executorch().write_tensor_data_to_file(dir)`,
`TAG.ptd` beside `model.pte`); a .pte can also hold named data itself (Program.named_data). The
runtime looks a key up in the program's named-data map, whichever file holds it: so does this.

.pte and .ptd files are untrusted: every offset is checked (flatbuffer.py), and damage is one
PayloadError line naming the file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ..sim.errors import PayloadError
from ..sim.payload import bin_stream_blocks, with_named_data
from .flatbuffer import FlatBuffer, Table

ETHOS_U_BACKEND = "EthosUBackend"
_INLINE, _SEGMENT = 0, 1
# Program: execution_plan 1, backend_delegate_data 3, segments 4, named_data 7;
# ExecutionPlan: delegates 7; BackendDelegate: id 0, processed 1; reference: location 0, index 1
_PLANS, _INLINE_DATA, _SEGMENTS, _NAMED = 1, 3, 4, 7
_DELEGATES = 7
# FlatTensor (.ptd): segments 1, named_data 2; NamedData: key 0, segment_index 1
_PTD_SEGMENTS, _PTD_NAMED = 1, 2


class PteContents(NamedTuple):
    payloads: tuple[bytes, ...]  # each Ethos-U delegate's processed data, in plan order
    named: dict[str, bytes]  # the .pte's own named data, by key


def _header(data: bytes, magic: bytes, fields: int, source: str) -> tuple[int, ...]:
    """The u64 fields of the extended header at byte 8 (magic, u32 length, then u64s)."""
    end = 16 + 8 * fields
    if len(data) < end or data[8:12] != magic:
        raise PayloadError(f"{source}: no {magic.decode()} header at byte 8: not this file kind")
    if struct.unpack_from("<I", data, 12)[0] < end - 8:
        raise PayloadError(f"{source}: damaged: its {magic.decode()} header is too short")
    return struct.unpack_from(f"<{fields}Q", data, 16)


def _segments(fb: FlatBuffer, root: Table, index: int, base: int) -> list[tuple[int, int]]:
    """(start, end) in the file of each data segment, checked against the file."""
    spans = []
    for segment in fb.tables(root, index):
        start = base + fb.scalar(segment, 0, "u64")
        end = start + fb.scalar(segment, 1, "u64")
        if end > len(fb.data):
            raise PayloadError(f"{fb.source}: damaged: a data segment runs past the file's end")
        spans.append((start, end))
    return spans


def _named(
    fb: FlatBuffer, root: Table, index: int, spans: list[tuple[int, int]]
) -> dict[str, bytes]:
    named: dict[str, bytes] = {}
    for entry in fb.tables(root, index):
        segment = fb.scalar(entry, 1, "u32")
        if segment >= len(spans):
            raise PayloadError(f"{fb.source}: damaged: named data names segment {segment}")
        start, end = spans[segment]
        named[fb.string(entry, 0)] = fb.data[start:end]
    return named


def read_pte(data: bytes, source: str) -> PteContents:
    """The Ethos-U payloads and named data of a .pte file's bytes."""
    if len(data) < 8 or data[4:6] != b"ET":
        raise PayloadError(f"{source}: not an ExecuTorch program (no ET file identifier)")
    program_size, segment_base = _header(data, b"eh00", 2, source)
    fb = FlatBuffer(data, program_size, source)
    root = fb.root()
    spans = _segments(fb, root, _SEGMENTS, segment_base)
    inline = fb.tables(root, _INLINE_DATA)
    payloads = []
    for plan in fb.tables(root, _PLANS):
        for delegate in fb.tables(plan, _DELEGATES):
            reference = fb.table(delegate, 1)
            if fb.string(delegate, 0) != ETHOS_U_BACKEND or reference is None:
                continue
            location, index = fb.scalar(reference, 0, "u8"), fb.scalar(reference, 1, "u32")
            if location == _INLINE and index < len(inline):
                payloads.append(fb.byte_vector(inline[index], 0))
            elif location == _SEGMENT and index < len(spans):
                payloads.append(data[spans[index][0] : spans[index][1]])
            else:
                raise PayloadError(f"{source}: damaged: a delegate's data reference is invalid")
    return PteContents(tuple(payloads), _named(fb, root, _NAMED, spans))


def read_ptd(data: bytes, source: str) -> dict[str, bytes]:
    """The named data of a .ptd file's bytes, by key."""
    if len(data) < 8 or data[4:6] != b"FT":
        raise PayloadError(f"{source}: not an ExecuTorch data file (no FT file identifier)")
    offset, size, segment_base, _ = _header(data, b"FH01", 4, source)
    fb = FlatBuffer(data, offset + size, source)
    root = fb.root()
    return _named(fb, root, _PTD_NAMED, _segments(fb, root, _PTD_SEGMENTS, segment_base))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise PayloadError(f"cannot read {path}: {exc.strerror}") from None


def ethos_u_payloads(pte: Path, data_files: Iterable[Path] | None = None) -> list[bytes]:
    """Each Ethos-U delegate's full vela_bin_stream: blocks stored as named data are taken from
    the .pte itself or from `data_files` (default: every .ptd beside the .pte)."""
    contents = read_pte(_read(pte), str(pte))
    external = [p for p in contents.payloads if _has_external_blocks(p, str(pte))]
    if not external:
        return list(contents.payloads)
    named = dict(contents.named)
    files = sorted(pte.parent.glob("*.ptd")) if data_files is None else list(data_files)
    for path in files:
        named.update(read_ptd(_read(path), str(path)))
    return [with_named_data(p, named, str(pte)) for p in contents.payloads]


def _has_external_blocks(payload: bytes, source: str) -> bool:
    return any(block.external for block in bin_stream_blocks(payload, source))
