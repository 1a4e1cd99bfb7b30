"""etk deploy: compile, run each variant on the target's runner, compare with the host reference."""

from __future__ import annotations

from ..errors import UserError
from ..resolve import FUSION_CHOICES, RUNNER_CHOICES, fusion_variants
from ..runners.layer_cycles import layer_lines
from .common import add_job_arguments, job_from_args, show, stage_progress


def _deploy(args) -> int:
    from ..pipeline import check_job, run_resolved
    from ..resolved_job import resolve_deploy

    if (args.port or args.baud or args.no_build or args.no_flash) and args.runner != "serial":
        raise UserError("--port, --baud, --no-build and --no-flash are for --runner serial")
    if args.fvp_fast and args.runner not in ("fvp", "auto"):
        raise UserError("--fvp-fast is for the FVP runner (--runner fvp)")
    job = job_from_args(args, fusion_variants(args.fusion, compare=args.compare_fusion))
    check_job(job)
    resolved = resolve_deploy(
        job,
        args.runner,
        runner_elf=args.runner_elf,
        port=args.port,
        baud=args.baud,
        build=not args.no_build,
        flash=not args.no_flash,
        fvp_fast=args.fvp_fast,
        one_start=args.one_start,
    )
    runner = resolved.runner
    with stage_progress() as progress:
        result = run_resolved(resolved, progress)
    status = show(result, args.require_full_npu)
    _show_layers(result)
    lost = _samples_lost(result)
    if lost:
        print(f"etk: {lost}")
        return 1
    mismatched = [
        n
        for n, v in result.variants.items()
        if v.run is not None and v.run.outputs_match_reference is False
    ]
    if mismatched and runner is not None and runner.name != "tosa-ref":
        print(f"etk: ran, outputs differ from the host reference for: {', '.join(mismatched)}")
        return 1
    return status


def _show_layers(result) -> None:
    """Per layer, simulated cycles beside Vela's estimate (families no FVP figure has checked)."""
    for name, variant in result.variants.items():
        rows = variant.run.evaluation.runs[0].details.get("layers") if variant.run else None
        if rows:
            print(f"{name}: cycles per layer (sim: simulated, not checked against an FVP)")
            for line in layer_lines(rows):
                print(f"  {line}")


def _samples_lost(result) -> str:
    """One line naming the samples that failed or hung on the target, or ""."""
    lines = []
    for name, variant in result.variants.items():
        if variant.run is None:
            continue
        session = variant.run.evaluation.runs[0].details.get("session", {})
        for failed in session.get("failed", ())[:3]:
            lines.append(f"{name} sample {failed['sample']} {failed['status']}: {failed['reason']}")
    return "; ".join(lines)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "deploy", help="compile and run on a target (FVP, board, simulator or TOSA reference)"
    )
    add_job_arguments(parser)
    parser.add_argument(
        "--runner",
        choices=RUNNER_CHOICES,
        default="auto",
        help="auto: the FVP when installed, else the simulator, else the TOSA "
        "reference model; serial: a board target's board (flashes it)",
    )
    parser.add_argument(
        "--runner-elf",
        help="ExecuTorch executor runner: the semihosting one "
        "for the FVP, or the board image ({elf}) for serial",
    )
    parser.add_argument("--port", help="serial port of the board (--runner serial; see etk ports)")
    parser.add_argument(
        "--baud",
        type=int,
        help="baud rate (--runner serial; default: the target file's board.baud)",
    )
    parser.add_argument(
        "--fvp-fast",
        action="store_true",
        help="the FVP's fast Ethos-U model (ethosu.extra_args=--fast, as "
        "ExecuTorch's run_fvp.sh --fast): quicker, outputs still checked, "
        "but no cycles (its counts are not meaningful)",
    )
    parser.add_argument(
        "--no-build",
        action="store_true",
        help="--runner serial: flash the prebuilt image (--runner-elf or "
        "board.image) without the target's build command",
    )
    parser.add_argument(
        "--no-flash",
        action="store_true",
        help="--runner serial with your own firmware: no build, flash or reset; "
        "etk listens on the port while you start it, and parses what it "
        "prints",
    )
    parser.add_argument(
        "--one-start",
        choices=("auto", "on", "off"),
        default="auto",
        help="FVP: all evaluation samples in one launch when the runner ELF has ExecuTorch's "
        "semihosting server mode (auto), required (on), or one launch per sample (off)",
    )
    parser.add_argument("--compare-fusion", action="store_true", help="run fused and unfused")
    parser.add_argument("--fusion", choices=FUSION_CHOICES, default="on")
    parser.set_defaults(func=_deploy)
