"""Ethos-U85 command streams decoded by our register map (toolkit/sim/families/ethos_u85/registers.py),
checked against a listing we did not write: Vela's own disassembly of the same stream
(`vela --verbose-register-command-stream`, its C++ core's isa::disassemble).

Each program is compiled once per module (fused and unfused, through run_job as `etk compare`
does); Vela then compiles each delegate's TOSA file again with the program's own flags and lists
the stream, and the test first checks that this stream is byte for byte the one in the program.
Then every command must agree: byte offset, name, opcode and payload mode, 16-bit parameter and
payload word; and every operation's registers (our operation_registers) must equal the register
state replayed from Vela's listing.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from toolkit.artifacts import Program
from toolkit.job import Job
from toolkit.lower.npu_ops import KERNEL_OPERATIONS, command_stream_operations
from toolkit.lower.vela_check import program_problems
from toolkit.pipeline import run_job
from toolkit.sim.commands import PARAM, SYNC_OPERATIONS, register_name
from toolkit.sim.diff import diff_programs
from toolkit.sim.errors import PayloadError
from toolkit.sim.families import commands, decodes, family_of, family_of_product, simulates
from toolkit.sim.families.ethos_u85 import cmd0, cmd1
from toolkit.sim.payload import DriverConfig, load_payload

# Vela's listing: "0x000004: 00000000 0000 4030 - NPU_SET_DMA0_SRC   0, addr = 0x0": offset,
# payload word (blank for one-word commands), parameter, the word's low half (control bits and
# opcode), name, parameter again, decoded fields
_LISTING = re.compile(
    r"^0x([0-9a-f]+): (?:([0-9a-f]{8})| {8}) ([0-9a-f]{4}) ([0-9a-f]{4}) - (\w+) +(\d+)"
)
_WORDS = re.compile(r"^Register command stream: (\d+) words$")


class Listed(NamedTuple):
    """One command as Vela's disassembly prints it."""

    offset: int
    name: str
    param: int
    code: int  # bits 0-15 of the first word: opcode and payload mode
    payload: int | None


def vela_listing(model: Path, flags: tuple[str, ...], out: Path) -> list[Listed]:
    """Vela's disassembly of the stream it compiles from `model` (TOSA or .tflite) with `flags`
    into `out`. Vela prints from C++, so it runs in a child."""
    args = [*flags, "--verbose-register-command-stream", f"--output-dir={out}", str(model)]
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from ethosu.vela.vela import main; sys.exit(main())"]
        + args,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    listed, words = [], None
    for line in run.stdout.splitlines():
        if (match := _WORDS.match(line)) is not None:
            assert words is None, "one NPU program, one listing"
            words = int(match[1])
        elif (match := _LISTING.match(line)) is not None:
            offset, payload, param, code, name, param_again = match.groups()
            assert int(param, 16) == int(param_again)
            listed.append(
                Listed(
                    int(offset, 16),
                    name,
                    int(param, 16),
                    int(code, 16),
                    None if payload is None else int(payload, 16),
                )
            )
    last = listed[-1]
    assert words == last.offset // 4 + (1 if last.payload is None else 2)
    return listed


def assert_decoded_as_listed(stream: bytes, accelerator: str, listed: list[Listed]) -> None:
    """Our decoding of `stream` is Vela's listing, command by command and operation by
    operation (the registers each runs with)."""
    table = {c.name: (0, c.value) for c in cmd0} | {c.name: (1, c.value) for c in cmd1}
    decoded = commands(accelerator).decode(stream)
    assert [(c.offset, c.name, c.param, c.data) for c in decoded] == [
        (v.offset, v.name, v.param, v.payload) for v in listed
    ]
    # the opcode and payload mode of each name are Vela's (low half of the word)
    for line in listed:
        mode, opcode = table[line.name]
        assert line.code == mode << 14 | opcode, line
    skip = SYNC_OPERATIONS | {"NPU_OP_STOP"}
    ours_ops = commands(accelerator).operation_registers(stream, skip)
    assert [(c.offset, c.name, c.param, v) for c, v in ours_ops] == [
        (line.offset, line.name, line.param, v) for line, v in replayed(listed, skip)
    ]


def replayed(listed: list[Listed], skip: frozenset[str]) -> list[tuple[Listed, dict | None]]:
    """Each operation of Vela's listing with the register state its NPU_SET_* lines left."""
    values: dict[str, int] = {}
    operations: list[tuple[Listed, dict | None]] = []
    for line in listed:
        if line.name.startswith("NPU_OP_"):
            operations.append((line, None if line.name in skip else dict(values)))
        elif line.payload is None:
            values[register_name(line.name)] = line.param
        else:
            values[register_name(line.name)] = line.payload
            values[register_name(line.name) + PARAM] = line.param
    return operations


def compare_with_vela(program: Program, out: Path) -> Counter[str]:
    """Assert every delegate decodes as Vela lists it; the commands compared, by name."""
    accelerator = program.npu.accelerator
    compared: Counter[str] = Counter()
    for delegate in program.delegates:
        assert delegate.tosa_path is not None
        folder = out / f"d{delegate.index}"
        listed = vela_listing(delegate.tosa_path, program.vela_flags, folder)
        ours = load_payload(delegate.payload)
        # Vela listed the program's own stream: it compiles the same TOSA file to the same bytes
        assert (
            ours.command_stream
            == load_payload(folder / f"{delegate.tosa_path.stem}_vela.npz").command_stream
        )
        assert ours.config is not None and ours.config.accelerator == accelerator
        assert_decoded_as_listed(ours.command_stream, accelerator, listed)
        compared.update(line.name for line in listed)
    return compared


# (model, configuration): zoo nets across the five U85 configurations (1, 1, 2, 4, 4 cores);
# the larger nets (about a minute each on a loaded machine) in the slow run
CASES = (
    ("zoo:ds_cnn", "ethos-u85-256"),
    ("zoo:depthwise_relu6", "ethos-u85-128"),
    ("zoo:linear_relu", "ethos-u85-2048"),
    pytest.param("zoo:conv2d_bn_relu", "ethos-u85-512", marks=pytest.mark.slow),
    pytest.param("zoo:conv2d_bn_relu6", "ethos-u85-1024", marks=pytest.mark.slow),
    pytest.param("zoo:resnet8", "ethos-u85-128", marks=pytest.mark.slow),
    pytest.param("zoo:mobilenet_v1_025", "ethos-u85-512", marks=pytest.mark.slow),
    pytest.param("zoo:mobilenet_v1_025", "ethos-u85-2048", marks=pytest.mark.slow),
    # nets of the collection (tests/collection) with U85's NPU_OP_RESIZE (nearest and bilinear
    # upsampling), a transposed convolution and a transformer block (MATMUL, softmax)
    pytest.param("upsample_net", "ethos-u85-256", marks=pytest.mark.slow),
    pytest.param("tiny_unet", "ethos-u85-256", marks=pytest.mark.slow),
    pytest.param("conv_transpose_decoder", "ethos-u85-256", marks=pytest.mark.slow),
    pytest.param("keyword_transformer_block", "ethos-u85-256", marks=pytest.mark.slow),
)
COLLECTION = Path(__file__).parents[1] / "collection"
NETS = tomllib.loads((COLLECTION / "nets.toml").read_text())


@pytest.fixture(scope="module")
def u85_programs(tmp_path_factory):
    """(model, configuration) -> {variant: Program}, each compiled once for the module."""
    cache: dict[tuple[str, str], dict[str, Program]] = {}

    def build(model: str, accelerator: str) -> dict[str, Program]:
        if (model, accelerator) not in cache:
            out = tmp_path_factory.mktemp(f"{model.replace(':', '_')}-{accelerator}")
            spec, shape = (model, None) if model.startswith("zoo:") else NETS[model]
            job = Job(
                model=spec if shape is None else str(COLLECTION / spec),
                input_shape=shape,
                target="corstone-320",
                npu=accelerator,
                eval_samples=1,
                out_dir=out,
            )
            result = run_job(job)
            cache[(model, accelerator)] = {n: v.program for n, v in result.variants.items()}
        return cache[(model, accelerator)]

    return build


@pytest.mark.parametrize(("model", "accelerator"), CASES)
def test_u85_streams_decode_as_vela_disassembles_them(u85_programs, tmp_path, model, accelerator):
    compared: Counter[str] = Counter()
    for variant, program in u85_programs(model, accelerator).items():
        assert program.npu.accelerator == accelerator
        listed = compare_with_vela(program, tmp_path / variant)
        # the reported NPU operations are the stream's computing ones, RESIZE included
        assert program.npu_ops == sum(listed[name] for name in KERNEL_OPERATIONS)
        compared += listed
        # the register checks find nothing wrong in these programs (none pads past its kernel)
        assert program_problems(program) == ()
    # what was compared: convolutions and their weight streams, one per core
    assert compared["NPU_OP_CONV"] + compared["NPU_OP_DEPTHWISE"] > 0
    assert compared["NPU_SET_WEIGHT_BASE"] > 0
    cores = {"ethos-u85-512": 2, "ethos-u85-1024": 4, "ethos-u85-2048": 4}.get(accelerator, 1)
    weight_streams = {"NPU_SET_WEIGHT1_BASE", "NPU_SET_WEIGHT2_BASE", "NPU_SET_WEIGHT3_BASE"}
    assert {name for name in weight_streams if compared[name]} == set(
        sorted(weight_streams)[: cores - 1]
    )


def test_u85_operation_counts_and_fused_unfused_register_differences(u85_programs):
    from toolkit.evaluation.variants import compare_variants

    programs = u85_programs("zoo:ds_cnn", "ethos-u85-256")
    fused, unfused = programs["fused"], programs["unfused"]
    # Vela's 11 scheduled operations (the 10x4 convolution, 4 depthwise and 4 pointwise ones,
    # the average pool, the classifier): the 10x4 convolution runs as two NPU_OP_CONV stripes
    ops = {
        "NPU_OP_CONV": 7,
        "NPU_OP_DEPTHWISE": 4,
        "NPU_OP_DMA_START": 11,
        "NPU_OP_DMA_WAIT": 11,
        "NPU_OP_KERNEL_WAIT": 7,
        "NPU_OP_POOL": 1,
        "NPU_OP_STOP": 1,
    }
    for program in (fused, unfused):
        (delegate,) = program.delegates
        assert delegate.command_ops == command_stream_operations(delegate.payload, program.npu)
        assert delegate.command_ops == ops
        assert program.npu_ops == 12  # conv, depthwise, pool, elementwise
    comparison = compare_variants(fused, unfused)
    assert comparison.same_npu_operations
    # per register, the aligned operations (DMA starts included) whose value differs
    # kernel operations only: a DMA's differences are its DMA0_* registers (sim/diff.py)
    differences = dict(comparison.register_differences)
    # Vela drops a scale's trailing zero bits into a smaller shift, so which pairs differ in their
    # shift too follows the last float32 bits of the calibrated scales, and those follow the
    # host's float kernels (7 pairs on an AVX-512 host, 8 on an AVX2 one, at Vela 5.2.0)
    shifts = differences.pop("OFM_SCALE.param")
    assert 0 < shifts <= differences["OFM_SCALE"]
    assert differences == {
        "ACTIVATION_MIN": 10,
        "IFM_ZERO_POINT": 9,
        "OFM_SCALE": 11,
        "OFM_ZERO_POINT": 10,
    }


def test_etk_diff_reads_two_u85_programs(u85_programs, capsys):
    from toolkit.cli import main

    programs = u85_programs("zoo:ds_cnn", "ethos-u85-256")
    fused, unfused = programs["fused"], programs["unfused"]
    rows = diff_programs(
        load_payload(fused.delegates[0].payload), load_payload(unfused.delegates[0].payload)
    )
    assert len(rows) == 23 and all(r.a is not None and r.b is not None for r in rows)
    # the fused variant's ReLU is the output stage's saturation at zero point -128; the unfused
    # one clips at its own zero point (the CLAMP Vela folded in)
    clipped = [
        dict((n, (a, b)) for n, a, b in r.changed) for r in rows if r.a.name != "NPU_OP_DMA_START"
    ]
    relu = [c for c in clipped if "ACTIVATION_MIN" in c]
    assert len(relu) == 10
    for c in relu:
        assert c["ACTIVATION_MIN"][0] == c["OFM_ZERO_POINT"][0] == 0xFF80
        assert c["ACTIVATION_MIN"][1] == c["OFM_ZERO_POINT"][1] != 0xFF80
    assert main(["diff", str(fused.out_dir), str(unfused.out_dir)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "23 operations: 12 same, 11 differ in registers, 0 only in A, 0 only in B"
    )


def test_u85_unfused_conv_relu_issues_its_convolution_twice(u85_programs):
    """Vela 5.1.0 and 5.2.0 on ethos-u85-256: the unfused Conv2D (sub-operations Transpose, Clamp) is
    issued twice, two NPU_OP_CONV with no register written between them; the fused one once.
    The report's note names the kind that differs."""
    from toolkit.evaluation.variants import compare_variants

    programs = u85_programs("zoo:conv2d_relu", "ethos-u85-256")
    fused, unfused = programs["fused"], programs["unfused"]
    assert compare_variants(fused, unfused).notes[0] == (
        "The variants differ in NPU operations: fused 2, unfused 3 (CONV 1 vs 2)."
    )
    ops = [
        (c.offset, c.name, v)
        for c, v in commands("ethos-u85-256").operation_registers(
            load_payload(unfused.delegates[0].payload).command_stream
        )
        if c.name == "NPU_OP_CONV"
    ]
    (first, a, registers_a), (second, b, registers_b) = ops
    assert second == first + 4 and registers_a == registers_b


def test_a_batched_pointwise_conv_with_a_clamp_on_u85(tmp_path):
    """A batched 1x1 convolution reading a CLAMP (16 tokens, test_batched_conv.py on U55): Vela
    5.1.0 emitted its wrong stream (IFM 4x1, IFM_PAD_BOTTOM 12) for Ethos-U85 as well; Vela
    5.2.0 compiles it right with the CLAMP as a POOL, and the rewrite batched-1x1-conv-as-image
    saves that operation there too (estimate 4,121 -> 2,857 NPU cycles)."""
    import torch
    from torch import nn

    from toolkit.artifacts import LoadedModel
    from toolkit.lower.build_variant import compile_variant
    from toolkit.quantize.calibration import random_calibration
    from toolkit.rewrites import DEFAULT_REWRITES
    from toolkit.targets import load_target

    torch.manual_seed(3)
    mlp = nn.Sequential(nn.Linear(32, 48), nn.ReLU(), nn.Linear(48, 6)).eval()
    example = (torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(0)),)
    loaded = LoadedModel("test:token_mlp", "token_mlp", mlp, example, "token_mlp")
    calibration = random_calibration(example, 4, 0)
    npu = load_target("corstone-320").npu()
    assert npu.accelerator == "ethos-u85-256"
    programs = {
        name: compile_variant(loaded, calibration, "unfused", npu, tmp_path / name, rewrites=r)
        for name, r in (("default", DEFAULT_REWRITES), ("none", ()))
    }
    for program in programs.values():
        assert program_problems(program) == ()
    kinds = [programs[n].delegates[0].command_ops for n in ("default", "none")]
    assert [k["NPU_OP_CONV"] for k in kinds] == [2, 2]
    assert [k.get("NPU_OP_POOL", 0) for k in kinds] == [0, 1]
    estimates = [programs[n].delegates[0].estimate.npu_cycles for n in ("default", "none")]
    assert estimates == [2_857, 4_121]  # as a 16x1 column: 2,921


def test_a_vela_compiled_u85_tflite_is_read_as_u85(tmp_path):
    """A .tflite Vela compiled for ethos-u85-256 names its NPU by product id 2: etk reads it as
    U85 (it used to fall back to U55's map and stop on cmd0 302, WEIGHT_FORMAT)."""
    from toolkit.lower.compiled_tflite import load_compiled_program
    from toolkit.npu import npu_config
    from toolkit.sim.vela_tflite import load_compiled_tflite

    source = Path(__file__).parents[1] / "fixtures" / "kws_ref_model.tflite"
    npu = npu_config("ethos-u85-256")
    listed = vela_listing(source, npu.vela_flags, tmp_path / "vela")
    compiled = tmp_path / "vela" / "kws_ref_model_vela.tflite"
    (stream,) = [p.command_stream for p in load_compiled_tflite(compiled).npu_programs]
    assert_decoded_as_listed(stream, "ethos-u85-256", listed)
    program = load_compiled_program(compiled, npu_config("ethos-u55-128"), tmp_path / "out")
    assert program.npu.accelerator == "ethos-u85-256"
    (delegate,) = program.delegates
    assert delegate.command_ops == dict(
        sorted(Counter(v.name for v in listed if v.name.startswith("NPU_OP_")).items())
    )
    assert delegate.command_ops["NPU_OP_ELEMENTWISE"] == 25


# --- hand-made words ---------------------------------------------------------------------------


def _stream(*words: int) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


def test_u85_is_decoded_and_simulated():
    assert decodes("ethos-u85-128") and decodes("ethos-u85-2048")
    assert simulates("ethos-u85-256")  # issue 47: the simulator executes U85 streams
    assert family_of_product(2) == "ethos-u85"
    # the config word of ds_cnn's COP1 header on ethos-u85-256 (Vela 5.1.0): macs_per_cc 8,
    # cmd_stream_version 1, num_axi_sram 1 (bits 8-9), product 2 (bits 28-31)
    config = DriverConfig(0x20000118 & 0xF, (0x20000118 >> 8) & 0xFF, 0x20000118 >> 28)
    assert config.accelerator == "ethos-u85-256"


def test_u85_opcodes_that_mean_something_else_on_u55():
    # cmd1 146: U85's third weight stream, U55/U65's second scale stream
    words = _stream(146 | 1 << 14 | 0x00 << 16, 0x1234, 37 | 1 << 14 | 7 << 16, 0x4000_0000)
    u85 = commands("ethos-u85-256").decode(words)
    u55 = commands("ethos-u65-512").decode(words)
    assert [(c.name, c.param, c.data) for c in u85] == [
        ("NPU_SET_WEIGHT2_BASE", 0, 0x1234),
        ("NPU_SET_IFM_SCALE", 7, 0x4000_0000),
    ]
    assert [c.name for c in u55] == ["NPU_SET_SCALE1_BASE", "NPU_SET_OPA_SCALE"]
    # cmd0 301: U85's RESIZE_Y_OFFSET, U55's AB_START; cmd0 7 is U85's NPU_OP_RESIZE
    (offset, resize) = commands("ethos-u85-256").decode(_stream(301 | 3 << 16, 7))
    assert (offset.name, offset.param, resize.name, resize.is_operation) == (
        "NPU_SET_RESIZE_Y_OFFSET",
        3,
        "NPU_OP_RESIZE",
        True,
    )
    # U55's PARALLEL_MODE (cmd0 291) is no U85 command
    with pytest.raises(PayloadError, match=r"^unknown opcode 0x123 \(cmd0, word 0x00010123\) at"):
        commands("ethos-u85-256").decode(_stream(291 | 1 << 16))


def test_u85_branch_is_an_operation_with_a_payload_word():
    # NPU_OP_BRANCH (cmd1 256), branch_cond 1 in the parameter, target byte offset 0x40
    stream = _stream(
        cmd0.NPU_SET_IFM_PAD_TOP.value | 2 << 16,
        cmd1.NPU_OP_BRANCH.value | 1 << 14 | 1 << 16,
        0x40,
        cmd0.NPU_OP_CONV.value,
    )
    decoded = commands("ethos-u85-256").decode(stream)
    assert [(c.offset, c.name, c.value, c.is_operation) for c in decoded] == [
        (0, "NPU_SET_IFM_PAD_TOP", 2, False),
        (4, "NPU_OP_BRANCH", 0x40, True),
        (12, "NPU_OP_CONV", 0, True),
    ]
    ops = commands("ethos-u85-256").operation_registers(stream)
    assert [(c.name, c.param, c.data, v) for c, v in ops] == [
        ("NPU_OP_BRANCH", 1, 0x40, {"IFM_PAD_TOP": 2}),
        ("NPU_OP_CONV", 0, None, {"IFM_PAD_TOP": 2}),
    ]
    with pytest.raises(PayloadError, match="NPU_OP_BRANCH at command-stream offset 0x0 lacks"):
        commands("ethos-u85-256").operation_registers(_stream(cmd1.NPU_OP_BRANCH.value | 1 << 14))


def test_the_listing_parser_reads_vela_s_lines():
    lines = [
        "// Conv2D , subOps:[  - ], size=4,10 stride=2,2",
        "0x000024:          0000 0010 - NPU_OP_DMA_START                   0",
        "0x000028: 2dc8c09f 2026 4024 - NPU_SET_OFM_SCALE               8230, shift = 38",
        "0x000130:          ff80 0126 - NPU_SET_ACTIVATION_MIN         65408, clip_boundary = 65408",
    ]
    parsed = [m.groups() for line in lines if (m := _LISTING.match(line))]
    assert parsed == [
        ("000024", None, "0000", "0010", "NPU_OP_DMA_START", "0"),
        ("000028", "2dc8c09f", "2026", "4024", "NPU_SET_OFM_SCALE", "8230"),
        ("000130", None, "ff80", "0126", "NPU_SET_ACTIVATION_MIN", "65408"),
    ]


def test_the_padded_window_check_reads_u85_registers():
    """vela_check's padded-window check reads KERNEL_*, IFM_PAD_*, IFM_UPSCALE and OFM_*_M1,
    whose U85 fields are laid out as on U55 (ethos_u85_interface.hpp): a 1x1 convolution
    padded by one row computes its first output row from padding alone, on U85 too."""
    from toolkit.lower.vela_check import padded_windows
    from toolkit.sim.registers import Registers

    def conv(pad_top: int, upscale: int) -> str | None:
        stream = _stream(
            cmd0.NPU_SET_KERNEL_STRIDE.value,
            cmd0.NPU_SET_KERNEL_HEIGHT_M1.value,
            cmd0.NPU_SET_KERNEL_WIDTH_M1.value,
            cmd0.NPU_SET_IFM_PAD_TOP.value | pad_top << 16,
            cmd0.NPU_SET_IFM_UPSCALE.value | upscale << 16,
            cmd0.NPU_SET_OFM_HEIGHT_M1.value | 3 << 16,
            cmd0.NPU_SET_OFM_WIDTH_M1.value | 3 << 16,
            cmd1.NPU_SET_IFM_STRIDE_Y.value | 1 << 14,
            64,
            cmd0.NPU_OP_CONV.value,
        )
        ((op, values),) = commands("ethos-u85-256").operation_registers(stream)
        assert values is not None
        return padded_windows(Registers(values, op), family_of("ethos-u85-256"))

    assert conv(pad_top=1, upscale=0) == (
        "reads an IFM of 3x4 with IFM_PAD_TOP 1 for a 1x1 kernel into an OFM of 4x4 "
        "(IFM_STRIDE_Y 64): whole output rows or columns from padding alone"
    )
    assert conv(pad_top=0, upscale=0) is None
    assert conv(pad_top=1, upscale=2) is None  # U85's IFM_UPSCALE ZEROS: a transposed conv
