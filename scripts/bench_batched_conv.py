"""Whether the rewrite batched-1x1-conv-as-image pays on the installed Vela: per-token MLPs
(Linear, ReLU, Linear over N tokens, ExecuTorch's batched 1x1 convolutions), unfused (the ReLU
a CLAMP after the convolution, the case the rewrite takes), compiled for ethos-u55-128 two ways:

- batched: the default rewrites without it (Vela's own form);
- as image: the default rewrites and batched-1x1-conv-as-image.

    python scripts/bench_batched_conv.py

Prints NPU operations, Vela's estimate (NPU cycles), the simulator's NPU cycles and whether the
simulator's outputs equal the TOSA reference model's on 3 random inputs, per form.
"""

from __future__ import annotations

import tempfile
from importlib.metadata import version
from pathlib import Path

import torch
from torch import nn

from toolkit.artifacts import LoadedModel
from toolkit.lower.build_variant import compile_variant
from toolkit.quantize.calibration import random_calibration
from toolkit.rewrite_names import BATCHED_CONV, DEFAULT_REWRITES
from toolkit.runners.sim import SimulatorRunner
from toolkit.runners.tosa_ref import TosaReferenceRunner
from toolkit.targets import load_target

NETS = (
    (16, 32, 48, 6),
    (64, 32, 48, 6),
    (16, 128, 256, 128),
    (64, 128, 256, 128),
)  # tokens, features in, hidden, out


def _loaded(tokens: int, features: int, hidden: int, out: int) -> LoadedModel:
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, out)).eval()
    example = (torch.randn(1, tokens, features, generator=torch.Generator().manual_seed(0)),)
    name = f"token_mlp_{tokens}x{features}"
    return LoadedModel(f"bench:{name}", name, net, example, name)


def _measure(loaded: LoadedModel, form: str, out: Path) -> str:
    batched = tuple(r for r in DEFAULT_REWRITES if r != BATCHED_CONV)
    rewrites = batched if form == "batched" else (*batched, BATCHED_CONV)
    calibration = random_calibration(loaded.example_inputs, 4, 0)
    npu = load_target("corstone-300").npu()
    program = compile_variant(loaded, calibration, "unfused", npu, out, rewrites=rewrites)
    sim, reference = SimulatorRunner(), TosaReferenceRunner()
    exact, simulated = True, 0
    for seed in range(3):
        shape = loaded.example_inputs[0].shape
        sample = torch.randn(*shape, generator=torch.Generator().manual_seed(10 + seed)).numpy()
        run = sim.run(program, [sample])
        simulated = run.cycles.npu_cycles or 0
        exact &= bool((run.outputs[0] == reference.run(program, [sample]).outputs[0]).all())
    return (
        f"| {form} | {program.npu_ops} | "
        f"{program.delegates[0].estimate.npu_cycles:,} | {simulated:,} | "
        f"{'yes' if exact else 'NO'} |"
    )


def main() -> None:
    print(f"Vela {version('ethos-u-vela')}, ethos-u55-128 (corstone-300)\n")
    print(
        "| net (tokens x in -> hidden -> out) | form | NPU ops | Vela estimate | simulated |"
        " sim == TOSA ref |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for net in NETS:
            loaded = _loaded(*net)
            for form in ("batched", "as image"):
                row = _measure(loaded, form, Path(tmp) / f"{'x'.join(map(str, net))}{form}")
                print(f"| {net[0]} x {net[1]} -> {net[2]} -> {net[3]} {row}", flush=True)


if __name__ == "__main__":
    main()
