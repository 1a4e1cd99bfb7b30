"""Arguments shared by the verbs that build a job, and turning them into one."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from ..rewrite_names import DEFAULT_REWRITES

if TYPE_CHECKING:  # results (and the pipeline) import torch: only when a job runs
    from ..job import Job
    from ..results import JobResult


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        metavar="MODEL",
        help="zoo:NAME, path/to/file.py:ClassOrFactory, a .pt2 file or an int8 "
        ".tflite file. A .py model is code: it runs with your rights, so "
        "use only files you trust; a .pt2 with pickled entries is refused",
    )
    parser.add_argument("--target", default="corstone-300", help="target name or .toml file")
    parser.add_argument(
        "--npu", help="NPU configuration, e.g. ethos-u55-256 (default: the target's)"
    )
    parser.add_argument("--system-config", help="Vela system config (default: the target's)")
    parser.add_argument("--memory-mode", help="Vela memory mode (default: the target's)")
    parser.add_argument(
        "--vela-config",
        type=Path,
        metavar="FILE",
        help="a vendor's Vela .ini (e.g. Alif's ensemble_vela.ini) holding the "
        "--system-config and --memory-mode; Vela and etk's cycle model "
        "read it (default: the target's, else Vela's Arm/vela.ini)",
    )
    parser.add_argument(
        "--input-shape",
        help="input shape(s) for file models, e.g. 1,3,32,32; several inputs separated by ';' "
        "in forward's order: '1,3,16,16;1,8' (quote it for the shell)",
    )
    _add_data_arguments(parser)
    _add_compile_arguments(parser)


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Calibration and evaluation data, seeds."""
    parser.add_argument(
        "--calibration-samples",
        type=int,
        help="random calibration inputs (default 8); with --calibration-data and "
        "--seeds, the size of each seed's random subset (default half)",
    )
    parser.add_argument(
        "--calibration-data",
        type=Path,
        help="folder of .npy/.npz inputs, or x.npy (+ y.npy, ignored) as for --eval-data",
    )
    parser.add_argument(
        "--eval-data",
        type=Path,
        metavar="DIR",
        help="labelled data: DIR/x.npy (float32, N inputs in the model's layout) "
        "and DIR/y.npy (N integer labels): top-1 per variant (ROC AUC of the "
        "reconstruction error for autoencoders), next to the float model's",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="with --eval-data: calibrate N times (seeds, or random subsets of "
        "--calibration-data) and report mean and spread",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for calibration and evaluation inputs"
    )
    parser.add_argument(
        "--eval-samples",
        type=int,
        default=8,
        help="inputs to compare against the float model (default 8)",
    )


def _add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    """How the model is compiled, and where the results go."""
    parser.add_argument(
        "--vela-option",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra Vela flag, e.g. --vela-option=--optimise=Size (repeatable)",
    )
    parser.add_argument(
        "--rewrites",
        default="default",
        help="graph rewrites: default (all), none, or a comma-separated list of "
        + ", ".join(DEFAULT_REWRITES),
    )
    parser.add_argument(
        "--io-layout",
        choices=("nchw", "nhwc"),
        default="nchw",
        help="nhwc: the model takes and returns channels-last tensors, so the NPU "
        "needs no transposes at its edges",
    )
    parser.add_argument(
        "--quant",
        default="int8",
        help="int8 (default), or a16w8: int16 activations with int8 weights (docs/accuracy.md)",
    )
    parser.add_argument("-o", "--out", type=Path, default=Path("etk-out"), help="output folder")
    parser.add_argument(
        "--require-full-npu",
        action="store_true",
        help="exit 1 unless every variant is one delegate with no CPU operators",
    )


def job_from_args(args, variants) -> Job:
    from ..job import job_for

    return job_for(
        args.model,
        variants,
        out_dir=args.out,
        target=args.target,
        npu=args.npu,
        system_config=args.system_config,
        memory_mode=args.memory_mode,
        vela_config=args.vela_config,
        input_shape=args.input_shape,
        calibration_samples=args.calibration_samples,
        calibration_data=args.calibration_data,
        eval_data=args.eval_data,
        seeds=args.seeds,
        seed=args.seed,
        eval_samples=args.eval_samples,
        vela_options=tuple(args.vela_option),
        rewrites=args.rewrites,
        io_layout=args.io_layout,
        quant=args.quant,
    )


def wrong_program_line(result: JobResult) -> str:
    """The closing line of a job with a program Vela compiled wrongly, and what avoids it."""
    from ..rewrite_names import BATCHED_CONV, INVERSE_PERMUTES, SLICED_MATMUL
    from ..rewrites import resolve_rewrites

    wrong = {name: v.vela_problems for name, v in result.variants.items() if v.vela_problems}
    kinds = {problem.operation for problems in wrong.values() for problem in problems}
    # the rewrite that avoids each known kind (vela_check.VelaProblem.operation); the others are
    # windows wholly in padding
    avoids = {"outputs": INVERSE_PERMUTES, "elementwise MUL": SLICED_MATMUL}
    needed = dict.fromkeys(avoids.get(kind, BATCHED_CONV) for kind in sorted(kinds))
    missing = [r for r in needed if r not in resolve_rewrites(result.job.rewrites)]
    if missing:
        avoid = f"the rewrite {', '.join(missing)} (in --rewrites default) avoids the known case"
    else:
        avoid = "no etk rewrite avoids it yet (docs/upstream-gaps.md)"
        if len(wrong) < len(result.variants):
            avoid += f"; {', '.join(n for n in result.variants if n not in wrong)} is not affected"
    return (
        f"etk: Vela compiled {', '.join(wrong)} into a program that computes wrong results "
        f"on the NPU (WARNING above); {avoid}"
    )


def show(result: JobResult, require_full_npu: bool = False) -> int:
    """Print the report (run_job wrote it); 1 if --require-full-npu is not met, else 0."""
    from ..report.tables import print_result

    console = Console()
    print_result(result, console)
    if any(v.vela_problems for v in result.variants.values()):
        console.print(wrong_program_line(result), markup=False)
        return 1
    if not require_full_npu:
        return 0
    failures = [
        f"{name}: {len(v.program.delegates)} delegates, {len(v.program.cpu_ops)} CPU operators"
        for name, v in result.variants.items()
        if len(v.program.delegates) != 1 or v.program.cpu_ops
    ]
    if failures:
        console.print(f"etk: --require-full-npu: {'; '.join(failures)}", markup=False)
        return 1
    return 0


@contextmanager
def stage_progress(console: Console | None = None) -> Iterator[Callable[[str], None]]:
    """Stage messages on an interactive terminal (stderr), each with a spinner and its elapsed
    time while it runs, left as a line with its time when the next starts; silence in pipes and
    logs. The display does not capture stdout: a compile's forked child must not write through it."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield lambda message: None
        return
    columns = (SpinnerColumn(finished_text="..."), TextColumn("{task.description}"))
    with Progress(
        *columns,
        TimeElapsedColumn(),
        console=console,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as progress:
        current: list[TaskID] = []

        def finish() -> None:
            if current:
                progress.stop_task(current[-1])
                progress.update(current[-1], completed=1)

        def stage(message: str) -> None:
            finish()
            current.append(progress.add_task(message, total=1))

        try:
            yield stage
        finally:
            finish()
