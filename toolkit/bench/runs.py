"""One run of a suite -> one record (bench/record.py: BenchRecord, a line of results.jsonl).

Runs in a worker (a local process or a Dask worker); never raises for a failing run: the record
says failed and why, and the suite goes on.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..job import job_for
from ..models.loader import model_file
from ..pipeline import run_resolved
from ..report.job_report import report_dict
from ..resolved_job import resolve_deploy
from ..results import JobResult
from ..versions import tool_versions
from .record import BenchRecord
from .results import encode_codes, new_record, run_key
from .suite import RunSpec, model_file_sha256


def import_run_dependencies() -> None:
    """What every run imports, done once where workers are forked from (the forkserver) instead of
    in each worker's first run: the BundleIO writer alone pulls in executorch.exir (8 s here)."""
    import ethosu.vela.architecture_features  # noqa: F401 - the Vela ini's reader

    from ..console_capture import quiet_torch_import

    quiet_torch_import("executorch.devtools")  # torchao's import-time chatter is not for users
    import executorch.devtools.bundled_program.serialize  # noqa: F401


def _output_codes(result: JobResult, variant: str) -> list[dict[str, Any]]:
    """The integer codes of every output of every evaluation sample, for LSB comparisons."""
    vr = result.variants[variant]
    evaluation = vr.run.evaluation if vr.run else vr.reference
    assert evaluation is not None  # a bench run has a runner (a .tflite model's: no reference)
    outputs = evaluation.outputs
    entries = []
    for index, quant in enumerate(vr.program.output_quant):
        if quant is None:
            continue
        values = np.stack([np.asarray(sample[index]) for sample in outputs])
        if np.issubdtype(values.dtype, np.integer):  # a .tflite model's outputs are the codes
            codes = values.astype(np.int64)
        else:  # dequantized by the program's graph
            codes = (
                np.rint(values.astype(np.float64) / quant.scale).astype(np.int64) + quant.zero_point
            )
        entries.append(
            {
                "index": index,
                "shape": list(values.shape),
                "scale": quant.scale,
                "zero_point": quant.zero_point,
                "codes": encode_codes(codes),
            }
        )
    return entries


def _ok_fields(result: JobResult, variant: str, note: str) -> dict[str, Any]:
    """A .tflite run has no float model: its outputs carry no accuracy keys (sqnr_db, cosine, ...)
    and its outputs_match_reference, max_diff_lsb and exact_match_rate are None."""
    report = report_dict(result)
    entry = report["variants"][variant]
    run = entry["run"]
    estimate = {k: entry["estimate"][k] for k in ("kind", "source", "npu_cycles", "total_cycles")}
    return {
        "model_hash": report["model_hash"],
        "vela": report["vela"],
        "runner": {"name": run["runner"], "note": note},
        "cycles": {"estimate": estimate, "run": run["cycles"]},
        "layers": {
            "kind": "estimate",
            "source": estimate["source"],
            "rows": [
                {k: layer[k] for k in ("delegate", "name", "operator", "npu_cycles")}
                for layer in entry["estimate"]["layers"]
            ],
        },
        "npu_ops": entry["npu_ops"],
        "outputs": {
            **entry.get("accuracy", {}),
            "outputs_match_reference": run["outputs_match_reference"],
            "max_diff_lsb": run["max_diff_lsb"],
            "exact_match_rate": run["exact_match_rate"],
            "quantized": _output_codes(result, variant),
        },
    }


def _check_model_file(spec: RunSpec) -> None:
    """The file still holds what the run key says: an edit after the suite was expanded fails
    the run rather than recording new figures under the old contents' key."""
    now = model_file_sha256(spec.model)
    if spec.model_sha256 and now and now != spec.model_sha256:
        raise UserError(
            f"model file {model_file(spec.model)} changed after the suite started "
            f"(sha256 {spec.model_sha256[:12]}..., now {now[:12]}...): run the suite "
            "again with --resume"
        )


def execute_run(spec: RunSpec, out_root: str) -> BenchRecord:
    out_dir = Path(out_root) / "runs" / run_key(spec)
    started = time.time()
    where: dict[str, Any] = {
        "started": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "out_dir": str(out_dir),
        "versions": tool_versions(),
    }
    try:
        _check_model_file(spec)
        job = job_for(
            spec.model,
            (spec.variant,),
            out_dir=out_dir,
            target=spec.target,
            npu=spec.npu,
            system_config=spec.vela.system_config,
            memory_mode=spec.vela.memory_mode,
            calibration_samples=spec.settings.calibration_samples,
            seed=spec.settings.seed,
            eval_samples=spec.settings.eval_samples,
            vela_options=spec.vela.extra_flags(),
            quant=spec.quant,
        )
        resolved = resolve_deploy(job, spec.runner)  # the target resolved once
        result = run_resolved(resolved)
        note = resolved.runner_note
        status, reason, figures = "ok", None, _ok_fields(result, spec.variant, note)
        problems = result.variants[spec.variant].vela_problems
        if problems:  # its figures are of a program that computes wrong results: not a result
            status, reason, figures = "failed", problems[0].describe(), {}
    except Exception as exc:  # a failing run is a result: recorded with its reason
        lines = [
            line for line in traceback.format_exception_only(exc)[-1].strip().splitlines() if line
        ]
        status, reason, figures = "failed", " ".join(lines)[-2000:], {}
    duration_s = round(time.time() - started, 3)
    return new_record(spec, status, reason, **where, **figures, duration_s=duration_s)
