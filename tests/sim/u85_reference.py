"""References for the Ethos-U85 weight decoder (test_u85_weights.py), none of them ours:

- Vela 5.2.0's own weight encoder, called in the library Vela ships: regor's shared object
  exports its mlw codec's C functions (mle_encode, ml_encode_ethosu_stream), the code that
  writes every U85 weight stream;
- what a TOSA graph says an operation's weights, bias and rescale are, with the changes Vela
  makes to them: a depthwise convolution with one input channel becomes a convolution, a
  transposed one becomes one convolution per stride phase (its kernel reversed, its sums
  written unscaled), scales lose their factors of two (regor's QuantizedScale::ReduceScale);
- Vela's compiled programs, whose weight reads are replayed (DMA copies into the fast scratch
  included) to find each operation's streams.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
from ethosu import regor
from tosa.RescaleAttribute import RescaleAttribute
from tosa.RoundingMode import RoundingMode
from tosa.TosaGraph import TosaGraph
from tosa.TransposeConv2dAttribute import TransposeConv2dAttribute

from toolkit.lower.tosa_graph import OP_NAMES, read_tosa
from toolkit.sim.families import commands
from toolkit.sim.families.u85_weights import (
    ScaleRecords,
    WeightLayout,
    decode_scales,
    decode_weights,
    scale_stream,
    weight_layout,
    weight_streams,
)
from toolkit.sim.payload import NpuProgram

# --- Vela's encoder -----------------------------------------------------------------------------

_SYNTAX_STANDARD, _SYNTAX_FAST = 0, 2  # MLW_ENCODE_SYNTAX_ETHOSU, _ETHOSU_FWD
NO_PALETTE = 32  # MLW_ENCODE_NO_PALETTE_LUT: what Vela passes for fast and 2:4 sparse weights
VELA_CHUNK = 128 * 1024  # mle_encode_proxy's source buffering: a new palette per chunk


class _Result(ctypes.Structure):  # ml_encode_result_t
    _fields_ = [
        ("data", ctypes.POINTER(ctypes.c_uint8)),
        ("length", ctypes.c_int32),
        ("source_length", ctypes.c_int32),
        ("sections", ctypes.c_void_p),
        ("section_count", ctypes.c_int32),
    ]


class _Params(ctypes.Structure):  # ml_ethosu_encode_params_t
    _fields_ = [
        ("buffering_hint", ctypes.c_int32),
        ("flags", ctypes.c_uint16),
        ("realloc", ctypes.c_void_p),
    ]


class _SourceState(ctypes.Structure):  # ml_source_state_t
    _fields_ = [("new_dim", ctypes.c_uint8), ("end_dim", ctypes.c_uint8), ("eos", ctypes.c_bool)]


_SOURCE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_int32,
    ctypes.POINTER(_SourceState),
    ctypes.POINTER(ctypes.c_int16),
    ctypes.c_int32,
    ctypes.c_void_p,
)


def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(regor.__file__)
    lib.mle_create_context.restype = ctypes.c_void_p
    lib.mle_create_context.argtypes = [ctypes.c_int32]
    lib.mle_destroy_context.argtypes = [ctypes.c_void_p]
    lib.mle_encode.restype = ctypes.c_int
    lib.mle_encode.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(_Result),
        ctypes.POINTER(ctypes.c_int16),
        ctypes.c_int,
        ctypes.c_uint,
    ]
    lib.mle_free.argtypes = [ctypes.POINTER(_Result)]
    lib.ml_encode_ethosu_stream.restype = ctypes.c_int32
    lib.ml_encode_ethosu_stream.argtypes = [
        ctypes.POINTER(_Result),
        ctypes.POINTER(_Params),
        _SOURCE,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    return lib


_LIB = _library()


def _taken(result: _Result) -> bytes:
    data = ctypes.string_at(result.data, result.length)
    _LIB.mle_free(ctypes.byref(result))
    return data


def vela_encode_fast(weights: np.ndarray, flags: int = 0) -> bytes:
    """A fast-format stream as Vela writes one (mle_encode_fwd_proxy: one context, one call)."""
    values = np.ascontiguousarray(weights, np.int16)
    context = _LIB.mle_create_context(_SYNTAX_FAST)
    result = _Result()
    pointer = values.ctypes.data_as(ctypes.POINTER(ctypes.c_int16))
    written = _LIB.mle_encode(context, ctypes.byref(result), pointer, len(values), flags)
    _LIB.mle_destroy_context(context)
    assert written >= 0, "Vela's encoder refused the weights"
    return _taken(result)


def vela_encode_standard(weights: np.ndarray) -> bytes:
    """A standard-format stream as Vela writes one (mle_encode_proxy: ml_encode_ethosu_stream
    pulling the weights VELA_CHUNK at a time, a new palette for each)."""
    values = np.ascontiguousarray(weights, np.int16)
    position = [0]

    def source(_query, state, buffer, size, _user):
        count = min(size, len(values) - position[0])
        ctypes.memmove(buffer, values[position[0] :].ctypes.data, 2 * count)
        position[0] += count
        state[0].eos = count < size
        return count

    callback = _SOURCE(source)
    params = _Params(VELA_CHUNK, 0, None)
    result = _Result()
    status = _LIB.ml_encode_ethosu_stream(
        ctypes.byref(result), ctypes.byref(params), callback, None, None
    )
    assert status >= 0, "Vela's encoder refused the weights"
    assert result.source_length == len(values)
    return _taken(result)


# --- what the TOSA graph says -------------------------------------------------------------------


class Expected(NamedTuple):
    """One convolution's weights and output stage, as an U85 operation holds them."""

    name: str
    weights: np.ndarray  # (O, KH, KW, I), the weight zero point taken off
    bias: np.ndarray  # int64, one per O
    scale: np.ndarray
    shift: np.ndarray


def _reduced(multiplier: np.ndarray, shift: np.ndarray, double_round: bool):
    """regor's ReduceScales: factors of two leave the multiplier (not for double rounding
    with a shift over 31)."""
    multiplier, shift = multiplier.astype(np.int64), shift.astype(np.int64)
    for k in range(len(multiplier)):
        if double_round and shift[k] > 31:
            continue
        while multiplier[k] > 1 and multiplier[k] % 2 == 0 and shift[k] > 0:
            multiplier[k] //= 2
            shift[k] -= 1
    return multiplier, shift


def _attributes(path: Path) -> dict[str, object]:
    """Output tensor name -> the RESCALE's double rounding or TRANSPOSE_CONV2D's stride."""
    graph = TosaGraph.GetRootAsTosaGraph(path.read_bytes(), 0)
    found: dict[str, object] = {}
    for r in range(graph.RegionsLength()):
        for b in range(graph.Regions(r).BlocksLength()):
            block = graph.Regions(r).Blocks(b)
            for i in range(block.OperatorsLength()):
                op = block.Operators(i)
                name, table = OP_NAMES.get(op.Op()), op.Attribute()
                if name == "RESCALE":
                    rescale = RescaleAttribute()
                    rescale.Init(table.Bytes, table.Pos)
                    double = rescale.RoundingMode() == RoundingMode.DOUBLE_ROUND
                    found[op.Outputs(0).decode()] = double
                elif name == "TRANSPOSE_CONV2D":
                    transpose = TransposeConv2dAttribute()
                    transpose.Init(table.Bytes, table.Pos)
                    found[op.Outputs(0).decode()] = tuple(int(v) for v in transpose.StrideAsNumpy())
    return found


def expected_weights(path: Path) -> list[Expected]:
    """Every convolution of a TOSA graph (a transposed one: one per stride phase, its kernel
    taken every stride-th element and reversed, as Vela splits it)."""
    tosa, attributes = read_tosa(path), _attributes(path)
    expected = []
    for op in tosa.operators:
        if op.op not in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D"):
            continue
        weights = tosa.constant(op.inputs[1]).astype(np.int64)
        weights = weights - int(tosa.constants[op.inputs[4]][0])
        if op.op == "DEPTHWISE_CONV2D":  # (KH, KW, C, M) -> (C * M, KH, KW, 1)
            kh, kw, c, m = weights.shape
            weights = weights.reshape(kh, kw, c * m).transpose(2, 0, 1)[..., None]
        (rescale,) = [u for u in tosa.operators if u.op == "RESCALE" and u.inputs[0] in op.outputs]
        channels = len(weights)
        multiplier, shift = _reduced(
            np.broadcast_to(tosa.constants[rescale.inputs[1]], channels),
            np.broadcast_to(tosa.constants[rescale.inputs[2]], channels),
            bool(attributes[rescale.outputs[0]]),
        )
        bias = np.broadcast_to(tosa.constants[op.inputs[2]].astype(np.int64), channels)
        if op.op != "TRANSPOSE_CONV2D":
            expected.append(Expected(op.outputs[0], weights, bias, multiplier, shift))
            continue
        # each phase writes its 32-bit sums unscaled, every stride-th OFM element; a later
        # operation rescales them
        sy, sx = attributes[op.outputs[0]]  # type: ignore[misc]
        unit, zero = np.ones(channels, np.int64), np.zeros(channels, np.int64)
        for py in range(sy):
            for px in range(sx):
                phase = weights[:, py::sy, px::sx, :][:, ::-1, ::-1, :]
                expected.append(Expected(f"{op.outputs[0]}[{py},{px}]", phase, bias, unit, zero))
    return expected


# --- an U85 program's weight reads --------------------------------------------------------------


class Decoded(NamedTuple):
    offset: int  # of the operation in the command stream
    operation: str
    layout: WeightLayout
    acc48: bool
    weights: np.ndarray
    scales: ScaleRecords


def decoded_operations(program: NpuProgram) -> Iterator[Decoded]:
    """Each convolution's and depthwise operation's weights and scales, read where its
    registers point (region 0: the program's weights; others: what DMA copied there)."""
    accelerator = program.config.accelerator if program.config else ""
    regions = {0: bytearray(program.weights)}
    for command, registers in commands(accelerator).operation_registers(program.command_stream):
        if registers is None:
            continue
        if command.name == "NPU_OP_DMA_START":
            _copy(regions, registers)
            continue
        if command.name not in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE") or command.param & 1:
            continue  # no weights, or a matrix product's from its IFM2
        layout = weight_layout(registers, command.name, accelerator)
        weights = regions[registers["WEIGHT_REGION"] & 7]
        streams = [
            (f"{name} of {command.name} at {command.offset:#x}", bytes(weights[b : b + n]))
            for name, b, n in weight_streams(registers, layout)
        ]
        base, length = scale_stream(registers)
        raw = bytes(regions[registers["SCALE_REGION"] & 7][base : base + length])
        acc48 = registers["ACC_FORMAT"] & 3 == 1
        yield Decoded(
            command.offset,
            command.name,
            layout,
            acc48,
            decode_weights(streams, layout),
            decode_scales(raw, layout.ofm_depth, acc48),
        )


def pool_scales(program: NpuProgram) -> Iterator[ScaleRecords]:
    """The scale records of each POOL that reads a per-channel scale stream (OFM_PRECISION bit
    8 clear): a NullPool rescaling 32-bit sums, the transposed convolution's output stage."""
    accelerator = program.config.accelerator if program.config else ""
    regions = {0: bytearray(program.weights)}
    for command, registers in commands(accelerator).operation_registers(program.command_stream):
        if registers is None:
            continue
        if command.name == "NPU_OP_DMA_START":
            _copy(regions, registers)
        elif command.name == "NPU_OP_POOL" and not registers["OFM_PRECISION"] >> 8 & 1:
            base, length = scale_stream(registers)
            raw = bytes(regions[registers["SCALE_REGION"] & 7][base : base + length])
            yield decode_scales(
                raw, registers["OFM_DEPTH_M1"] + 1, registers["ACC_FORMAT"] & 3 == 1
            )


def transposed_rescale(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The (multiplier, shift) of the RESCALE after the graph's transposed convolution."""
    tosa = read_tosa(path)
    (op,) = [o for o in tosa.operators if o.op == "TRANSPOSE_CONV2D"]
    (rescale,) = [u for u in tosa.operators if u.op == "RESCALE" and u.inputs[0] in op.outputs]
    return tosa.constants[rescale.inputs[1]].astype(np.int64), tosa.constants[
        rescale.inputs[2]
    ].astype(np.int64)


def _copy(regions: dict[int, bytearray], registers: dict[str, int]) -> None:
    """A linear DMA between regions (LUT loads into internal memory are no weight reads)."""
    source, destination = registers["DMA0_SRC_REGION"], registers["DMA0_DST_REGION"]
    if (source | destination) & 0x100:
        return
    assert not (source >> 9) & 7 and not (destination >> 9) & 7, "a strided or indexed DMA"
    src, dst, length = registers["DMA0_SRC"], registers["DMA0_DST"], registers["DMA0_LEN"]
    target = regions.setdefault(destination & 7, bytearray())
    if len(target) < dst + length:
        target.extend(bytes(dst + length - len(target)))
    target[dst : dst + length] = regions[source & 7][src : src + length]


def match(decoded: list[Decoded], expected: list[Expected]) -> list[tuple[Decoded, str, int]]:
    """Each decoded operation with the convolution and the first channel it holds: weights,
    bias, scale and shift all equal, channel for channel. Every operation must find one, and
    every channel of every convolution must be held by exactly one operation."""
    covered = {e.name: np.zeros(len(e.weights), int) for e in expected}
    found = []
    for d in decoded:
        place = _place(d, expected)
        assert place is not None, (
            f"{d.operation} at {d.offset:#x} ({d.layout}) holds no convolution's weights"
        )
        name, first = place
        covered[name][first : first + d.layout.ofm_depth] += 1
        found.append((d, name, first))
    for name, count in covered.items():
        assert (count == 1).all(), f"{name}: channels held {count.tolist()} times"
    return found


def _place(d: Decoded, expected: list[Expected]) -> tuple[str, int] | None:
    depth = d.layout.ofm_depth
    for e in expected:
        if e.weights.shape[1:] != d.weights.shape[1:]:
            continue
        for first in range(len(e.weights) - depth + 1):
            part = slice(first, first + depth)
            if (
                np.array_equal(e.weights[part], d.weights)
                and np.array_equal(e.bias[part], d.scales.bias)
                and np.array_equal(e.scale[part], d.scales.scale)
                and np.array_equal(e.shift[part], d.scales.shift)
            ):
                return e.name, first
    return None
