"""Runs of 1x1 pools that differ only in their addresses (Vela's transposes) run as one strided
copy (plan._merge_run): the same bytes as running them one by one, each keeping its own record,
and no merge where running them at once could write something else."""

from __future__ import annotations

import numpy as np
import pytest
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from toolkit.sim import forget_programs, load_payload, plan, pool
from toolkit.sim.errors import RegionError
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.payload import NpuProgram
from toolkit.sim.simulator import op_outputs, simulate

ACC = "ethos-u55-128"
H, W = 3, 16  # each pool transposes a (3, 16) slab: IFM rows 16 apart, OFM rows 1 apart


def _registers(
    ifm_base: int, ofm_base: int, rounding: int, ifm_region: int, ofm_stride_x: int = H
) -> dict[str, int]:
    return {
        "IFM_REGION": ifm_region,
        "IFM_BASE0": ifm_base,
        "IFM_BASE1": 0,
        "IFM_BASE2": 0,
        "IFM_BASE3": 0,
        "IFM_HEIGHT0_M1": H - 1,
        "IFM_HEIGHT1_M1": H - 1,
        "IFM_WIDTH0_M1": W - 1,
        "IFM_DEPTH_M1": 0,
        "IFM_STRIDE_Y": W,
        "IFM_STRIDE_X": 1,
        "IFM_STRIDE_C": 1,
        "IFM_PRECISION": 1,  # int8, NHWC
        "IFM_ZERO_POINT": 3,
        "OFM_REGION": 1,
        "OFM_BASE0": ofm_base,
        "OFM_BASE1": 0,
        "OFM_BASE2": 0,
        "OFM_BASE3": 0,
        "OFM_HEIGHT0_M1": H - 1,
        "OFM_HEIGHT1_M1": H - 1,
        "OFM_WIDTH0_M1": W - 1,
        "OFM_HEIGHT_M1": H - 1,
        "OFM_WIDTH_M1": W - 1,
        "OFM_DEPTH_M1": 0,
        "OFM_STRIDE_Y": 1,
        "OFM_STRIDE_X": ofm_stride_x,
        "OFM_STRIDE_C": 1,
        "OFM_PRECISION": 1 | (1 << 8) | (rounding << 14),  # int8, global scale
        "OFM_ZERO_POINT": -5,
        "OFM_SCALE": 3 << 29,  # x 0.75: a table, not a copy
        "KERNEL_HEIGHT_M1": 0,
        "KERNEL_WIDTH_M1": 0,
        "KERNEL_STRIDE": 0,
    }


def _stream(
    count: int,
    ifm_step: int,
    ofm_step: int,
    ofm_base: int = 0,
    ifm_region: int = 1,
    ofm_stride_x: int = H,
) -> bytes:
    words = []
    for k in range(count):
        regs = _registers(
            0x1000 + k * ifm_step, ofm_base + k * ofm_step, 1, ifm_region, ofm_stride_x
        )
        for name, value in regs.items():
            code = getattr(cmd1, f"NPU_SET_{name}", None)
            if code is not None:
                shift = 31 if name == "OFM_SCALE" else 0
                words += [code.value | (1 << 14) | (shift << 16), value]
            else:
                words.append(getattr(cmd0, f"NPU_SET_{name}").value | ((value & 0xFFFF) << 16))
        words.append(cmd0.NPU_OP_POOL.value | (1 << 16))  # average
    words.append(cmd0.NPU_OP_STOP.value)
    return np.array(words, "<u4").tobytes()


def _program(stream: bytes, weights: bytes = b"") -> NpuProgram:
    return NpuProgram(stream, weights, 0x4000, 0, (), (), None, "test stream")


INITIAL = np.random.default_rng(3).integers(0, 256, 0x4000, dtype=np.uint8)


def _scratch_after(program: NpuProgram, merge: bool, monkeypatch) -> tuple[np.ndarray, tuple]:
    forget_programs()
    if not merge:
        monkeypatch.setattr(plan, "_merge_run", lambda *args: (0, 0))
    the_plan = plan.plan_for(program, configuration(ACC))
    memory = plan.new_memory(program, configuration(ACC))
    memory.regions[1][:] = INITIAL
    for step in the_plan.steps:
        step.run(memory)
    monkeypatch.undo()
    forget_programs()
    merged = sum(step.run is plan._merged for step in the_plan.steps)
    return memory.regions[1].copy(), (merged, [step.record for step in the_plan.steps])


@pytest.mark.parametrize(
    "ifm_step, ofm_step, ofm_base, merged, ofm_stride_x",
    [
        (H * W, H * W, 0, 11, H),  # apart: one run
        (H * W + 7, H * W + 1, 0x2000, 11, H),  # gaps between the slabs
        (H * W, H * W - 1, 0, 0, H),  # each OFM overlaps the next: in turn
        # OFMs over the IFMs two further: in turn (the last two, past every IFM, could merge,
        # but a run refused whole is not tried again from each of its operations)
        (H * W, H * W, 0x1000 + 2 * H * W, 0, H),
        (-H * W, H * W, 0x2000, 0, H),  # backwards
        # interleaved, as Vela's output transposes: the k-th writes rows 3k..3k+2 of every
        # 36-byte column; the byte ranges overlap, the bytes do not: one run
        (H * W, H, 0, 11, 12 * H),
        (H * W, H - 1, 0, 0, 12 * H),  # interleaved, each sharing a byte with the next
        (H * W, H, 0x1000 - 2 * H, 0, 12 * H),  # interleaved over the first IFM's start
        # in place, as Vela's transposes on Ethos-U65: each transposes its own slab: one run
        (H * W, H * W, 0x1000, 11, H),
        (H * W + 5, H * W + 5, 0x1000, 11, H),  # in place, with gaps
        (H * W, H * W, 0x1001, 0, H),  # each writes a byte of the next slab: in turn
    ],
)
def test_merged_pools_write_what_running_them_in_turn_writes(
    ifm_step, ofm_step, ofm_base, merged, ofm_stride_x, monkeypatch
):
    program = _program(_stream(12, ifm_step, ofm_step, ofm_base, ofm_stride_x=ofm_stride_x))
    one_by_one, (none, records) = _scratch_after(program, False, monkeypatch)
    at_once, (count, merged_records) = _scratch_after(program, True, monkeypatch)
    assert (none, count) == (0, merged)
    assert len(records) == 12
    assert merged_records == records  # each operation keeps its own record and registers
    assert np.array_equal(at_once, one_by_one)
    assert not np.array_equal(one_by_one, INITIAL)


@pytest.mark.parametrize("aliased, merged", [(False, 11), (True, 0)])
def test_ifm_in_the_fast_scratch_overlaps_no_ofm_unless_it_aliases_the_scratch(
    aliased, merged, monkeypatch
):
    # Vela's transposes on Ethos-U65 read the fast scratch and write the scratch: the same
    # offsets are other bytes there (each OFM lies over the next operation's IFM offsets)
    stream = _stream(12, H * W, H * W, 0x1000 + H * W, ifm_region=2)
    program = NpuProgram(stream, b"", 0x4000, 0x4000, (), (), None, "test stream", aliased)
    fast = np.random.default_rng(6).integers(0, 256, 0x4000, dtype=np.uint8)

    def run(merge: bool) -> tuple[np.ndarray, int]:
        forget_programs()
        if not merge:
            monkeypatch.setattr(plan, "_merge_run", lambda *args: (0, 0))
        steps = plan.plan_for(program, configuration(ACC)).steps
        memory = plan.new_memory(program, configuration(ACC))
        memory.regions[1][:] = INITIAL
        if not aliased:
            memory.regions[2][:] = fast
        for step in steps:
            step.run(memory)
        monkeypatch.undo()
        forget_programs()
        return memory.regions[1].copy(), sum(step.run is plan._merged for step in steps)

    (in_turn, none), (at_once, count) = run(False), run(True)
    assert (none, count) == (0, merged)
    assert np.array_equal(at_once, in_turn)
    assert not np.array_equal(in_turn, INITIAL)


def test_a_run_that_cannot_merge_is_tried_once(monkeypatch):
    # not again from each of its operations: every try listed the bytes of the rest of the run
    # (Vela's in-place transposes on Ethos-U65 made upsample_net's cold run 4x slower)
    tries = []
    merged_run = pool.ByteMap.merged_run

    def counted(self, count, *args):
        tries.append(count)
        return merged_run(self, count, *args)

    monkeypatch.setattr(pool.ByteMap, "merged_run", counted)
    forget_programs()
    steps = plan.plan_for(_program(_stream(12, H * W, H * W - 1)), configuration(ACC)).steps
    forget_programs()
    assert tries == [12] + [1] * 12  # the run once, then each operation alone as a copy
    assert len(steps) == 12 and not any(step.run is plan._merged for step in steps)


def _plan_error(program: NpuProgram) -> str:
    forget_programs()
    with pytest.raises(RegionError) as info:
        plan.plan_for(program, configuration(ACC))
    return str(info.value)


def test_a_run_past_its_region_names_the_operation_that_overflows(monkeypatch):
    program = _program(_stream(12, H * W, 0x500, 0x1000 + 12 * H * W))
    message = _plan_error(program)
    monkeypatch.setattr(plan, "_merge_run", lambda *args: (0, 0))
    assert message == _plan_error(program)
    tenth_pool = 10 * (len(_stream(1, 0, 0)) - 4)
    assert message.startswith(
        f"NPU_OP_POOL at command-stream offset {tenth_pool + len(_stream(1, 0, 0)) - 8:#x} (OFM)"
    )


def test_per_operation_dumps_are_those_of_the_operations_run_in_turn(monkeypatch):
    # etk diff's op_outputs reads each operation's OFM after its step: a merged run's first
    # step wrote them all, and no later one of the run touches an earlier one's OFM
    weights = np.random.default_rng(4).integers(0, 256, 0x2000, dtype=np.uint8).tobytes()
    program = _program(_stream(12, H * W, H * W + 5, 0x2000, ifm_region=0), weights)
    forget_programs()
    merged = op_outputs(program, [], ACC)
    assert (
        sum(step.run is plan._merged for step in plan.plan_for(program, configuration(ACC)).steps)
        == 11
    )
    monkeypatch.setattr(plan, "_merge_run", lambda *args: (0, 0))
    forget_programs()
    in_turn = op_outputs(program, [], ACC)
    forget_programs()
    assert [r for r, _ in merged] == [r for r, _ in in_turn]
    assert [o.tolist() for _, o in merged] == [o.tolist() for _, o in in_turn]
    assert len({o.tobytes() for _, o in merged}) == 12  # each its own slab


def test_interleaved_transposes_merge_without_listing_their_bytes(monkeypatch):
    # the strides alone show that Vela's interleaved OFMs share no byte (pool._each_byte_once):
    # the byte listing (_disjoint) is for what they cannot show
    def listed(*args):
        raise AssertionError("_disjoint called")

    program = _program(_stream(12, H * W, H, 0, ofm_stride_x=12 * H))
    in_turn, (_, records) = _scratch_after(program, False, monkeypatch)
    monkeypatch.setattr(pool, "_disjoint", listed)
    at_once, (merged, merged_records) = _scratch_after(program, True, monkeypatch)
    assert merged == 11 and merged_records == records
    assert np.array_equal(at_once, in_turn)


@pytest.mark.parametrize(
    "shape, strides, elem_size, once",
    [
        ((12, 3, 16), (3, 1, 36), 1, True),  # the interleaved transpose above
        ((12, 3, 16), (2, 1, 36), 1, False),  # each OFM's last row is the next one's first
        ((4, 2), (8, 2), 2, True),  # 2-byte elements side by side
        ((4, 2), (8, 1), 2, False),  # 2-byte elements one byte apart
        ((5, 1, 7), (0, 3, 1), 1, False),  # a zero stride over 5 elements
        ((1, 1, 7), (0, 0, 1), 1, True),  # zero strides over axes of one
    ],
)
def test_each_byte_once_from_strides(shape, strides, elem_size, once):
    assert pool._each_byte_once(shape, strides, elem_size) is once
    addresses = pool._addresses(0, shape, strides, elem_size)
    assert (len(np.unique(addresses)) == len(addresses)) is once


def test_each_byte_once_only_when_the_bytes_are_distinct():
    # a sufficient test: whenever it says so, listing the bytes agrees
    rng = np.random.default_rng(5)
    said = 0
    for _ in range(2000):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(1, 5, ndim))
        strides = tuple(int(s) for s in rng.integers(0, 24, ndim))
        elem_size = int(rng.choice([1, 2, 4]))
        if pool._each_byte_once(shape, strides, elem_size):
            said += 1
            addresses = pool._addresses(0, shape, strides, elem_size)
            assert len(np.unique(addresses)) == len(addresses), (shape, strides, elem_size)
    assert said > 200


def test_a_vela_program_s_merged_runs_keep_every_record_and_output(cases, monkeypatch):
    # Vela's own transposes (NCHW in and out of a convolution): 35 of the 40 operations are
    # members of merged runs; records (cycles too), outputs and PMU figures are those of the
    # operations planned and run one by one
    case = cases.get("conv3x3_same_relu", ACC)
    program = load_payload(case.npz[ACC])

    def run() -> tuple:
        forget_programs()
        result = simulate(program, case.inputs, ACC)
        steps = plan.plan_for(program, configuration(ACC)).steps
        forget_programs()
        return result, sum(step.run is plan._merged for step in steps)

    merged, count = run()
    monkeypatch.setattr(plan, "_merge_run", lambda *args: (0, 0))
    in_turn, none = run()
    assert (count, none, len(merged.operations)) == (35, 0, 40)
    for a, b in zip(merged.operations, in_turn.operations, strict=True):
        assert a._asdict() == b._asdict()
    assert merged.pmu == in_turn.pmu
    assert [o.tolist() for o in merged.outputs] == [o.tolist() for o in in_turn.outputs]
    assert np.array_equal(merged.outputs[0].reshape(-1), case.expected.reshape(-1))
