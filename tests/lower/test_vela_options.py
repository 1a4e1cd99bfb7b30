"""Vela options reach the program that runs, and the report describes that same program."""

from __future__ import annotations

from toolkit.job import Job
from toolkit.pipeline import run_job
from toolkit.sim.payload import load_payload


def _same_run(program) -> None:
    """The shipped payload is in model.pte and is the kept Vela run's output, byte for byte."""
    delegate = program.delegates[0]
    assert delegate.payload in program.pte_path.read_bytes()
    shipped, kept = load_payload(delegate.payload), load_payload(delegate.vela_npz_path)
    assert (shipped.command_stream, shipped.weights, shipped.scratch_size) == (
        kept.command_stream,
        kept.weights,
        kept.scratch_size,
    )


def test_vela_options_change_the_shipped_payload_and_its_estimate(compiled, tmp_path):
    default = compiled("zoo:ds_cnn", eval_samples=2).variants["fused"].program
    size = (
        run_job(
            Job(
                model="zoo:ds_cnn",
                variants=("fused",),
                eval_samples=1,
                extra_vela=("--optimise=Size",),
                out_dir=tmp_path,
            )
        )
        .variants["fused"]
        .program
    )
    assert "--optimise=Size" in size.vela_flags
    assert size.delegates[0].payload != default.delegates[0].payload
    for program in (default, size):
        _same_run(program)
    # DS-CNN's weights stream from flash: Size buffers less of them (Vela 5.2.0, ethos-u55-128;
    # 5.1.0 compiled both streams byte for byte the same and estimated 107,389 and 127,261)
    assert (
        default.delegates[0].estimate.total_cycles,
        size.delegates[0].estimate.total_cycles,
    ) == (88_913, 122_161)
