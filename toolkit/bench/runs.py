"""One run of a suite -> one record (a plain dict, the line written to results.jsonl).

Runs in a worker (a local process or a Dask worker); never raises for a failing run: the record
says failed and why, and the suite goes on.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..pipeline import Job, JobResult, report_dict, run_job
from ..versions import tool_versions
from ..runners.select import select_runner
from ..targets import load_target
from .results import base_record, encode_codes, run_key
from .suite import RunSpec


def _output_codes(result: JobResult, variant: str) -> list[dict[str, Any]]:
    """The integer codes of every output of every evaluation sample, for LSB comparisons."""
    vr = result.variants[variant]
    outputs = vr.device.evaluation.outputs if vr.device else vr.reference.outputs
    entries = []
    for index, quant in enumerate(vr.program.output_quant):
        if quant is None:
            continue
        values = np.stack([np.asarray(sample[index], np.float64) for sample in outputs])
        codes = np.rint(values / quant.scale).astype(np.int64) + quant.zero_point
        entries.append({"index": index, "shape": list(values.shape), "scale": quant.scale,
                        "zero_point": quant.zero_point, "codes": encode_codes(codes)})
    return entries


def _ok_fields(result: JobResult, variant: str, note: str) -> dict[str, Any]:
    report = report_dict(result)
    entry = report["variants"][variant]
    run = entry["run"]
    estimate = {k: entry["estimate"][k] for k in ("kind", "source", "npu_cycles", "total_cycles")}
    return {
        "model_hash": report["model_hash"],
        "vela": report["vela"],
        "runner": {"name": run["runner"], "note": note},
        "cycles": {"estimate": estimate, "run": run["cycles"]},
        "layers": {"kind": "estimate", "source": estimate["source"],
                   "rows": [{k: layer[k] for k in ("delegate", "name", "operator", "npu_cycles")}
                            for layer in entry["estimate"]["layers"]]},
        "npu_ops": entry["npu_ops"],
        "outputs": {**entry["accuracy"],
                    "outputs_match_reference": run["outputs_match_reference"],
                    "max_diff_lsb": run["max_diff_lsb"],
                    "exact_match_rate": run["exact_match_rate"],
                    "quantized": _output_codes(result, variant)},
    }


def execute_run(spec: RunSpec, out_root: str) -> dict[str, Any]:
    key = run_key(spec)
    out_dir = Path(out_root) / "runs" / key
    started = time.time()
    record: dict[str, Any] = {
        **base_record(spec),
        "started": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "pid": os.getpid(), "out_dir": str(out_dir),
        "versions": tool_versions()}
    try:
        target = load_target(spec.target)
        npu = target.npu(spec.npu, spec.vela.system_config, spec.vela.memory_mode)
        runner, note = select_runner(spec.runner, target, npu)
        job = Job(model=spec.model, target=spec.target, variants=(spec.variant,), npu=spec.npu,
                  system_config=spec.vela.system_config, memory_mode=spec.vela.memory_mode,
                  calibration_samples=spec.settings.calibration_samples, seed=spec.settings.seed,
                  eval_samples=spec.settings.eval_samples, out_dir=out_dir,
                  extra_vela=spec.vela.extra_flags(), runner=runner.name)
        result = run_job(job, runner=runner, runner_note=note)
        record.update(status="ok", reason=None, **_ok_fields(result, spec.variant, note))
    except Exception as exc:  # a failing run is a result: recorded with its reason
        lines = [line for line in traceback.format_exception_only(exc)[-1].strip().splitlines() if line]
        record.update(status="failed", reason=" ".join(lines)[-2000:])
    record["duration_s"] = round(time.time() - started, 3)
    return record
