"""The Python API: what `etk compile`, `etk compare` and `etk deploy` do, for scripts and notebooks.

    import toolkit
    result = toolkit.deploy(net, example_inputs=(torch.randn(1, 3, 32, 32),), compare_fusion=True)
    result.to_dict()["variants"]["fused"]["run"]  # what report.json holds

MODEL is a spec string as on the command line (zoo:NAME, file.py:Name, a .pt2 or .tflite file) or
a live torch.nn.Module with example_inputs. The keyword options are the CLI's flags with
underscores (docs/usage.md); vela_options is a list of Vela flags. Errors raise what the CLI maps
to exit codes: UserError (bad input, 2) and ToolError (an external tool failed, 3).

With output=PATH the run writes the folder the CLI writes (report.json, report.md, the variants);
without it, a temporary folder that is removed when the Python process ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .api_options import check_option_types
from .child_process import alive
from .console_capture import quiet_third_party_warnings, quiet_torch_import
from .errors import UserError
from .resolve import FUSION_CHOICES, RUNNER_CHOICES, fusion_variants

if TYPE_CHECKING:
    from .artifacts import Variant
    from .results import JobResult

__all__ = ["compile", "compare", "deploy"]


def compile(  # noqa: A001 - toolkit.compile, as the CLI's verb
    model: Any,
    *,
    example_inputs: Any = None,
    fusion: str = "on",
    output: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> JobResult:
    """Quantize, lower and compile one variant (fusion "on": fused, "off": unfused) and run it on
    the host reference (the TOSA reference model)."""
    check_option_types({"fusion": fusion, "output": output, "progress": progress, **options})
    return _run(model, example_inputs, _variants(fusion, False), output, progress, options)


def compare(
    model: Any,
    *,
    example_inputs: Any = None,
    output: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> JobResult:
    """Compile fused and unfused; result.comparison holds what fusion changed."""
    check_option_types({"output": output, "progress": progress, **options})
    return _run(model, example_inputs, ("fused", "unfused"), output, progress, options)


def deploy(
    model: Any,
    *,
    example_inputs: Any = None,
    runner: str = "auto",
    fusion: str = "on",
    compare_fusion: bool = False,
    output: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    runner_elf: str | None = None,
    port: str | None = None,
    baud: int | None = None,
    build: bool = True,
    flash: bool = True,
    fvp_fast: bool = False,
    **options: Any,
) -> JobResult:
    """Compile and run on the target's runner ("auto", "fvp", "sim", "tosa-ref", "serial");
    result.variants[v].run.outputs_match_reference says whether the runner agreed with the host."""
    check_option_types(
        {
            "runner": runner,
            "fusion": fusion,
            "compare_fusion": compare_fusion,
            "output": output,
            "progress": progress,
            "runner_elf": runner_elf,
            "port": port,
            "baud": baud,
            "build": build,
            "flash": flash,
            "fvp_fast": fvp_fast,
            **options,
        }
    )
    if runner not in RUNNER_CHOICES:
        raise UserError(f"runner '{runner}' is not one of {', '.join(RUNNER_CHOICES)}")
    variants = _variants(fusion, compare_fusion)
    runner_options = {
        "runner_elf": runner_elf,
        "port": port,
        "baud": baud,
        "build": build,
        "flash": flash,
        "fvp_fast": fvp_fast,
    }
    return _run(
        model, example_inputs, variants, output, progress, options, (runner, runner_options)
    )


def _variants(fusion: str, both: bool) -> tuple[Variant, ...]:
    if fusion not in FUSION_CHOICES:
        raise UserError(f"fusion '{fusion}' is not one of {', '.join(FUSION_CHOICES)}")
    return fusion_variants(fusion, compare=both)


def _run(
    model: Any,
    example_inputs: Any,
    variants: tuple[Variant, ...],
    output: str | Path | None,
    progress: Callable[[str], None] | None,
    options: dict[str, Any],
    runner: tuple[str, dict[str, Any]] | None = None,
) -> JobResult:
    """runner: the runner's name and options (deploy); None: the host reference only."""
    from .lower.compile_cache import usable_cache_root
    from .model_spec import check_model_spec

    usable_cache_root()
    if isinstance(model, str):
        if example_inputs is not None:
            raise UserError(
                "example_inputs is for an nn.Module; a MODEL spec gets its shapes from the zoo, "
                "the file's example_inputs() or input_shape='1,3,32,32'"
            )
        check_model_spec(model)
    elif "input_shape" in options:
        raise UserError("input_shape is for MODEL specs: give an nn.Module example_inputs")
    with warnings.catch_warnings():  # as on the command line; the caller's filters come back after
        quiet_third_party_warnings()
        quiet_torch_import()  # before anything imports torchao and ExecuTorch
        from .models.loader import live_model
        from .pipeline import check_job, run_resolved
        from .resolved_job import resolve_deploy, resolve_job

        loaded = None if isinstance(model, str) else live_model(model, example_inputs)
        spec = model if loaded is None else loaded.spec
        job = _job(spec, variants, Path(output) if output is not None else Path(), options)
        check_job(job)
        resolved = (
            resolve_job(job) if runner is None else resolve_deploy(job, runner[0], **runner[1])
        )
        if output is not None:
            return run_resolved(resolved, progress or _silent, loaded)
        with _temporary_folder() as out_dir:
            resolved = replace(resolved, job=replace(job, out_dir=out_dir))
            return run_resolved(resolved, progress or _silent, loaded)


def _job(spec: str, variants: tuple[Variant, ...], out_dir: Path, options: dict[str, Any]):
    import inspect

    from .job import job_for

    known = set(inspect.signature(job_for).parameters) - {"model", "variants", "out_dir"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UserError(
            f"unknown option {', '.join(unknown)}: the options are {', '.join(sorted(known))}"
        )
    return job_for(spec, variants, out_dir=out_dir, **options)


_TEMPORARY = "etk-api-{pid}-"


@contextmanager
def _temporary_folder() -> Iterator[Path]:
    """A folder for a run without output=: removed when the process ends, or at once when the
    run fails. A process that ends without running its exit handlers (killed, os._exit as a
    pytest-xdist worker does) leaves it: the next API call removes those of gone processes."""
    _remove_orphaned_folders()
    folder = tempfile.mkdtemp(prefix=_TEMPORARY.format(pid=os.getpid()))
    try:
        yield Path(folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    atexit.register(shutil.rmtree, folder, True)


def _remove_orphaned_folders() -> None:
    prefix = _TEMPORARY.split("{")[0]
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not alive(int(pid)) and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)


def _silent(_message: str) -> None:
    pass
