"""An attention's `q @ k` after the qkv permute and split (2 heads of 16x16) on Vela 5.2.0, as on
5.1.0: the batched MATMUL reads q as a SLICE of the permuted tensor, and Vela gives every head's
MULs head 0's queries; after a channel split (`chunk(3, -1)`), its MULs read all 48 channels of
q, k and v. Vela 5.2.0 moved the offsets and ops (899 -> 901, 868 -> 870: it rescales x twice for
`x + x`), not the bug.
etk names the wrong operation at compile time (lower/vela_check.py) and avoids it with the
rewrite copy-sliced-matmul-input (rewrites/sliced_matmul.py). Judge: the TOSA reference model.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import struct

import numpy as np
import pytest
import torch
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.cli import main
from toolkit.lower import vela_check
from toolkit.lower.build_variant import compile_variant
from toolkit.lower.tosa_graph import read_tosa
from toolkit.lower.vela_check import program_problems
from toolkit.npu import npu_config
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrites import DEFAULT_REWRITES
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.sim.commands import Command
from toolkit.sim.families.ethos_u55.registers import COMMANDS
from toolkit.sim.payload import load_payload

TOKENS, HEADS, HEAD_DIM = 16, 2, 16
WITHOUT = tuple(r for r in DEFAULT_REWRITES if r != "copy-sliced-matmul-input")


class QueryKey(nn.Module):
    """(x + x) split into q, k, v of 2 heads of 16x16, then q @ k (the smallest case found)."""

    def forward(self, x):
        q, k, _ = (x + x).reshape(1, 16, 3, 2, 16).permute(2, 0, 3, 1, 4)
        return q @ k


def query_key() -> nn.Module:
    return QueryKey().eval()


class ChannelQueryKey(nn.Module):
    """One head: q, k and v split from the channels, then q @ k^T."""

    def forward(self, x):
        q, k, _ = (x + x).chunk(3, dim=-1)
        return q @ k.transpose(-2, -1)


def _compile(variant: str, accelerator: str, rewrites, out):
    example = (
        torch.randn(1, TOKENS, 3 * HEADS * HEAD_DIM, generator=torch.Generator().manual_seed(0)),
    )
    loaded = LoadedModel("test:query_key", "query_key", query_key(), example, "query_key")
    calibration = random_calibration(example, 4, 0)
    return compile_variant(
        loaded, calibration, variant, npu_config(accelerator), out, rewrites=rewrites
    )


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """(rewrites, variant, NPU) -> the program, compiled once each."""
    out = tmp_path_factory.mktemp("sliced_matmul")
    cases = {
        ("without", "unfused", "ethos-u55-128"): WITHOUT,
        ("default", "unfused", "ethos-u55-128"): DEFAULT_REWRITES,
        ("default", "fused", "ethos-u65-256"): DEFAULT_REWRITES,
    }
    return {
        case: _compile(case[1], case[2], rewrites, out / "-".join(case))
        for case, rewrites in cases.items()
    }


def _samples(count: int = 3) -> list[np.ndarray]:
    shape = (1, TOKENS, 3 * HEADS * HEAD_DIM)
    return [
        torch.randn(*shape, generator=torch.Generator().manual_seed(10 + s)).numpy()
        for s in range(count)
    ]


def _differing_per_head(program, sample) -> list[int]:
    ours = SimulatorRunner().run(program, [sample]).outputs[0]
    wanted = TosaReferenceRunner().run(program, [sample]).outputs[0]
    assert ours.shape == (1, HEADS, TOKENS, TOKENS)
    return [int(np.count_nonzero(ours[0, h] != wanted[0, h])) for h in range(HEADS)]


def test_without_the_rewrite_every_head_reads_head_0s_queries_and_etk_says_so(programs):
    program = programs[("without", "unfused", "ethos-u55-128")]
    (problem,) = program_problems(program)
    assert (problem.delegate, problem.offset, problem.operation) == (0, 0x5894, "elementwise MUL")
    assert problem.describe() == (
        "delegate 0: elementwise MUL at command-stream offset 0x5894 reads the MATMUL's first "
        "operand at IFM_BASE0 0 (region 1) for batch 1 of 2, as batch 0's MUL at 0x4894 does; the "
        "TOSA MATMUL 'tosa_matmul_default' multiplies batch 1 of 'tosa_reshape_default_1' "
        "(2x16x16, a SLICE of 'tosa_transpose_default' (3x1x2x16x16)) by batch 1 of "
        "'tosa_reshape_default_2' (2x16x16): this program computes wrong results on the NPU"
    )
    # what the registers say is what runs: head 0 right, head 1 computed from head 0's queries
    for sample in _samples(2):
        head0, head1 = _differing_per_head(program, sample)
        assert head0 == 0 and head1 > 200


def _batch1_reading(program, rows_at: int):
    """The program with batch 1's MULs reading A at `rows_at` instead of batch 0's address."""
    delegate = program.delegates[0]
    payload = bytearray(delegate.payload)
    stream = load_payload(delegate.payload).command_stream
    start = payload.find(stream)
    (problem,) = program_problems(program)
    base_write, patched = None, 0
    for command in COMMANDS.decode(stream):
        if command.name == "NPU_SET_IFM_BASE0":
            base_write = command
        # batch 1's 16 MULs (one per column of k), from the one the check names on
        elif command.name == "NPU_OP_ELEMENTWISE" and command.offset >= problem.offset:
            assert base_write is not None and base_write.data == 0
            struct.pack_into("<I", payload, start + base_write.offset + 4, rows_at)
            patched += 1
    assert patched == TOKENS
    delegates = (dataclasses.replace(delegate, payload=bytes(payload)),)
    return dataclasses.replace(program, delegates=delegates)


def test_only_batch_1s_first_operand_address_is_wrong(programs):
    """Pointing batch 1's MULs at head 1's queries (256 bytes on: IFM_STRIDE_Y) and changing
    nothing else gives the TOSA reference model's values: the address is the whole bug."""
    program = programs[("without", "unfused", "ethos-u55-128")]
    patched = _batch1_reading(program, HEAD_DIM * TOKENS)
    for sample in _samples(2):
        assert _differing_per_head(patched, sample) == [0, 0]


@pytest.mark.parametrize(
    "case", [("default", "unfused", "ethos-u55-128"), ("default", "fused", "ethos-u65-256")]
)
def test_the_rewrite_copies_the_queries_and_is_bit_exact(programs, case):
    program = programs[case]
    assert program_problems(program) == ()
    (record,) = [r for r in program.rewrites if r.rewrite == "copy-sliced-matmul-input"]
    assert record.change.startswith("first operand of a matmul over 2 batch(es) of 16x16, a slice")
    tosa = read_tosa(program.delegates[0].tosa_path)
    (matmul,) = [o for o in tosa.operators if o.op == "MATMUL"]
    clamp = tosa.producer(matmul.inputs[0])
    assert clamp is not None and clamp.op == "CLAMP" and clamp.clamp == (-128, 127)
    without = programs[("without", "unfused", "ethos-u55-128")]
    for sample in _samples():
        assert _differing_per_head(program, sample) == [0, 0]
        # the values the graph without the copy asks for, too (the clamp is the identity)
        ours = SimulatorRunner().run(program, [sample]).outputs[0]
        assert np.array_equal(ours, TosaReferenceRunner().run(without, [sample]).outputs[0])


def test_the_rewrite_runs_fewer_npu_operations(programs):
    """Vela runs the copied MATMUL with both heads as rows (16 MUL + POOL pairs instead of 32)
    and the copy as one operation."""
    without = programs[("without", "unfused", "ethos-u55-128")]
    rewritten = programs[("default", "unfused", "ethos-u55-128")]
    assert (without.npu_ops, rewritten.npu_ops) == (901, 870)


def test_etk_compile_exits_1_naming_the_wrong_program(tmp_path, capsys):
    model = tmp_path / "query_key.py"
    # the model file holds this module's net, self-contained (an installed etk imports it alone)
    source = inspect.getsource(QueryKey) + "\n\n" + inspect.getsource(query_key)
    model.write_text("import torch\nfrom torch import nn\n\n\n" + source, encoding="utf-8")
    shape = f"1,{TOKENS},{3 * HEADS * HEAD_DIM}"
    out = tmp_path / "out"
    status = main(
        ["compile", f"{model}:query_key", "--input-shape", shape, "--fusion", "off"]
        + ["--rewrites", "none", "-o", str(out)]
    )
    printed = " ".join(capsys.readouterr().out.split())
    assert status == 1
    assert "WARNING unfused: delegate 0: elementwise MUL at command-stream offset" in printed
    assert printed.endswith(
        "etk: Vela compiled unfused into a program that computes wrong results on the NPU "
        "(WARNING above); the rewrite copy-sliced-matmul-input (in --rewrites default) avoids "
        "the known case"
    )
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["variants"]["unfused"]["vela_problems"]
    assert entry["operation"] == "elementwise MUL"
    assert entry["tosa"].startswith("the TOSA MATMUL 'tosa_matmul_default' multiplies batch 1")


@pytest.fixture(scope="module")
def channel_split(tmp_path_factory):
    """rewrites -> the unfused ChannelQueryKey program on ethos-u55-128."""
    out = tmp_path_factory.mktemp("channel_split")
    example = (torch.randn(1, TOKENS, 3 * HEAD_DIM, generator=torch.Generator().manual_seed(0)),)
    loaded = LoadedModel("test:channel_qk", "channel_qk", ChannelQueryKey().eval(), example, "cqk")
    calibration = random_calibration(example, 4, 0)
    npu = npu_config("ethos-u55-128")
    return {
        name: compile_variant(loaded, calibration, "unfused", npu, out / name, rewrites=rewrites)
        for name, rewrites in (("without", WITHOUT), ("default", DEFAULT_REWRITES))
    }


def test_a_channel_slice_is_read_whole_and_the_rewrite_avoids_it(channel_split):
    (problem,) = program_problems(channel_split["without"])
    assert problem.describe() == (
        "delegate 0: elementwise MUL at command-stream offset 0x4bc reads the MATMUL's first "
        "operand with IFM depth 48 (IFM_BASE0 3072, region 1), where the operand has 16 channels; "
        "the TOSA MATMUL 'tosa_matmul_default' multiplies 'tosa_slice_default' (1x16x16, a SLICE "
        "of 'tosa_rescale_default_1' (1x16x48)) by 'tosa_slice_default_1' (1x16x16): this "
        "program computes wrong results on the NPU"
    )
    assert program_problems(channel_split["default"]) == ()
    sim, reference = SimulatorRunner(), TosaReferenceRunner()
    for s in range(2):
        sample = [
            torch.randn(1, TOKENS, 3 * HEAD_DIM, generator=torch.Generator().manual_seed(s)).numpy()
        ]
        wanted = reference.run(channel_split["without"], sample).outputs[0]
        assert (
            np.count_nonzero(sim.run(channel_split["without"], sample).outputs[0] != wanted) > 200
        )
        assert np.array_equal(sim.run(channel_split["default"], sample).outputs[0], wanted)


def _column_pair(offset: int, a_base: int, b_base: int, out: int, broadcast: int = 2):
    """A MATMUL column as Vela emits it one batch at a time: MUL of A's 16x16 rows (IFM height 1)
    by B's column, then the REDUCE_SUM of its int32 product into one output column."""
    mul = {
        "IFM_REGION": 1,
        "IFM_BASE0": a_base,
        "IFM_HEIGHT0_M1": 0,
        "IFM_WIDTH0_M1": 15,
        "IFM_DEPTH_M1": 15,
        "IFM2_BASE0": b_base,
        "IFM2_BROADCAST": broadcast,
        "OFM_REGION": 1,
        "OFM_BASE0": 4096,
    }
    pool = {"IFM_REGION": 1, "IFM_BASE0": 4096, "OFM_REGION": 1, "OFM_BASE0": out}
    return [
        (Command(offset, "NPU_OP_ELEMENTWISE", 0), mul),
        (Command(offset + 0x80, "NPU_OP_POOL", 2), pool),
    ]


def _two_heads(a_bases: tuple[int, int], broadcast: int = 2):
    operations = []
    for head, a_base in enumerate(a_bases):
        for column in range(16):
            offset = 0x1000 * (head + 1) + 0x100 * column
            b_base, out = 1536 + 256 * head + 16 * column, 2048 + 256 * head + column
            operations += _column_pair(offset, a_base, b_base, out, broadcast)
    return operations


def test_the_check_compares_the_batches_first_operands_and_knows_a_matmul_column():
    """Registers only, no compile: the reduced case's shape, 2 heads one at a time."""
    matmul = vela_check._Matmul("mm", "a", "b", (2, 16, 16), (2, 16, 16), "")
    (problem,) = vela_check._matmul_problems(0, _two_heads((0, 0)), (matmul,))
    assert (problem.offset, problem.operation) == (0x2000, "elementwise MUL")
    assert problem.reads.endswith("for batch 1 of 2, as batch 0's MUL at 0x1000 does")
    # head 1's MULs reading head 1's rows is what the MATMUL asks
    assert vela_check._matmul_problems(0, _two_heads((0, 256)), (matmul,)) == []
    # without B's column broadcast along A's rows, MUL + REDUCE_SUM is no MATMUL column
    assert vela_check._matmul_problems(0, _two_heads((0, 0), broadcast=0), (matmul,)) == []
