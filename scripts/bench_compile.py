"""Wall time of `etk compare MODEL` split by stage, and what a second compile in-process costs.

python scripts/bench_compile.py [zoo:ds_cnn]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from toolkit.console_capture import quiet_torch_import

quiet_torch_import()  # torchao's import-time chatter, as etk does; before the imports below

from toolkit.compare.evaluate import evaluate_on_host, evaluation_inputs, float_outputs  # noqa: E402
from toolkit.lower.build_variant import compile_variant  # noqa: E402
from toolkit.models.loader import load_model  # noqa: E402
from toolkit.quantize.calibration import random_calibration  # noqa: E402
from toolkit.runners.tosa_ref import TosaReferenceRunner  # noqa: E402
from toolkit.targets import load_target  # noqa: E402


def main(spec: str = "zoo:ds_cnn") -> None:
    npu = load_target("corstone-300").npu()
    start = time.perf_counter()
    model = load_model(spec)
    load_s = time.perf_counter() - start
    calibration = random_calibration(model.example_inputs, 8, 0)
    inputs = evaluation_inputs(model, 8, 0)
    floats = float_outputs(model, inputs)
    table = Table(title=f"etk compare {spec} ({npu.accelerator}), seconds")
    stages = ("quantize", "lower", "reports", "host run", "second compile")
    for column in ("variant", "load", *stages):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as out:
        for variant in ("fused", "unfused"):
            program = compile_variant(model, calibration, variant, npu, Path(out))
            t = time.perf_counter()
            evaluate_on_host(program, TosaReferenceRunner(), inputs, floats)
            host_s = time.perf_counter() - t
            t = time.perf_counter()
            compile_variant(model, calibration, variant, npu, Path(out))  # cache hit
            again_s = time.perf_counter() - t
            table.add_row(
                variant,
                f"{load_s:.2f}",
                *(f"{program.timings.get(s, 0):.2f}" for s in stages[:3]),
                f"{host_s:.2f}",
                f"{again_s:.4f}",
            )
            load_s = 0.0
    Console().print(table)


if __name__ == "__main__":
    main(*sys.argv[1:])
