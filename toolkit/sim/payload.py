"""Loading what Vela produced: ExecuTorch's vela_bin_stream or Vela's raw .npz.

Both give the same typed NpuProgram: the register command stream (driver header removed),
the read-only weight region, scratch sizes and where the delegate's inputs and outputs live.
"""

from __future__ import annotations

import io
import math
import os
import struct
import zipfile
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .errors import PayloadError
from .families import family_of_product

_BLOCK_HEADER = struct.Struct("<16sIB11s")
_IO_RECORD = struct.Struct("<9i")
_WORD = struct.Struct("<I").unpack_from
_FOURCC = b"COP1"
# Driver-action tags in the COP1 header (low byte of each word).
_DA_CONFIG, _DA_CMDSTREAM, _DA_READ_APB, _DA_DUMP_SHRAM, _DA_NOP = 1, 2, 3, 4, 5
# The .pte payload does not say how large the fast scratch is: the runtime provides it.
DEFAULT_FAST_SCRATCH = 1 << 20


_DTYPES: dict[int, np.dtype] = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32)}


class IOTensor(NamedTuple):
    """One delegate input or output as Vela placed it, with its size and squeezed shape. Made
    by IOTensor.of."""

    shape: tuple[int, ...]  # 6-D, as Vela writes it
    elem_size: int
    offset: int
    region: int
    nbytes: int
    squeezed_shape: tuple[int, ...]  # the shape without its leading ones (the last axis kept)

    @classmethod
    def of(cls, shape: tuple[int, ...], elem_size: int, offset: int, region: int) -> IOTensor:
        first = 0
        while first < len(shape) - 1 and shape[first] == 1:
            first += 1
        nbytes = math.prod(shape) * elem_size
        return cls(shape, elem_size, offset, region, nbytes, tuple(shape[first:]))

    @property
    def dtype(self) -> np.dtype:
        dtype = _DTYPES.get(self.elem_size)
        if dtype is None:
            raise PayloadError(f"tensor element size {self.elem_size} is not 1, 2 or 4")
        return dtype


class DriverConfig(NamedTuple):
    """The COP1 config action: what hardware the stream was compiled for."""

    macs_per_cc_log2: int
    shram_kb: int  # U55/U65; Ethos-U85's config word holds AXI port and core counts there
    product: int  # 0: Ethos-U55, 1: Ethos-U65, 2: Ethos-U85 (families.family_of_product)

    @property
    def accelerator(self) -> str:
        family = family_of_product(self.product) or "ethos-u55"
        return f"{family}-{1 << self.macs_per_cc_log2}"


class NpuProgram(NamedTuple):
    """A compiled program as the simulator runs it."""

    command_stream: bytes  # register commands only, offset 0 = first command
    weights: bytes  # region 0
    scratch_size: int  # region 1
    scratch_fast_size: int  # region 2 (0 when the memory mode has none)
    inputs: tuple[IOTensor, ...]
    outputs: tuple[IOTensor, ...]
    config: DriverConfig | None
    source: str  # where it came from, for messages
    # region 2 is region 1 (a compiled .tflite whose scratch_fast shares the scratch's arena)
    fast_scratch_aliases_scratch: bool = False


def load_payload(data: bytes | bytearray | str | Path) -> NpuProgram:
    """A vela_bin_stream (bytes, or a path to a file holding one) or a Vela raw _vela.npz path."""
    if isinstance(data, (str, Path)):
        path = str(data)
        try:
            stat = os.stat(path)
        except OSError as exc:
            raise PayloadError(f"cannot read {path}: {exc.strerror}") from None
        return _loaded_file(path, stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return _parsed_bin_stream(bytes(data))


@lru_cache(maxsize=32)
def _loaded_file(path: str, mtime_ns: int, size: int, inode: int) -> NpuProgram:
    """The program in a file, read and parsed once while the file stays the same (a .tflite
    program's runs each load its .npz: an evaluation over a data set loads it per input)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise PayloadError(f"cannot read {path}: {exc.strerror}") from None
    if raw[:2] == b"PK":
        return load_npz(raw, path)
    return _load_bin_stream(raw, path)


def forget_payloads() -> None:
    """Drop the parsed payloads (a fresh start, for benchmarks)."""
    _parsed_bin_stream.cache_clear()
    _loaded_file.cache_clear()
    load_npz.cache_clear()


@lru_cache(maxsize=16)
def _parsed_bin_stream(raw: bytes) -> NpuProgram:
    """A delegate's payload is parsed once: runners pass the same bytes object at every run,
    whose hash Python keeps (NpuProgram is immutable)."""
    return _load_bin_stream(raw, "vela_bin_stream")


class Block(NamedTuple):
    """One block of a vela_bin_stream."""

    name: str
    name_field: bytes  # the 16-byte name as stored
    data: bytes
    external: bool  # ExecuTorch 1.5's named data: `data` is the key, the bytes live elsewhere


def bin_stream_blocks(raw: bytes, source: str) -> list[Block]:
    """The blocks of a vela_bin_stream in order, vela_end_stream last."""
    blocks: list[Block] = []
    pos = 0
    while True:
        if pos + _BLOCK_HEADER.size > len(raw):
            raise PayloadError(
                f"{source}: truncated at byte {pos}: expected a 32-byte block "
                f"header, {len(raw) - pos} bytes left (no vela_end_stream)"
            )
        name_raw, length, external, _ = _BLOCK_HEADER.unpack_from(raw, pos)
        name = name_raw.split(b"\0", 1)[0].decode("ascii", "replace")
        if pos == 0 and name != "vela_bin_stream":
            raise PayloadError(f"{source}: not a vela_bin_stream (first block is '{name}')")
        pos += _BLOCK_HEADER.size
        if pos + length > len(raw):
            raise PayloadError(
                f"{source}: block '{name}' at byte {pos - 32} says {length} bytes, "
                f"only {len(raw) - pos} left: truncated"
            )
        blocks.append(Block(name, name_raw, raw[pos : pos + length], bool(external)))
        pos += (length + 15) // 16 * 16
        if name == "vela_end_stream":
            return blocks


def with_named_data(raw: bytes, named: Mapping[str, bytes], source: str) -> bytes:
    """The vela_bin_stream with each block stored as named data put back in its place: the full
    payload, as ExecuTorch's runtime assembles it from the .pte and its data files."""
    out = bytearray()
    for block in bin_stream_blocks(raw, source):
        data: bytes | None = block.data
        if block.external:
            key = block.data.decode("ascii", "replace")
            data = named.get(key)
        if data is None:
            raise PayloadError(
                f"{source}: block '{block.name}' is named data '{key}' that neither the .pte "
                "nor a .ptd given holds: give the .ptd ExecuTorch wrote with it"
            )
        out += _BLOCK_HEADER.pack(block.name_field, len(data), 0, bytes(11))
        out += data + bytes(-len(data) % 16)
    return bytes(out)


def _load_bin_stream(raw: bytes, source: str) -> NpuProgram:
    blocks: dict[str, bytes] = {}
    for block in bin_stream_blocks(raw, source):
        if block.external:
            raise PayloadError(
                f"{source}: block '{block.name}' is stored outside the payload as named data; "
                "read the program from its .pte and the .ptd beside it (etk diff, "
                "toolkit.lower.pte_file.ethos_u_payloads)"
            )
        blocks[block.name] = block.data
    for required in ("cmd_data", "weight_data", "scratch_size", "inputs", "outputs"):
        if required not in blocks:
            raise PayloadError(f"{source}: block '{required}' is missing")
    if len(blocks["scratch_size"]) != 4:
        raise PayloadError(
            f"{source}: scratch_size block has {len(blocks['scratch_size'])} bytes, expected 4"
        )
    scratch = struct.unpack("<I", blocks["scratch_size"])[0]
    stream, config = _strip_driver_header(blocks["cmd_data"], source)
    return NpuProgram(
        stream,
        blocks["weight_data"],
        scratch,
        DEFAULT_FAST_SCRATCH,
        _io_block(blocks["inputs"], "inputs", source),
        _io_block(blocks["outputs"], "outputs", source),
        config,
        source,
    )


def _io_block(raw: bytes, name: str, source: str) -> tuple[IOTensor, ...]:
    if len(raw) < 4:
        raise PayloadError(f"{source}: block '{name}' is too short for its count")
    count = struct.unpack_from("<i", raw)[0]
    if count < 0 or 4 + count * _IO_RECORD.size != len(raw):
        raise PayloadError(
            f"{source}: block '{name}' says {count} tensors but holds "
            f"{len(raw) - 4} bytes ({_IO_RECORD.size} per tensor)"
        )
    tensors = []
    for i in range(count):
        *shape, elem, offset, region = _IO_RECORD.unpack_from(raw, 4 + i * _IO_RECORD.size)
        tensors.append(_io_tensor(shape, elem, offset, region, f"{source}: {name}[{i}]"))
    return tuple(tensors)


def _io_tensor(shape, elem, offset, region, where: str) -> IOTensor:
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape) or int(elem) not in (1, 2, 4) or int(offset) < 0:
        raise PayloadError(
            f"{where}: bad tensor record shape={shape} elem_size={elem} offset={offset}"
        )
    return IOTensor.of(shape, int(elem), int(offset), int(region))


_NPZ_MEMBERS = frozenset(
    ("cmd_data", "weight_data", "scratch_size", "scratch_fast_size")
    + tuple(
        f"{side}_{what}"
        for side in ("input", "output")
        for what in ("shape", "elem_size", "offset", "region")
    )
)


@lru_cache(maxsize=32)
def load_npz(raw: bytes, source: str) -> NpuProgram:
    """A Vela .npz's program, parsed once per content (a .tflite program's runs each load it)."""
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            # only the members a program needs (Vela's .npz holds quantization and variables too)
            data = {k: npz[k] for k in npz.files if k in _NPZ_MEMBERS}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise PayloadError(f"{source}: not a readable Vela .npz ({exc})") from None
    try:
        stream, config = _strip_driver_header(data["cmd_data"].tobytes(), source)

        def tensors(prefix: str) -> tuple[IOTensor, ...]:
            return tuple(
                _io_tensor(
                    shape,
                    data[f"{prefix}_elem_size"][i],
                    data[f"{prefix}_offset"][i],
                    data[f"{prefix}_region"][i],
                    f"{source}: {prefix}[{i}]",
                )
                for i, shape in enumerate(data[f"{prefix}_shape"])
            )

        return NpuProgram(
            stream,
            data["weight_data"].tobytes(),
            int(data["scratch_size"]),
            int(data["scratch_fast_size"]),
            tensors("input"),
            tensors("output"),
            config,
            source,
        )
    except KeyError as exc:
        raise PayloadError(f"{source}: Vela .npz has no array {exc}") from None


def _driver_config(word: int) -> DriverConfig:
    return DriverConfig(word & 0xF, (word >> 8) & 0xFF, word >> 28)


def _strip_driver_header(cmd_data: bytes, source: str) -> tuple[bytes, DriverConfig | None]:
    """The COP1 driver payload -> (register command stream, config action)."""
    if len(cmd_data) % 4:
        raise PayloadError(f"{source}: cmd_data is {len(cmd_data)} bytes, not whole 32-bit words")
    if not cmd_data or cmd_data[:4] != _FOURCC:
        raise PayloadError(f"{source}: cmd_data does not start with the COP1 driver header")
    words = len(cmd_data) // 4
    config = None
    i = 1
    while i < words:
        tag = _WORD(cmd_data, i * 4)[0]
        action, param = tag & 0xFF, tag >> 16
        if action == _DA_CONFIG:
            if i + 2 >= words:
                raise PayloadError(f"{source}: COP1 config action truncated")
            config = _driver_config(_WORD(cmd_data, i * 4 + 4)[0])
            i += 3
        elif action == _DA_CMDSTREAM:
            length = param | (((tag >> 8) & 0xFF) << 16)
            start = (i + 1) * 4
            if start + length * 4 > len(cmd_data):
                raise PayloadError(
                    f"{source}: command stream says {length} words, only "
                    f"{(len(cmd_data) - start) // 4} present: truncated"
                )
            return cmd_data[start : start + length * 4], config
        elif action in (_DA_NOP, _DA_READ_APB, _DA_DUMP_SHRAM):
            i += 1
        else:
            raise PayloadError(f"{source}: unknown COP1 driver action {action:#x} at byte {i * 4}")
    raise PayloadError(f"{source}: COP1 header has no command stream")
