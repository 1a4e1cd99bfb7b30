"""The cycle gap between our PyTorch flow and the MLPerf Tiny reference TFLite models.

    python scripts/bench_tflite_gap.py --tflite-dir ../shared/reference-models/mlperf-tiny

For each of the four architectures, all for the same NPU and Vela options:
- whole networks: our zoo model with a softmax head (NHWC interface, default rewrites), fused and
  unfused, against the reference .tflite as it is (it ends in a softmax; the autoencoder has none);
- bodies: our zoo model as it is (it ends at the logits) against the reference without its final
  softmax.
Cycles by Vela's estimate and by our simulator's cycle model (the same model on both sides), NPU
operations, MACs, the MAC-bound lower limit (MACs / MACs per cycle), delegates and CPU operators.
NPU cycles are compute; totals add memory-bound time, mostly weight reads from flash, which depend
on how well the weights compress: trained reference weights compress better than our random ones,
so compare NPU cycles first. Vela's estimate charges our fused variant an activation cost it does
not charge the unfused one for the same NPU operations (see the README): read its fused column
with that in mind.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

# the tests' .tflite tools: the reference body without its softmax, our model with one
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from softmax_head import with_softmax  # noqa: E402
from tflite_edit import compile_without_softmax  # noqa: E402

from toolkit.console_capture import COMPILER_SIDE, quiet_torch_import  # noqa: E402

quiet_torch_import(
    COMPILER_SIDE
)  # torchao's import-time chatter, as etk does; before the imports below

from toolkit.errors import UserError  # noqa: E402
from toolkit.lower.build_variant import compile_variant  # noqa: E402
from toolkit.lower.tflite import compile_tflite  # noqa: E402
from toolkit.models.layout import channels_last_io  # noqa: E402
from toolkit.models.loader import load_model  # noqa: E402
from toolkit.quantize.calibration import random_calibration  # noqa: E402
from toolkit.runners.sim import SimulatorRunner  # noqa: E402
from toolkit.targets import load_target  # noqa: E402

REFERENCES = {
    "ds_cnn": "kws_ref_model.tflite",
    "mobilenet_v1_025": "vww_96_int8.tflite",
    "resnet8": "pretrainedResnet_quant.tflite",
    "fc_autoencoder": "ad01_int8.tflite",
}
COLUMNS = (
    "model",
    "NPU cycles (Vela est.)",
    "total cycles (Vela est.)",
    "NPU cycles (etk model)",
    "total cycles (etk model)",
    "NPU ops",
    "MACs",
    "MAC-bound cycles",
    "delegates",
    "CPU ops",
)


def simulated_cycles(program, inputs) -> tuple[int | None, int | None, str]:
    try:
        cycles = SimulatorRunner().run(program, inputs).cycles
    except UserError as exc:  # the simulator names what it does not implement
        return (
            None,
            None,
            "n/a (unimplemented op)" if "not implemented" in str(exc) else f"n/a ({exc})",
        )
    return cycles.npu_cycles, cycles.total_cycles, ""


def row(label, program, inputs, npu) -> tuple[list[str], int | None]:
    estimates = [d.estimate for d in program.delegates]
    macs = sum(e.macs for e in estimates)
    npu_cycles, total_cycles, why_not = simulated_cycles(program, inputs)
    simulated = (
        [f"{npu_cycles:,}", f"{total_cycles:,}"] if npu_cycles is not None else [why_not, ""]
    )
    cells = [
        label,
        f"{sum(e.npu_cycles for e in estimates):,}",
        f"{sum(e.total_cycles for e in estimates):,}",
        *simulated,
        str(program.npu_ops),
        f"{macs:,}",
        f"{macs // npu.macs:,}",
        str(len(program.delegates)),
        str(len(program.cpu_ops)),
    ]
    return cells, npu_cycles


def reference_programs(path: Path, npu, out: Path) -> dict:
    """Part -> (label, program): "whole" is the file as it is; "body" the file without its final
    softmax. A file without a softmax is its own body, listed once."""
    whole = compile_tflite(path, npu, out / "ref")
    body = compile_without_softmax(path, npu, out / "ref-body")
    if body is None:
        return {"body": (path.name, whole)}
    return {"whole": (path.name, whole), "body": (f"{path.stem} body (no softmax)", body)}


def compare_part(table, name, part, model, reference, npu, out, generator):
    """Rows for ours fused and unfused and the reference; returns fused / reference NPU cycles."""
    calibration = random_calibration(model.example_inputs, 8, 0)
    inputs = [x.numpy() for x in model.example_inputs]
    cycles = {}
    for variant in ("fused", "unfused"):
        program = compile_variant(model, calibration, variant, npu, out / f"{part}-{variant}")
        label = f"{name}{' + softmax' if part == 'whole' else ''} {variant}"
        cells, cycles[variant] = row(label, program, inputs, npu)
        table.add_row(*cells)
    label, ref_program = reference
    ref_inputs = [
        generator.integers(-128, 128, s.shape, dtype=np.int8) for s in ref_program.input_specs
    ]
    cells, ref_cycles = row(label, ref_program, ref_inputs, npu)
    table.add_row(*cells, end_section=part == "body")
    if cycles["fused"] is None or ref_cycles is None:
        return None
    return cycles["fused"] / ref_cycles, cycles["fused"], ref_cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tflite-dir", type=Path, required=True)
    parser.add_argument("--npu", default="ethos-u55-128")
    args = parser.parse_args()
    npu = load_target("corstone-300").npu(args.npu)
    table = Table(
        title=f"PyTorch flow vs TFLite reference, {npu.accelerator}, "
        f"{npu.system_config}, {npu.memory_mode}"
    )
    for column in COLUMNS:
        table.add_column(column, justify="right")
    verdicts = []
    generator = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, reference in REFERENCES.items():
            out = Path(tmp) / name
            references = reference_programs(args.tflite_dir / reference, npu, out)
            logits = channels_last_io(load_model(f"zoo:{name}"))
            models = {"whole": with_softmax(logits), "body": logits}
            for part, ref in references.items():
                result = compare_part(table, name, part, models[part], ref, npu, out, generator)
                if result is not None:
                    what = "body" if "whole" in references and part == "body" else "whole network"
                    ratio, ours, theirs = result
                    verdicts.append(
                        f"{name}, {what}: fused {ours:,} vs reference {theirs:,} "
                        f"NPU cycles by the etk cycle model ({ratio:.3f}x)"
                    )
    console = Console(width=220)
    console.print(table)
    for line in verdicts:
        console.print(line)


if __name__ == "__main__":
    main()
