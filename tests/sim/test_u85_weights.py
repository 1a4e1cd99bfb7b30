"""Ethos-U85 weight and scale streams, decoded by toolkit/sim/families/u85_codec.py and
u85_weights.py, checked against references we did not write (tests/sim/u85_reference.py):

- Vela 5.2.0's own encoder (called in the library Vela ships) for both formats, and Vela's
  mlw_codec.decode for the standard one;
- real Vela 5.2.0 programs: every convolution's weights, bias, scale and shift, read from its
  streams (one per MAC core, or one fast-format stream) and put back in place, equal the TOSA
  graph's constants exactly, channel for channel, on every configuration (1, 1, 2, 4 and 4
  cores) and where Vela picks the fast format or 2:4 sparse weights.

What makes Vela 5.2.0 pick the fast format (regor Scheduler::UseFastDecoder and
ChooseBestWeightFormat): only for convolutions (not depthwise, not MatMul: ArchEthosU85::
SupportedWeightFormat), when its decode cycles (32 weights per cycle, 64 with fewer than 16
distinct values) beat the standard format's (8 to 32 weights per cycle per core, by the zero
rate) once each is bounded below by the DMA of its bytes. Weights in the SRAM (Sram_Only) make
the transfer cheap, so the decode rate decides: the fast format wins on 1 or 2 cores; with
--optimise=Size it wins where it is smaller (about one byte per weight or less).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch
from ethosu import mlw_codec
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.errors import UserError
from toolkit.job import Job
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.vela import run_vela, vela_flags
from toolkit.pipeline import run_job
from toolkit.quantize.calibration import random_calibration
from toolkit.sim.errors import PayloadError
from toolkit.sim.families.u85_codec import decode_fast, decode_standard
from toolkit.sim.families.u85_weights import (
    decode_scales,
    decode_weights,
    stream_orders,
    weight_layout,
)
from toolkit.sim.payload import load_payload
from toolkit.targets import load_target

from .u85_reference import (
    NO_PALETTE,
    VELA_CHUNK,
    decoded_operations,
    expected_weights,
    match,
    pool_scales,
    transposed_rescale,
    vela_encode_fast,
    vela_encode_standard,
)

RNG = np.random.default_rng(7)
LOTS = 10**7


def _laplace(n: int, width: float) -> np.ndarray:
    return np.clip(np.round(RNG.laplace(0, width, n)), -255, 255).astype(np.int16)


# weight sets that take the encoders down their different paths
WEIGHTS = {
    "uniform int8": RNG.integers(-127, 128, 5000),
    "full 9-bit range": RNG.integers(-255, 256, 3000),
    "mostly zero (zero runs)": np.where(RNG.random(20000) < 0.8, 0, RNG.integers(-20, 21, 20000)),
    "three values (palette)": RNG.choice([-3, 0, 5], 3000),
    "two values": RNG.choice([0, 7], 999),
    "four values": RNG.choice([-1, 0, 1, 2], 1001),
    "sixteen values": RNG.integers(-8, 8, 777),
    "all zero": np.zeros(100, int),
    "one value": np.full(50, 9),
    "laplace": _laplace(40000, 6),
    # past 32768 weights a slice ends, past VELA_CHUNK a new palette starts
    "two chunks": _laplace(VELA_CHUNK + 5000, 3),
    "negative, offset (raw adjust +)": np.append(RNG.integers(-200, 40, 600), [-200, 39]),
    "positive, offset (raw adjust -)": np.append(RNG.integers(-30, 210, 600), [-30, 209]),
}


@pytest.mark.parametrize("name", WEIGHTS)
def test_standard_streams_of_vela_s_encoder_decode_exactly(name):
    weights = np.asarray(WEIGHTS[name], np.int16)
    stream = vela_encode_standard(weights)
    decoded = decode_standard(stream, name, LOTS)
    assert np.array_equal(decoded, weights)
    # Vela's own decoder reads the same values from the same bytes
    assert np.array_equal(np.asarray(mlw_codec.decode(bytearray(stream))), weights)


@pytest.mark.parametrize("name", [n for n in WEIGHTS if np.ptp(WEIGHTS[n]) < 256])
@pytest.mark.parametrize("flags", [0, NO_PALETTE], ids=["tables", "raw only"])
def test_fast_streams_of_vela_s_encoder_decode_exactly(name, flags):
    weights = np.asarray(WEIGHTS[name], np.int16)
    stream = vela_encode_fast(weights, flags)
    assert np.array_equal(decode_fast(stream, name, len(weights)), weights)


def test_the_fast_format_s_three_modes_are_all_exercised():
    modes = Counter()
    for weights in WEIGHTS.values():
        if np.ptp(weights) < 256:
            header = vela_encode_fast(np.asarray(weights, np.int16))[0]
            modes["raw" if header & 1 else "2-bit" if header & 2 else "4-bit"] += 1
    assert modes == {"raw": 6, "2-bit": 5, "4-bit": 1}
    # the raw mode's adjustment (byte 13) brings the weights into int8's range
    below = np.asarray(WEIGHTS["negative, offset (raw adjust +)"], np.int16)
    above = np.asarray(WEIGHTS["positive, offset (raw adjust -)"], np.int16)
    assert (below.min(), above.max()) == (-200, 209)
    assert vela_encode_fast(below)[13] == -128 + 200
    assert vela_encode_fast(above)[13] == (127 - 209) & 0xFF


# --- corrupt streams ----------------------------------------------------------------------------

GOOD = vela_encode_standard(np.asarray(WEIGHTS["laplace"][:3000], np.int16))


@pytest.mark.parametrize(
    ("stream", "limit", "message"),
    [
        (GOOD[:40], LOTS, r"ends inside \w+ \(\d+ bits wanted, \d+ left\) at bit \d+"),
        (b"", LOTS, r"the stream ends without an end-of-stream marker \(ZDIV 7\) at bit 0"),
        (bytes([0b100]), LOTS, r"ZDIV 4 is no zero-run divisor \(0-3, or 6: none\) at bit 0"),
        # ZDIV 6, SLICELEN 0, WDIV 6, a new palette of none
        (bytes([6, 0, 0x58, 0, 0]), LOTS, r"WDIV 6 is no weight divisor .* at bit 0 \(byte 0x0\)"),
        # ZDIV 6, SLICELEN 0, WDIV 0, no new palette
        (bytes([6, 0, 0, 0]), LOTS, r"a slice reuses a palette before any was defined at bit 0"),
        (GOOD, 2999, r"the stream holds more than the 2999 weights its operation needs at bit"),
    ],
    ids=["truncated", "empty", "bad ZDIV", "bad WDIV", "no palette", "too many weights"],
)
def test_a_corrupt_standard_stream_is_a_payload_error_naming_stream_and_bit(stream, limit, message):
    with pytest.raises(PayloadError, match=r"^WEIGHT1: corrupt weight stream: " + message):
        decode_standard(stream, "WEIGHT1", limit)


def test_a_corrupt_fast_stream_is_a_payload_error():
    stream = vela_encode_fast(np.arange(-50, 50, dtype=np.int16))
    with pytest.raises(PayloadError, match=r"^W: corrupt weight stream: 31 bytes, shorter than"):
        decode_fast(stream[:31], "W", 100)
    with pytest.raises(
        PayloadError, match=r"^W: .*body ends at bit 512 \(byte 0x40\) after 32 weights, .* 100$"
    ):
        decode_fast(stream[:64], "W", 100)
    both = bytes([stream[0] | 3]) + stream[1:]
    with pytest.raises(PayloadError, match=r"sets both raw mode and the two-bit table"):
        decode_fast(both, "W", 100)
    assert issubclass(PayloadError, UserError)  # one line, exit 2, no traceback


def test_damaged_streams_decode_or_fail_cleanly():
    """Flipped bits and cut streams: every one decodes (to something) or is a PayloadError;
    none crashes or loops (each is bounded by its length and the weights its operation needs)."""
    rng = np.random.default_rng(1)
    outcomes = Counter()
    for trial in range(200):
        damaged = bytearray(GOOD)
        for bit in rng.integers(0, len(GOOD) * 8, 1 + trial % 5):
            damaged[bit // 8] ^= 1 << (bit % 8)
        if trial % 3 == 0:
            damaged = damaged[: rng.integers(0, len(damaged))]
        try:
            values = decode_standard(bytes(damaged), "W", 3000)
        except PayloadError as error:
            assert re.match(
                r"^W: corrupt weight stream: .* at bit \d+ \(byte 0x[0-9a-f]+\)$", str(error)
            )
            outcomes["error"] += 1
        else:
            assert values.dtype == np.int16 and len(values) <= 3000
            assert np.abs(values.astype(int)).max(initial=0) <= 255
            outcomes["decoded"] += 1
    assert outcomes["error"] > 70 and outcomes["decoded"] > 10


# --- scale records ------------------------------------------------------------------------------


def test_scale_records_for_32_and_48_bit_accumulators():
    # EncodeBias32: bias int32, scale 31 bits, shift 6 bits; EncodeBias48: bias int48, scale
    # 15 bits: one record each, built as the encoder lays them out
    acc32 = (-5).to_bytes(4, "little", signed=True) + (0x7FFF_FFFF).to_bytes(4, "little")
    acc32 += bytes([45, 0])
    acc48 = (-(1 << 46)).to_bytes(6, "little", signed=True) + (0x7FFF).to_bytes(2, "little")
    acc48 += bytes([13, 0])
    records = decode_scales(acc32 * 2, 2, acc48=False)
    assert [r.tolist() for r in records] == [[-5, -5], [0x7FFF_FFFF] * 2, [45, 45]]
    records = decode_scales(acc48, 1, acc48=True)
    assert [r.tolist() for r in records] == [[-(1 << 46)], [0x7FFF], [13]]
    with pytest.raises(PayloadError, match=r"^S: 10 bytes, 2 channels need 20 \(10 per channel\)"):
        decode_scales(acc32, 2, acc48=False, name="S")


# --- layouts from registers ---------------------------------------------------------------------

CONV_REGISTERS = {
    "KERNEL_STRIDE": 0b10_0001_1111,  # stride 4x2 (y msb, x lsb, y lsb), part-kernel, dilation 2x2
    "ACC_FORMAT": 3 << 8 | 1,  # u-block 2x2, 48-bit accumulators
    "IFM_PRECISION": 1 << 2 | 1,  # int16
    "WEIGHT_FORMAT": 0x11,  # fast, 2:4 sparse
    "OFM_DEPTH_M1": 31,
    "KERNEL_HEIGHT_M1": 4,
    "KERNEL_WIDTH_M1": 6,
    "IFM_DEPTH_M1": 19,
    "OFM_BLK_DEPTH_M1": 15,
}


def test_an_operation_s_registers_give_its_weight_layout():
    layout = weight_layout(CONV_REGISTERS, "NPU_OP_CONV", "ethos-u85-512")
    assert layout.shape == (32, 3, 4, 20)  # the dilated 5x7 kernel is 3x4
    assert (layout.stride, layout.dilation, layout.traversal) == ((4, 2), (2, 2), "part_kernel")
    assert (layout.ofm_ublock_depth, layout.ifm_block_depth, layout.ofm_block_depth) == (16, 16, 16)
    assert (layout.fast, layout.sparse, layout.cores, layout.streams) == (True, True, 2, 1)
    # part-kernel-first, sparse: the u-block is the whole IFM block and sub-kernels round to 10
    assert (layout.ifm_ublock_depth, layout.subkernel_round) == (16, 10)
    standard = CONV_REGISTERS | {"WEIGHT_FORMAT": 0}
    depthwise = weight_layout(standard, "NPU_OP_DEPTHWISE", "ethos-u85-2048")
    assert (depthwise.shape, depthwise.depthwise_padding, depthwise.streams) == (
        (32, 3, 4, 1),
        6,
        4,
    )


def test_bad_registers_are_named():
    with pytest.raises(PayloadError, match=r"^NPU_OP_CONV runs before NPU_SET_ACC_FORMAT was set"):
        weight_layout({"KERNEL_STRIDE": 0}, "NPU_OP_CONV", "ethos-u85-256")
    bad_ublock = CONV_REGISTERS | {"ACC_FORMAT": 5 << 8}  # 4x4 exists on the 2048 only
    with pytest.raises(PayloadError, match=r"ACC_FORMAT 0x500 names a u-block ethos-u85-256 lacks"):
        weight_layout(bad_ublock, "NPU_OP_CONV", "ethos-u85-256")
    with pytest.raises(UserError, match=r"^'ethos-u55-128' is no Ethos-U85 configuration"):
        weight_layout(CONV_REGISTERS, "NPU_OP_CONV", "ethos-u55-128")


def test_a_stream_that_decodes_to_the_wrong_count_is_named():
    layout = weight_layout(CONV_REGISTERS | {"WEIGHT_FORMAT": 0}, "NPU_OP_CONV", "ethos-u85-512")
    (first, second) = stream_orders(layout)
    short = vela_encode_standard(np.zeros(len(first) - 1, np.int16))
    whole = vela_encode_standard(np.zeros(len(second), np.int16))
    with pytest.raises(PayloadError, match=rf"^WEIGHT: weight stream decodes to {len(first) - 1} "):
        decode_weights([("WEIGHT", short), ("WEIGHT1", whole)], layout)


# --- real programs ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ds_cnn(tmp_path_factory):
    """zoo:ds_cnn for ethos-u85-256, as test_u85_decode.py compiles it (one compile a session)."""
    out = tmp_path_factory.mktemp("ds_cnn-ethos-u85-256")
    job = Job(
        model="zoo:ds_cnn", target="corstone-320", npu="ethos-u85-256", eval_samples=1, out_dir=out
    )
    return run_job(job).variants["fused"].program


def _kinds(found) -> Counter:
    """Operations by (traversal, format, streams read, accumulator)."""
    return Counter(
        (
            d.layout.traversal,
            ("fast" if d.layout.fast else "standard") + (" 2:4" if d.layout.sparse else ""),
            d.layout.streams,
            48 if d.acc48 else 32,
        )
        for d, _, _ in found
    )


def test_ds_cnn_s_weights_and_scales_are_the_tosa_graph_s(ds_cnn):
    (delegate,) = ds_cnn.delegates
    decoded = list(decoded_operations(load_payload(delegate.payload)))
    found = match(decoded, expected_weights(delegate.tosa_path))
    # the 10x4 convolution (Vela's conversion of the depthwise one with 64 outputs per input
    # channel) runs in two OFM stripes, its weights 2:4 sparse (one IFM channel: 3 zeros in 4)
    assert [(name, first) for _, name, first in found[:2]] == [
        ("tosa_depthwise_conv2d_default", 0),
        ("tosa_depthwise_conv2d_default", 16),
    ]
    assert _kinds(found) == {
        ("part_kernel", "standard 2:4", 1, 32): 2,
        ("depthwise", "standard", 1, 32): 4,
        ("depth_first", "standard", 1, 32): 5,
    }


def _vela_again(program, tmp_path, accelerator, memory_mode, optimise):
    """Vela 5.2.0 compiles the program's TOSA graph again for another configuration."""
    (delegate,) = program.delegates
    npu = replace(program.npu, accelerator=accelerator, memory_mode=memory_mode)
    flags = vela_flags(npu, (f"--optimise={optimise}",))
    npz = run_vela(delegate.tosa_path, tmp_path / "vela", flags)
    decoded = list(decoded_operations(load_payload(npz)))
    return match(decoded, expected_weights(delegate.tosa_path))


# (configuration, memory mode, optimise) -> operations by kind: each case a different split of
# formats and streams; the weights in the SRAM make Vela pick the fast format for the 64x64
# pointwise convolutions, decoded by one core or interleaved for two or four
DS_CNN_CASES = {
    ("ethos-u85-128", "Sram_Only", "Performance"): {
        ("part_kernel", "standard 2:4", 1, 32): 1,
        ("depthwise", "standard", 1, 32): 4,
        ("depth_first", "fast", 1, 32): 5,
    },
    ("ethos-u85-512", "Sram_Only", "Performance"): {
        ("part_kernel", "standard 2:4", 2, 32): 1,
        ("depthwise", "standard", 2, 32): 4,
        ("depth_first", "fast", 1, 32): 4,
        ("depth_first", "standard", 2, 32): 1,
    },
    ("ethos-u85-1024", "Sram_Only", "Size"): {
        ("part_kernel", "standard", 4, 32): 1,
        ("depthwise", "standard", 4, 32): 4,
        ("depth_first", "fast", 1, 32): 4,
        ("depth_first", "standard", 4, 32): 1,
    },
    ("ethos-u85-2048", "Dedicated_Sram_384KB", "Performance"): {
        ("part_kernel", "standard 2:4", 4, 32): 1,
        ("depthwise", "standard", 4, 32): 4,
        ("depth_first", "standard", 4, 32): 5,
    },
}


@pytest.mark.parametrize("case", DS_CNN_CASES, ids=lambda c: "-".join(c))
def test_ds_cnn_compiled_again_decodes_exactly(ds_cnn, tmp_path, case):
    assert _kinds(_vela_again(ds_cnn, tmp_path, *case)) == DS_CNN_CASES[case]


# --- a net of many weight layouts, int8 and a16w8, on every configuration (slow) ---------------


def _prune_2_4(layer: nn.Module) -> None:
    """The two smallest of every four consecutive input channels' weights set to zero."""
    with torch.no_grad():
        weight = layer.weight.clone().reshape(layer.weight.shape[0], layer.weight.shape[1], -1)
        groups = weight.permute(0, 2, 1).reshape(weight.shape[0], weight.shape[2], -1, 4).clone()
        groups.scatter_(-1, groups.abs().argsort(dim=-1)[..., :2], 0.0)
        pruned = groups.reshape(weight.shape[0], weight.shape[2], -1).permute(0, 2, 1)
        layer.weight.copy_(pruned.reshape(layer.weight.shape))


class WeightLayouts(nn.Module):
    """Convolutions whose U85 weight streams differ in order and format: part-kernel-first
    (few IFM channels), strided, dilated 5x5, grouped (split into four), a 5x5 depthwise with
    stride 2 (padded groups of 10 elements), 200 IFM channels (IFM blocks walked forwards and
    backwards), a 9x1 kernel (two sub-kernels), a transposed convolution (four phases) and two
    fully connected layers (convolutions on U85). Three layers are pruned 2:4 along their input
    channels, so that Vela may store them as 2:4 sparse weights."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(
            [
                nn.Conv2d(3, 24, 3, stride=2, padding=1),
                nn.Conv2d(24, 40, 5, padding=4, dilation=2),
                nn.Conv2d(40, 40, 3, padding=1, groups=4),
                nn.Conv2d(40, 40, 5, stride=2, padding=2, groups=40),
                nn.Conv2d(40, 200, 1),
                nn.Conv2d(200, 72, 3, padding=1),
                nn.Conv2d(72, 16, (9, 1), padding=(4, 0)),
                nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1),
            ]
        )
        self.fc1 = nn.Linear(800, 100)
        self.fc2 = nn.Linear(100, 10)
        for pruned in (self.layers[4], self.layers[5], self.fc1):
            _prune_2_4(pruned)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


@pytest.fixture(scope="module")
def weight_layouts(tmp_path_factory):
    """The net compiled for ethos-u85-256 by the project, int8 and a16w8 (once each)."""
    torch.manual_seed(5)
    net = WeightLayouts().eval()
    example = (torch.randn(1, 3, 20, 20, generator=torch.Generator().manual_seed(0)),)
    loaded = LoadedModel("test:u85_weight_layouts", "u85_weight_layouts", net, example, "wl-2")
    calibration = random_calibration(example, 4, 0)
    npu = load_target("corstone-320").npu()
    out = tmp_path_factory.mktemp("u85_weight_layouts")
    return {
        quant: compile_variant(loaded, calibration, "fused", npu, out / quant, quant=quant)
        for quant in ("int8", "a16w8")
    }


CONFIGURATIONS = (
    "ethos-u85-128",
    "ethos-u85-256",
    "ethos-u85-512",
    "ethos-u85-1024",
    "ethos-u85-2048",
)
# what the sweep must meet, whatever Vela picks where: (traversal, format) and
# (cores, streams, fast)
LAYOUT_KINDS = {
    (traversal, weight_format + sparse)
    for traversal in ("part_kernel", "depth_first")
    for weight_format in ("standard", "fast")
    for sparse in ("", " 2:4")
} | {("depthwise", "standard")}
# (at a16w8 Vela picks the fast format on one-core configurations only)
STREAM_SPLITS = {
    "int8": {(1, 1, False), (2, 2, False), (4, 4, False), (1, 1, True), (2, 1, True)},
    "a16w8": {(1, 1, False), (2, 2, False), (4, 4, False), (1, 1, True)},
}


@pytest.mark.slow
@pytest.mark.parametrize("quant", ["int8", "a16w8"])
def test_many_layouts_decode_exactly_on_every_configuration(weight_layouts, tmp_path, quant):
    """The net compiled again for the five configurations, its weights in DRAM and in SRAM,
    for speed and for size: 20 programs, every operation's weights, bias and scales exact."""
    kinds: Counter = Counter()
    splits = set()
    for accelerator in CONFIGURATIONS:
        for mode in ("Dedicated_Sram_384KB", "Sram_Only"):
            for optimise in ("Performance", "Size"):
                out = tmp_path / f"{accelerator}-{mode}-{optimise}"
                found = _vela_again(weight_layouts[quant], out, accelerator, mode, optimise)
                # 16 convolutions: the grouped one in four, the transposed one in four phases
                assert len({(name, first) for _, name, first in found}) >= 16
                assert {d.acc48 for d, _, _ in found} == {quant == "a16w8"}
                assert any(d.layout.dilation == (2, 2) for d, _, _ in found)
                # the transposed convolution's output stage: a NullPool's per-channel records
                # (bias 0: the phases added it), TOSA's multipliers and shifts unreduced
                (pool,) = pool_scales(load_payload(next(out.glob("vela/*_vela.npz"))))
                multiplier, shift = transposed_rescale(weight_layouts[quant].delegates[0].tosa_path)
                assert pool.bias.tolist() == [0] * 8
                assert (pool.scale.tolist(), pool.shift.tolist()) == (
                    multiplier.tolist(),
                    shift.tolist(),
                )
                kinds.update(_kinds(found))
                splits |= {(d.layout.cores, d.layout.streams, d.layout.fast) for d, _, _ in found}
    assert LAYOUT_KINDS <= {(t, f) for t, f, _, _ in kinds}
    assert STREAM_SPLITS[quant] <= splits
