"""Our cycle model against published FVP figures (../shared/cycle-anchors): per anchor the
published NPU TOTAL, our prediction, Vela's estimate, both ratios and the AXI beats; then the
geometric mean |log ratio| of ours and of Vela's.

    python scripts/bench_cycle_truth.py [--anchors DIR] [--out DIR]

Source models are compiled here by the installed Vela (5.2.0 as pinned) with the ini the
published stream was compiled with (so the stream is that Vela's, not the published Vela 3.x
one); the Vela-compiled file is loaded and run as it is (its stream is the published one). Our figure is the simulator's
run.cycles.total_cycles (the prediction of the FVP's NPU TOTAL).
"""

from __future__ import annotations

import argparse
import math
import tempfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

from toolkit.lower.tflite import compile_tflite
from toolkit.npu import npu_config, vendor_npu_config
from toolkit.sim import load_payload, simulate
from toolkit.sim.vela_tflite import load_compiled_tflite


@dataclass(frozen=True)
class Anchor:
    model: str
    accelerator: str
    ini: str
    system_config: str
    memory_mode: str
    published_total: int
    published_beats: tuple[int, int, int] | None  # AXI0 read, AXI0 write, AXI1 read
    stream: str  # "published" or the Vela that compiled the published one
    vela_total: int | None = None  # Vela's own published estimate (for a compiled file)


MLEK = ("mlek_default_vela_2021-12.ini", "Ethos_U55_High_End_Embedded", "Shared_Sram")
ANCHORS = (  # ../shared/cycle-anchors/README.md
    Anchor(
        "kws_micronet_m.tflite",
        "ethos-u55-128",
        *MLEK,
        414_172,
        (132_130, 48_252, 17_544),
        "Vela 3.2.0",
    ),
    Anchor(
        "ad_medium_int8.tflite",
        "ethos-u55-128",
        *MLEK,
        968_172,
        (485_194, 138_111, 56_245),
        "Vela 3.2.0",
    ),
    Anchor(
        "mobilenet_v2_1.0_224_INT8.tflite",
        "ethos-u55-128",
        *MLEK,
        7_346_172,
        (2_468_259, 1_151_319, 432_351),
        "Vela 3.3.0",
    ),
    # Alif Ensemble board PMU (silicon, Alif's KWS, Vela 3.10): not the FVP's memory system
    Anchor(
        "kws_micronet_m.tflite",
        "ethos-u55-128",
        *MLEK,
        405_608,
        (125_388, 48_254, 17_493),
        "Vela 3.10 (Alif board)",
    ),
    Anchor(
        "person_int8_model_vela_mac64.tflite",
        "ethos-u55-64",
        "himax_we2_vela.ini",
        "My_Sys_Cfg",
        "My_Mem_Mode_Parent",
        479_093,
        None,
        "published",
        2_009_130,
    ),
)


def _zeros(program) -> list[np.ndarray]:
    return [np.zeros(t.squeezed_shape, t.dtype) for t in program.inputs]


def predict(anchor: Anchor, anchors: Path, out: Path) -> tuple[int, int, dict]:
    """(our NPU TOTAL prediction, Vela's estimate, our beats)."""
    ini = anchors / "configs" / anchor.ini
    npu = vendor_npu_config(
        npu_config(anchor.accelerator, anchor.system_config, anchor.memory_mode), ini, anchor.model
    )
    if anchor.stream == "published":
        programs = load_compiled_tflite(anchors / "models" / anchor.model).npu_programs
        vela = anchor.vela_total
    else:
        compiled = compile_tflite(anchors / "models" / anchor.model, npu, out / anchor.model)
        programs = [load_payload(d.vela_npz_path) for d in compiled.delegates]
        vela = sum(d.estimate.total_cycles for d in compiled.delegates)
    runs = [
        simulate(p, _zeros(p), npu.accelerator, npu.system_config, npu.memory_mode, str(ini))
        for p in programs
    ]
    beats = {k: sum(r.pmu.beats[k] for r in runs) for k in runs[0].pmu.beats}
    return sum(r.pmu.total for r in runs), vela, beats


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    found = [
        p / "shared" / "cycle-anchors"
        for p in (repo.parent, repo.parent.parent)
        if (p / "shared" / "cycle-anchors").is_dir()
    ]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--anchors",
        type=Path,
        required=not found,
        default=found[0] if found else None,
        help="the cycle-anchors folder (default: shared/ beside the repository)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="keep the compiled models here (default: a temporary folder, removed at the end)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="etk-cycle-truth-") as tmp:
        report(args.anchors, args.out or Path(tmp))


def report(anchors: Path, out: Path) -> None:
    print(
        "| model | stream | published NPU TOTAL | ours | Vela estimate | ours/published | "
        "Vela/published | beats AXI0 rd / AXI0 wr / AXI1 rd: ours vs published |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ours_log, vela_log = [], []
    installed = f"Vela {version('ethos-u-vela')}"
    for anchor in ANCHORS:
        ours, vela, beats = predict(anchor, anchors, out)
        ours_log.append(abs(math.log(ours / anchor.published_total)))
        vela_log.append(abs(math.log(vela / anchor.published_total)))
        mine = (beats["axi0_read"], beats["axi0_write"], beats["axi1_read"])
        if anchor.published_beats:
            beat_text = " / ".join(
                f"{m:,} vs {p:,} ({m / p:.3f}x)" for m, p in zip(mine, anchor.published_beats)
            )
        else:
            beat_text = " / ".join(f"{m:,}" for m in mine) + " (none published)"
        stream = (
            "published"
            if anchor.stream == "published"
            else f"{installed} (published: {anchor.stream})"
        )
        print(
            f"| {anchor.model} | {stream} | {anchor.published_total:,} | {ours:,} | "
            f"{vela:,} | {ours / anchor.published_total:.3f} | "
            f"{vela / anchor.published_total:.3f} | {beat_text} |",
            flush=True,
        )

    def mean(logs, rows=None):
        logs = [v for v, a in zip(logs, ANCHORS) if rows is None or rows(a)]
        return math.exp(sum(logs) / len(logs)) - 1

    print(
        f"\ngeometric mean |log ratio| to the published NPU TOTAL: ours "
        f"{mean(ours_log):.1%}, Vela's estimate {mean(vela_log):.1%}; on the files {installed} "
        f"compiles here alone: ours {mean(ours_log, _recompiled):.1%}, Vela's "
        f"{mean(vela_log, _recompiled):.1%}"
    )


def _recompiled(anchor: Anchor) -> bool:
    return anchor.stream != "published"


if __name__ == "__main__":
    main()
