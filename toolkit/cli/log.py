"""etk log: read a console capture from a run made elsewhere into the run entry deploy writes."""

from __future__ import annotations

import json
from pathlib import Path

from ..artifacts import CycleFigures
from ..errors import UserError
from ..evaluation.cycle_check import CycleCheck, cycle_check_lines


def _cycle_check(measured: CycleFigures, program_dir: Path) -> CycleCheck | None:
    """The measured NPU cycles next to etk's prediction and Vela's estimate for the program."""
    from ..evaluation.cycle_check import check_cycles
    from ..lower.program_store import StoreDamaged, load_stored_program

    if measured.kind != "measured":
        return None
    try:
        program = load_stored_program(program_dir)
    except StoreDamaged as damage:
        raise UserError(
            f"the program in {program_dir} is damaged ({damage}): compile it again"
        ) from None
    if program is None:
        return None  # check_outputs has said what is missing
    return check_cycles(program, measured)


def _log(args) -> int:
    from ..runners.capture_file import parse_capture
    from ..runners.console_log import check_outputs, console_cycles, run_entry

    path = Path(args.capture)
    log = parse_capture(path)
    if not log.recognised:
        raise UserError(
            f"{path} holds no run: none of its {log.line_count} lines is an "
            f"ExecuTorch or ML-kit log record, PMU report, output or failure; pass the "
            f"firmware's console capture (UART or FVP output)"
        )
    measured = console_cycles(log, path)
    check = check_outputs(log, Path(args.program), args.sample) if args.program else None
    cycle_check = _cycle_check(measured, Path(args.program)) if args.program else None
    entry = run_entry(log, path, measured, check, cycle_check)
    if args.json:
        print(json.dumps(entry, indent=2))
    else:
        print("\n".join(_summary(path, entry, log, check, cycle_check)))
    return 0 if entry["status"] in ("passed", "read") else 1


def _measured(cycles: dict) -> list[str]:
    if cycles["kind"] != "measured":
        return []
    figures = [
        f"{unit} {cycles[key]}"
        for unit, key in (("NPU", "npu_cycles"), ("CPU", "cpu_cycles"))
        if cycles[key] is not None
    ]
    return [
        f"  cycles per inference (measured): {', '.join(figures)}",
        *(f"  {name}: {count}" for name, count in cycles["counters"].items()),
    ]


def _summary(path: Path, entry: dict, log, check, cycle_check: CycleCheck | None) -> list[str]:
    """The terminal's lines for a run entry: verdict, measured cycles, what else was printed."""
    lines = [f"{path}: {entry['verdict']}", *_measured(entry["cycles"])]
    if cycle_check is not None:
        lines += [f"  {line}" for line in cycle_check_lines(cycle_check)]
    if log.outputs:
        lines.append(
            f"  outputs printed: {', '.join(str(len(v)) for v in log.outputs)} value(s)"
            f"{' (some skipped by the firmware)' if log.outputs_elided else ''}"
        )
    if log.top_classes:
        lines.append(f"  top classes: {', '.join(str(c) for c, _ in log.top_classes)}")
    if log.inference_ms is not None:
        lines.append(f"  inference: {log.inference_ms:g} ms (as the firmware timed it)")
    if check is not None:
        lines.append(f"  outputs: {check.note}")
    return lines


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "log", help="read a console capture (UART or FVP) of a run made outside etk"
    )
    parser.add_argument("capture", metavar="CAPTURE", help="the saved console output")
    parser.add_argument(
        "--program",
        metavar="OUT/VARIANT",
        help="compare the printed outputs with this program's host reference",
    )
    parser.add_argument(
        "--sample", type=int, default=0, help="the evaluation sample the firmware ran (default 0)"
    )
    parser.add_argument("--json", action="store_true", help="print the run entry as JSON")
    parser.set_defaults(func=_log)
