"""`etk diff A B`: two compiled programs' NPU operations side by side, register by register."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UserError
from ..lower.pte_file import ethos_u_payloads

# the simulator package is also the command-stream decoder (payloads, registers, Vela .tflite)
from ..sim import load_payload
from ..sim.diff import diff_programs
from ..sim.payload import NpuProgram


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="compare two compiled programs' NPU operations register by register",
        description="A and B: .pte files, Vela _vela.npz files, or compile output folders. A "
        ".pte whose Vela blocks ExecuTorch stored as named data is read with the .ptd files "
        "beside it.",
    )
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument(
        "--delegate",
        type=int,
        default=0,
        help="which NPU delegate of a multi-delegate program (default 0)",
    )
    parser.add_argument(
        "--addresses",
        action="store_true",
        help="also compare base addresses (usually differ after any change)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    a = load_command_stream(args.a, args.delegate)
    b = load_command_stream(args.b, args.delegate)
    rows = diff_programs(a, b, ignore_addresses=not args.addresses)
    same = sum(r.same for r in rows)
    only_a = sum(r.b is None for r in rows)
    only_b = sum(r.a is None for r in rows)
    changed = len(rows) - same - only_a - only_b
    print(f"A: {args.a}\nB: {args.b}")
    for r in rows:
        if r.a is None:
            assert r.b is not None  # diff_programs: each row has an operation on one side at least
            print(f"  +B  #{r.b.number:<4} {r.b.kind:<18} @{r.b.offset:#07x}  only in B")
        elif r.b is None:
            print(f"  -A  #{r.a.number:<4} {r.a.kind:<18} @{r.a.offset:#07x}  only in A")
        elif r.changed:
            regs = ", ".join(f"{n} {_fmt(va)}->{_fmt(vb)}" for n, va, vb in r.changed)
            print(
                f"  ~   #{r.a.number:<4} {r.a.kind:<18} @{r.a.offset:#07x}/{r.b.offset:#07x}  {regs}"
            )
        else:
            print(f"  =   #{r.a.number:<4} {r.a.kind:<18} @{r.a.offset:#07x}/{r.b.offset:#07x}")
    print(
        f"{len(rows)} operations: {same} same, {changed} differ in registers, "
        f"{only_a} only in A, {only_b} only in B"
    )
    return 0


def _fmt(value: int | None) -> str:
    return "unset" if value is None else str(value)


def load_command_stream(path: Path, delegate: int = 0) -> NpuProgram:
    if path.is_dir():
        candidates = sorted(path.glob("**/*_vela.npz")) or sorted(path.glob("**/*.pte"))
        if not candidates:
            raise UserError(f"{path}: no *_vela.npz or .pte in this folder")
        if len(candidates) <= delegate:
            raise UserError(f"{path}: no delegate {delegate} ({len(candidates)} found)")
        path = candidates[delegate] if candidates[0].suffix == ".npz" else candidates[0]
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if path.suffix == ".pte":
        streams = ethos_u_payloads(path)
        if len(streams) <= delegate:
            raise UserError(f"{path}: has {len(streams)} Ethos-U delegates, no delegate {delegate}")
        return load_payload(streams[delegate])
    if path.suffix == ".npz":
        return load_payload(path)
    raise UserError(f"{path}: expected a .pte, a _vela.npz or a compile output folder")
