"""The cycle gap between our PyTorch flow and the MLPerf Tiny reference TFLite models.

    python scripts/bench_tflite_gap.py --tflite-dir ../shared/reference-models/mlperf-tiny

For each of the four architectures: our zoo model (NHWC interface, default rewrites) fused and
unfused, and the reference .tflite compiled by Vela as it is, all for the same NPU and Vela
options. Cycles by Vela's estimate and by our simulator's cycle model (the same model on both
sides; "n/a" where the simulator does not implement an operation), NPU operations, MACs, the
MAC-bound lower limit (MACs / MACs per cycle), delegates and CPU operators.
Trained reference weights compress better than our random ones, so compare NPU cycles first.
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
from toolkit.models.layout import channels_last_io
from toolkit.models.loader import load_model
from toolkit.quantize.calibration import random_calibration
from toolkit.runners.sim import SimulatorRunner
from toolkit.targets import load_target

REFERENCES = {"ds_cnn": "kws_ref_model.tflite", "mobilenet_v1_025": "vww_96_int8.tflite",
              "resnet8": "pretrainedResnet_quant.tflite", "fc_autoencoder": "ad01_int8.tflite"}


def simulated_cycles(program, inputs) -> str:
    try:
        return f"{SimulatorRunner().run(program, inputs).cycles.npu_cycles:,}"
    except UserError as exc:  # the simulator names what it does not implement
        return "n/a (unimplemented op)" if "not implemented" in str(exc) else f"n/a ({exc})"


def row(label, program, inputs, npu) -> list[str]:
    estimates = [d.estimate for d in program.delegates]
    macs = sum(e.macs for e in estimates)
    return [label, f"{sum(e.npu_cycles for e in estimates):,}",
            f"{sum(e.total_cycles for e in estimates):,}", simulated_cycles(program, inputs),
            str(program.npu_ops), f"{macs:,}", f"{macs // npu.macs:,}",
            str(len(program.delegates)), str(len(program.cpu_ops))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tflite-dir", type=Path, required=True)
    parser.add_argument("--npu", default="ethos-u55-128")
    args = parser.parse_args()
    npu = load_target("corstone-300").npu(args.npu)
    table = Table(title=f"PyTorch flow vs TFLite reference, {npu.accelerator}, "
                        f"{npu.system_config}, {npu.memory_mode}")
    for column in ("model", "NPU cycles (Vela est.)", "total cycles (Vela est.)",
                   "NPU cycles (etk sim model)", "NPU ops", "MACs", "MAC-bound cycles",
                   "delegates", "CPU ops"):
        table.add_column(column, justify="right")
    generator = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as out:
        for name, reference in REFERENCES.items():
            model = channels_last_io(load_model(f"zoo:{name}"))
            calibration = random_calibration(model.example_inputs, 8, 0)
            inputs = [x.numpy() for x in model.example_inputs]
            for variant in ("fused", "unfused"):
                program = compile_variant(model, calibration, variant, npu,
                                          Path(out) / name)
                table.add_row(*row(f"{name} {variant}", program, inputs, npu))
            ref = compile_tflite(args.tflite_dir / reference, npu, Path(out) / f"{name}-ref")
            ref_inputs = [generator.integers(-128, 128, s.shape, dtype=np.int8)
                          for s in ref.input_specs]
            table.add_row(*row(f"{reference}", ref, ref_inputs, npu), end_section=True)
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
