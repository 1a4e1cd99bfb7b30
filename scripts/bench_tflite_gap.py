"""The cycle gap between our PyTorch flow and the MLPerf Tiny reference TFLite models.

    python scripts/bench_tflite_gap.py --tflite-dir ../shared/reference-models/mlperf-tiny

For each of the four architectures: our zoo model (NHWC interface, default rewrites) fused and
unfused; the reference .tflite compiled by Vela as it is; and the reference without its final
softmax ("body"), which is the network our zoo models are (they end at the logits). All for the
same NPU and Vela options. Cycles by Vela's estimate and by our simulator's cycle model (the same
model on both sides; "n/a" where the simulator does not implement an operation, such as the
softmax's lookup tables), NPU operations, MACs, the MAC-bound lower limit (MACs / MACs per cycle),
delegates and CPU operators. NPU cycles are compute; totals add memory-bound time, mostly weight
reads from flash, which depend on how well the weights compress: trained reference weights
compress better than our random ones, so compare NPU cycles first.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from toolkit.errors import UserError
from toolkit.lower.compile import compile_variant
from toolkit.lower.tflite import compile_tflite
from toolkit.lower.tflite_edit import compile_without_softmax
from toolkit.models.layout import channels_last_io
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.runners.sim import SimulatorRunner
from toolkit.targets import load_target

REFERENCES = {"ds_cnn": "kws_ref_model.tflite", "mobilenet_v1_025": "vww_96_int8.tflite",
              "resnet8": "pretrainedResnet_quant.tflite", "fc_autoencoder": "ad01_int8.tflite"}
COLUMNS = ("model", "NPU cycles (Vela est.)", "total cycles (Vela est.)",
           "NPU cycles (etk model)", "total cycles (etk model)", "NPU ops", "MACs",
           "MAC-bound cycles", "delegates", "CPU ops")


def simulated_cycles(program, inputs) -> tuple[int | None, int | None, str]:
    try:
        cycles = SimulatorRunner().run(program, inputs).cycles
    except UserError as exc:  # the simulator names what it does not implement
        return None, None, "n/a (unimplemented op)" if "not implemented" in str(exc) else \
            f"n/a ({exc})"
    return cycles.npu_cycles, cycles.total_cycles, ""


def row(label, program, inputs, npu) -> tuple[list[str], int | None]:
    estimates = [d.estimate for d in program.delegates]
    macs = sum(e.macs for e in estimates)
    npu_cycles, total_cycles, why_not = simulated_cycles(program, inputs)
    simulated = [f"{npu_cycles:,}", f"{total_cycles:,}"] if npu_cycles is not None else \
        [why_not, ""]
    cells = [label, f"{sum(e.npu_cycles for e in estimates):,}",
             f"{sum(e.total_cycles for e in estimates):,}", *simulated,
             str(program.npu_ops), f"{macs:,}", f"{macs // npu.macs:,}",
             str(len(program.delegates)), str(len(program.cpu_ops))]
    return cells, npu_cycles


def reference_programs(path: Path, npu, out: Path):
    """(label, program) for the reference file and, if it ends in a softmax, its body."""
    programs = [(path.name, compile_tflite(path, npu, out / "ref"))]
    body = compile_without_softmax(path, npu, out / "ref-body")
    if body is not None:
        programs.append((f"{path.stem} body (no softmax)", body))
    return programs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tflite-dir", type=Path, required=True)
    parser.add_argument("--npu", default="ethos-u55-128")
    args = parser.parse_args()
    npu = load_target("corstone-300").npu(args.npu)
    table = Table(title=f"PyTorch flow vs TFLite reference, {npu.accelerator}, "
                        f"{npu.system_config}, {npu.memory_mode}")
    for column in COLUMNS:
        table.add_column(column, justify="right")
    verdicts = []
    generator = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, reference in REFERENCES.items():
            out = Path(tmp) / name
            model = channels_last_io(load_model(f"zoo:{name}"))
            calibration = random_calibration(model.example_inputs, 8, 0)
            inputs = [x.numpy() for x in model.example_inputs]
            ours = {}
            for variant in ("fused", "unfused"):
                program = compile_variant(model, calibration, variant, npu, out / variant)
                cells, ours[variant] = row(f"{name} {variant}", program, inputs, npu)
                table.add_row(*cells)
            references = reference_programs(args.tflite_dir / reference, npu, out)
            for i, (label, program) in enumerate(references):
                ref_inputs = [generator.integers(-128, 128, s.shape, dtype=np.int8)
                              for s in program.input_specs]
                cells, body_cycles = row(label, program, ref_inputs, npu)
                table.add_row(*cells, end_section=i == len(references) - 1)
            if body_cycles is not None and ours["fused"] is not None:
                verdicts.append(f"{name}: fused {ours['fused']:,} vs reference body "
                                f"{body_cycles:,} NPU cycles by the etk cycle model "
                                f"({ours['fused'] / body_cycles:.3f}x)")
    console = Console(width=220)
    console.print(table)
    for line in verdicts:
        console.print(line)


if __name__ == "__main__":
    main()
