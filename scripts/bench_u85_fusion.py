"""The fused/unfused A/B on Ethos-U85 (issue 47): with chaining, does an unfused clamp cost
anything? Each zoo net is compiled fused and unfused through the toolkit's chain for corstone-320
(ethos-u85-256 unless --npu) and run on the simulator; from the executed streams it prints, per
variant, the NPU operations, the chained operations, the AXI beats (read, write), the simulated
compute and total cycles (simulated, not checked against an FVP) and Vela 5.2's estimate, and the
difference unfused - fused.

Usage: python scripts/bench_u85_fusion.py [--npu ethos-u85-256] [--out DIR] [NAME ...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from toolkit.job import Job
from toolkit.models.zoo import zoo_names
from toolkit.pipeline import run_job
from toolkit.runners.sim import SimulatorRunner
from toolkit.sim import accelerator, load_payload
from toolkit.sim.plan import plan_for

COLUMNS = ("ops", "chained", "beats_r", "beats_w", "compute", "total", "vela_total")


def figures(variant, npu: str) -> dict[str, int]:
    run = variant.run.evaluation.runs[0]
    steps = [
        s
        for d in variant.program.delegates
        for s in plan_for(load_payload(d.payload), accelerator(npu)).steps
    ]
    beats = run.cycles.beats or {}
    return {
        "ops": len(steps),
        "chained": sum(1 for s in steps if s.record.register("OFM_PRECISION") >> 14 == 2),
        "beats_r": beats.get("axi0_read", 0) + beats.get("axi1_read", 0),
        "beats_w": beats.get("axi0_write", 0),
        "compute": run.cycles.npu_cycles,
        "total": run.cycles.total_cycles,
        "vela_total": variant.program.estimated_total_cycles,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npu", default="ethos-u85-256")
    parser.add_argument("--out", type=Path)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="u85-ab-"))
    names = args.names or zoo_names()
    print(f"{args.npu} on corstone-320; cycles simulated, not checked against an FVP")
    print(f"{'model':<22} {'variant':<8} " + " ".join(f"{c:>10}" for c in COLUMNS))
    for name in names:
        job = Job(
            model=f"zoo:{name}",
            target="corstone-320",
            npu=args.npu,
            eval_samples=1,
            out_dir=out / name,
        )
        result = run_job(job, runner=SimulatorRunner())
        rows = {v: figures(vr, args.npu) for v, vr in result.variants.items()}
        rows["unfused-fused"] = {c: rows["unfused"][c] - rows["fused"][c] for c in COLUMNS}
        for variant, row in rows.items():
            cells = " ".join(f"{row[c]:>10,}" for c in COLUMNS)
            print(f"{name:<22} {variant:<8} {cells}", flush=True)


if __name__ == "__main__":
    main()
