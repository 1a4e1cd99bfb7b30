"""Running what others compiled: a Vela-compiled .tflite (the ethos-u custom operator) as it is,
and a .tflite whose float edges (QUANTIZE/DEQUANTIZE) Vela leaves to the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toolkit.lower.tflite import compile_tflite
from toolkit.npu import npu_config
from toolkit.runners.sim import SimulatorRunner
from toolkit.sim import simulate
from toolkit.sim.errors import PayloadError
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.plan import new_memory, plan_for
from toolkit.sim.vela_tflite import load_compiled_tflite, run_graph

from .tflite_builder import unary_chain

REPO = Path(__file__).resolve().parents[2]
# shared/ lies beside the repository (CI) or beside its worktree folder
ANCHORS = next(
    (
        p / "shared" / "cycle-anchors"
        for p in (REPO.parent, REPO.parent.parent)
        if (p / "shared" / "cycle-anchors").is_dir()
    ),
    REPO / "missing-anchors",
)
HIMAX = ANCHORS / "models" / "person_int8_model_vela_mac64.tflite"
needs_anchors = pytest.mark.skipif(
    not HIMAX.is_file(),
    reason="needs the published cycle anchors in ../shared/cycle-anchors beside the checkout "
    "(models/ and configs/: ML-zoo's kws_micronet_m, ad_medium_int8 and mobilenet_v2 .tflite, "
    "HimaxWiseEyePlus/ML_FVP_EVALUATION's person_int8_model(_vela_mac64).tflite and "
    "himax_we2_vela.ini, the MLEK's default Vela ini; docs/cycle-model.md lists the sources)",
)

# TFLite reference kernels (ai-edge-litert 2.3.0, OpResolverType.BUILTIN_REF) on the source
# person_int8_model.tflite (its 1-D bias tensors' quantized_dimension 3 set to 0, which LiteRT
# requires), inputs np.random.default_rng(seed).integers(-128, 128, (1, 96, 96, 1), np.int8).
HIMAX_REFERENCE = {0: [104, -104], 1: [98, -98], 2: [111, -111], 3: [108, -108]}


def _himax_run(seed: int):
    graph = load_compiled_tflite(HIMAX)
    sims = []

    def npu(program, arrays):
        sims.append(
            simulate(
                program,
                arrays,
                "ethos-u55-64",
                "My_Sys_Cfg",
                "My_Mem_Mode_Parent",
                str(ANCHORS / "configs" / "himax_we2_vela.ini"),
            )
        )
        return sims[-1].outputs

    x = np.random.default_rng(seed).integers(-128, 128, (1, 96, 96, 1), dtype=np.int8)
    return run_graph(graph, [x], npu), sims


@needs_anchors
def test_himax_stream_loads_as_compiled():
    graph = load_compiled_tflite(HIMAX)
    (program,) = graph.npu_programs
    assert not graph.cpu_ops and program.config.accelerator == "ethos-u55-64"
    # arena plan: input and output both at offset 0; scratch_fast planned on the scratch
    assert [(t.offset, t.region, t.squeezed_shape) for t in program.inputs + program.outputs] == [
        (0, 1, (96, 96, 1)),
        (0, 1, (2,)),
    ]
    assert program.scratch_size == 74_464 and program.fast_scratch_aliases_scratch
    assert len(program.weights) == 261_168


@needs_anchors
def test_himax_prediction_pinned():
    """Published FVP NPU TOTAL for this stream: 479,093 (README of ../shared/cycle-anchors)."""
    _, (sim,) = _himax_run(0)
    assert (sim.pmu.total, sim.pmu.beats) == (
        499_880,
        {"axi0_read": 112_036, "axi0_write": 62_789, "axi1_read": 30_708},
    )
    assert abs(sim.pmu.total / 479_093 - 1) < 0.10


# The same, on the source file without its final softmax (tflite_edit.without_final_softmax):
# the logits the softmax reads.
HIMAX_LOGITS = {0: [92, -91], 1: [82, -80], 2: [107, -105], 3: [99, -98]}


@needs_anchors
@pytest.mark.parametrize("seed", sorted(HIMAX_LOGITS))
def test_himax_logits_equal_tflite_reference(seed):
    """Everything before the softmax is bit-exact: the softmax's first operation (a max pool over
    the two classes) reads the logits."""
    (program,) = load_compiled_tflite(HIMAX).npu_programs
    plan, memory = (
        plan_for(program, configuration("ethos-u55-64")),
        new_memory(program, configuration("ethos-u55-64")),
    )
    x = np.random.default_rng(seed).integers(-128, 128, (96 * 96,), dtype=np.int8)
    memory.write_bytes(1, program.inputs[0].offset, x.view(np.uint8), "input")
    for step in plan.steps:
        if step.record.kind == "pool.max" and step.record.ifm_shape == (1, 2, 1):
            break
        step.run(memory)
    base = dict(step.record.registers)["IFM_BASE0"]
    assert memory.regions[1][base : base + 2].view(np.int8).tolist() == HIMAX_LOGITS[seed]


@needs_anchors
@pytest.mark.parametrize("seed", sorted(HIMAX_REFERENCE))
def test_himax_outputs_equal_tflite_reference(seed):
    """Vela 3.x programs the softmax input's zero point (-1) as the OFM zero point of the
    softmax's int32 steps, which a 32-bit OFM does not add (activation.py): added, the right
    shift is 23 and the outputs [127, -102] for seed 0."""
    (out,), _ = _himax_run(seed)
    assert out.ravel().tolist() == HIMAX_REFERENCE[seed]


# TFLite reference kernels (ai-edge-litert 2.3.0, BUILTIN_REF) on _float_edged(): the output
# times 128 for np.linspace(-6, 6, 128) as input.
QDQ_REFERENCE = (
    [-128] * 31
    + [-127] * 6
    + [
        -126,
        -126,
        -125,
        -125,
        -125,
        -124,
        -123,
        -122,
        -120,
        -119,
        -117,
        -115,
        -112,
        -110,
        -107,
        -102,
        -97,
        -92,
        -85,
        -77,
        -69,
        -59,
        -54,
        -43,
        -31,
        -19,
        -6,
        6,
        19,
        31,
        43,
        54,
        59,
        69,
        77,
        85,
        92,
        97,
        102,
        107,
        110,
        112,
        115,
        117,
        119,
        120,
        122,
        123,
        124,
        125,
        125,
        125,
        126,
        126,
    ]
    + [127] * 37
)


def _float_edged() -> bytes:
    """float32 -> QUANTIZE -> int8 TANH -> DEQUANTIZE -> float32 (as many TF exports are)."""
    return unary_chain(
        [("QUANTIZE", (0.05, -3)), ("TANH", (1 / 128, 0)), ("DEQUANTIZE", (1.0, 0))],
        (1, 4, 4, 8),
        (1.0, 0),
        float_edges=True,
    )


def test_float_edges_run_on_the_host_and_match_tflite(tmp_path):
    source = tmp_path / "qdq.tflite"
    source.write_bytes(_float_edged())
    program = compile_tflite(source, npu_config("ethos-u55-128"), tmp_path / "out")
    assert [op.op for op in program.cpu_ops] == ["Quantize", "Dequantize"]
    assert program.input_specs[0].dtype == "float32" and program.input_quant == (None,)
    x = np.linspace(-6, 6, 128, dtype=np.float32).reshape(1, 4, 4, 8)
    run = SimulatorRunner().run(program, [x])
    assert (run.outputs[0].ravel() * 128).astype(int).tolist() == QDQ_REFERENCE
    assert run.cycles.beats["axi0_read"] > 0 and run.cycles.total_cycles > 0


def test_compiled_file_without_arena_plan_is_refused(tmp_path):
    """Without Vela's OfflineMemoryAllocation the feature maps cannot be placed in the arena."""
    source = tmp_path / "plain.tflite"
    source.write_bytes(_float_edged())
    with pytest.raises(PayloadError, match="no OfflineMemoryAllocation metadata"):
        load_compiled_tflite(source)


@needs_anchors
def test_deploy_runs_the_compiled_file_on_its_own_npu(tmp_path, capsys):
    from toolkit.cli import main

    ini = ANCHORS / "configs" / "himax_we2_vela.ini"
    argv = [
        "deploy",
        str(HIMAX),
        "--runner",
        "sim",
        "--vela-config",
        str(ini),
        "--system-config",
        "My_Sys_Cfg",
        "--memory-mode",
        "My_Mem_Mode_Parent",
        "--eval-samples",
        "1",
        "-o",
        str(tmp_path / "out"),
    ]
    assert main(argv) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["npu"] == "ethos-u55-64"
    variant = report["variants"]["tflite"]
    assert variant["npu_ops"] == 122  # 59 conv, 31 depthwise, 29 elementwise, 3 pool
    cycles = variant["run"]["cycles"]
    assert cycles["kind"] == "simulated" and cycles["total_cycles"] == 499_880
    assert cycles["beats"] == {"axi0_read": 112_036, "axi0_write": 62_789, "axi1_read": 30_708}
    assert main([*argv[:-2], "--npu", "ethos-u55-128", "-o", str(tmp_path / "bad")]) == 2
    assert (
        "compiled by Vela for ethos-u55-64, not ethos-u55-128: pass --npu ethos-u55-64"
        in capsys.readouterr().err
    )
