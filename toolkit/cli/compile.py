"""etk compile (one variant) and etk compare (fused vs unfused)."""

from __future__ import annotations

from ..resolve import FUSION_CHOICES, fusion_variants
from .common import add_job_arguments, job_from_args, show, stage_progress


def _compile(args) -> int:
    from ..pipeline import run_job

    with stage_progress() as progress:
        result = run_job(job_from_args(args, fusion_variants(args.fusion)), progress)
    return show(result, args.require_full_npu)


def _compare(args) -> int:
    from ..pipeline import run_job

    with stage_progress() as progress:
        result = run_job(job_from_args(args, ("fused", "unfused")), progress)
    return show(result, args.require_full_npu)


def register(subparsers) -> None:
    parser = subparsers.add_parser("compile", help="quantize, lower and compile one variant")
    add_job_arguments(parser)
    parser.add_argument(
        "--fusion",
        choices=FUSION_CHOICES,
        default="on",
        help="on: conv/linear + relu/relu6 as one block, activation in the "
        "RESCALE; off: the activation stays its own operator",
    )
    parser.set_defaults(func=_compile)
    parser = subparsers.add_parser("compare", help="compile fused and unfused, side by side")
    add_job_arguments(parser)
    parser.set_defaults(func=_compare)
