"""The zoo and the collection on Ethos-U85 (issue 47): bit-exact, refused, or a mismatch.

Each net is compiled through the toolkit's chain for corstone-320 (ethos-u85-256), int8 and a16w8,
fused and unfused; each delegate runs on our simulator and on the TOSA reference model on
full-range random inputs (2 seeded samples). On the other configurations the delegate's TOSA graph
is compiled again by Vela (the target's system config and memory mode), by default -128 and -512
for SUBSET and -1024 and -2048 for FEW. One row per net, quant, variant and configuration:

  bit-exact | refused: <the simulator's one-line reason> | MISMATCH: n of m values differ
  | compile failed: <line>

Usage: python scripts/u85_sweep.py [--nets A,B] [--quant int8,a16w8]
           [--accelerators ethos-u85-256,...] [--out table.json]
(ETK_CACHE_DIR shares compiles between runs.)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import re
import tempfile
import tomllib
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tosa.TosaGraph import TosaGraph

from toolkit.artifacts import Delegate
from toolkit.atomic_write import write_atomic
from toolkit.errors import UserError
from toolkit.job import Job
from toolkit.models.zoo import zoo_names
from toolkit.npu import npu_config
from toolkit.pipeline import run_job
from toolkit.runners.sim_check import refusal
from toolkit.runners.tosa_ref import run_tosa_delegate
from toolkit.sim import SimError, load_payload, simulate

COLLECTION = Path(__file__).parents[1] / "tests" / "collection"
SYSTEM, MODE = "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"  # targets/corstone-320.toml
HOME = "ethos-u85-256"  # what the chain compiles for corstone-320
SUBSET = (  # also on -128 and -512: conv nets, attention, recurrent, two inputs
    "ds_cnn",
    "resnet8",
    "mobilenet_v2_035",
    "squeezenet1_1",
    "keyword_transformer_block",
    "mha_keyword",
    "gru_keyword",
    "two_in_two_out",
    "tiny_unet",
)
FEW = ("ds_cnn", "mha_keyword", "gru_keyword")  # also on -1024 and -2048
SAMPLES = 2
_NUMPY = {3: np.int8, 4: np.int16, 5: np.int32}  # tosa DType INT8, INT16, INT32


class Row(NamedTuple):
    net: str
    quant: str
    variant: str
    accelerator: str
    result: str


def all_nets() -> dict[str, tuple[str, str | None]]:
    """name -> (MODEL spec, input shape): the zoo, then the collection (nets.toml)."""
    nets: dict[str, tuple[str, str | None]] = {n: (f"zoo:{n}", None) for n in zoo_names()}
    table = tomllib.loads((COLLECTION / "nets.toml").read_text())
    nets.update({n: (str(COLLECTION / spec), shape) for n, (spec, shape) in table.items()})
    return nets


def accelerators_for(net: str, chosen: list[str] | None) -> list[str]:
    if chosen:
        return chosen
    return [
        HOME,
        *(("ethos-u85-128", "ethos-u85-512") if net in SUBSET else ()),
        *(("ethos-u85-1024", "ethos-u85-2048") if net in FEW else ()),
    ]


def random_inputs(tosa: Path, rng: np.random.Generator) -> list[np.ndarray]:
    """Full-range random values for each input of the delegate's TOSA graph."""
    block = TosaGraph.GetRootAsTosaGraph(tosa.read_bytes(), 0).Regions(0).Blocks(0)
    tensors = {}
    for i in range(block.TensorsLength()):
        t = block.Tensors(i)
        tensors[t.Name().decode()] = (tuple(int(d) for d in t.ShapeAsNumpy()), t.Type())
    arrays = []
    for i in range(block.InputsLength()):
        shape, dtype = tensors[block.Inputs(i).decode()]
        info = np.iinfo(_NUMPY[dtype])
        arrays.append(rng.integers(info.min, info.max + 1, size=shape).astype(_NUMPY[dtype]))
    return arrays


def recompile(tosa: Path, accelerator: str, out: Path) -> Path:
    from ethosu.vela import vela

    flags = npu_config(accelerator, SYSTEM, MODE).vela_flags
    with contextlib.redirect_stdout(io.StringIO()):
        vela.main([*flags, "--output-format=raw", f"--output-dir={out}", str(tosa)])
    return out / f"{tosa.stem}_vela.npz"


def check_delegate(delegate: Delegate, accelerator: str) -> tuple[str | None, int, int]:
    """(the refusal or None, values differing, values compared) over SAMPLES random samples."""
    assert delegate.tosa_path is not None
    npu = npu_config(accelerator, SYSTEM, MODE)
    refused = refusal(delegate, npu)
    if refused:
        return refused, 0, 0
    payload = load_payload(delegate.payload or delegate.vela_npz_path)
    rng = np.random.default_rng(7)
    differ = total = 0
    for _ in range(SAMPLES):
        xs = random_inputs(delegate.tosa_path, rng)
        try:
            got = simulate(payload, xs, accelerator, SYSTEM, MODE).outputs
        except SimError as exc:  # should have been refused up front
            return f"during the run, delegate {delegate.index}: {exc}", 0, 0
        for g, w in zip(got, run_tosa_delegate(delegate, xs)):
            g, w = np.asarray(g).reshape(-1), np.asarray(w).reshape(-1)
            differ += int(np.count_nonzero(g != w)) if g.size == w.size else w.size
            total += w.size
    return None, differ, total


def verdict(delegates: list[Delegate], accelerator: str, out: Path) -> str:
    differ = total = 0
    for d in delegates:
        if accelerator != HOME:
            npz = recompile(d.tosa_path, accelerator, out / accelerator / str(d.index))
            d = dataclasses.replace(d, payload=b"", vela_npz_path=npz)
        refused, n, m = check_delegate(d, accelerator)
        if refused:
            return f"refused: {refused}"
        differ, total = differ + n, total + m
    return "bit-exact" if differ == 0 else f"MISMATCH: {differ} of {total} values differ"


def sweep_net(net, spec, shape, quant, accelerators, out: Path) -> list[Row]:
    job = Job(
        model=spec,
        input_shape=shape,
        target="corstone-320",
        quant=quant,
        calibration_samples=4,
        eval_samples=1,
        out_dir=out,
    )
    try:
        result = run_job(job)  # compiled, run on the host reference only
    except UserError as exc:
        line = f"compile failed: {str(exc).splitlines()[0]}"
        return [Row(net, quant, v, a, line) for v in job.variants for a in accelerators]
    rows = []
    for variant, vr in result.variants.items():
        for acc in accelerators:
            try:
                result_text = verdict(list(vr.program.delegates), acc, out / variant)
            except Exception as exc:  # noqa: BLE001 - a row says what broke, the sweep goes on
                result_text = f"compile failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"
            rows.append(Row(net, quant, variant, acc, result_text))
    return rows


def summary(rows: list[Row]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        kind = r.result.split(":")[0]
        if kind == "refused":  # by reason, without the delegate and offset
            reason = re.split(r" \(in | at command-stream", r.result.split(": ", 2)[-1])[0]
            kind = f"refused: {reason}"
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", help="comma-separated names (default: the zoo and collection)")
    parser.add_argument("--quant", default="int8,a16w8")
    parser.add_argument("--accelerators", help="comma-separated (default: by SUBSET and FEW)")
    parser.add_argument("--out", type=Path, help="write the table as JSON")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # the exporter's, once per net
    nets = all_nets()
    names = args.nets.split(",") if args.nets else list(nets)
    unknown = [n for n in names if n not in nets]
    if unknown:
        parser.error(f"unknown net(s) {', '.join(unknown)}: name zoo or nets.toml nets")
    chosen = args.accelerators.split(",") if args.accelerators else None
    rows: list[Row] = []
    print(f"{'net':<34}{'quant':<7}{'variant':<9}{'accelerator':<16}result", flush=True)
    with tempfile.TemporaryDirectory(prefix="u85-sweep-") as tmp:
        for net in names:
            for quant in args.quant.split(","):
                spec, shape = nets[net]
                out = Path(tmp) / f"{net}-{quant}"
                for row in sweep_net(net, spec, shape, quant, accelerators_for(net, chosen), out):
                    rows.append(row)
                    print(f"{row.net:<34}{row.quant:<7}{row.variant:<9}{row.accelerator:<16}"
                          f"{row.result}", flush=True)  # fmt: skip
                if args.out:
                    table = {"rows": [r._asdict() for r in rows], "counts": summary(rows)}
                    write_atomic(args.out, json.dumps(table, indent=1) + "\n")
    print()
    for kind, n in summary(rows).items():
        print(f"{n:>5}  {kind}")


if __name__ == "__main__":
    main()
