"""The KWS data (examples/data/kws-speech-commands, CC BY 4.0) as --calibration-data and
--eval-data folders: OUT/calibration/{x,y}.npy and OUT/eval/{x,y}.npy.

The files store int8 MFCC features quantized with kws_ref_model.tflite's input parameters; the
models take float features: x = (q - 83) * 0.5847029 (the file's input zero point and scale, read
from the file), in the model's input layout (NCHW (N, 1, 49, 10) by default, NHWC with
--layout nhwc). The split is a seeded permutation: --calibration N samples, the rest for eval.

    python scripts/kws_eval_data.py --out kws-data [--calibration 200] [--split-seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "examples" / "data" / "kws-speech-commands"
REFERENCE = REPO / "toolkit" / "models" / "zoo" / "weights" / "kws_ref_model.tflite"


def input_quantization(path: Path = REFERENCE) -> tuple[float, int]:
    from ethosu.vela.tflite.Model import Model

    graph = Model.GetRootAs(path.read_bytes(), 0).Subgraphs(0)
    quant = graph.Tensors(graph.Inputs(0)).Quantization()
    return float(quant.Scale(0)), int(quant.ZeroPoint(0))


def float_features(codes: np.ndarray, layout: str = "nchw") -> np.ndarray:
    scale, zero_point = input_quantization()
    x = (codes.astype(np.float32) - zero_point) * np.float32(scale)  # NHWC (N, 49, 10, 1)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2) if layout == "nchw" else x)


def write_split(
    out: Path, calibration: int = 200, split_seed: int = 0, layout: str = "nchw"
) -> None:
    x = float_features(np.load(DATA / "kws_x_int8.npy"), layout)
    y = np.load(DATA / "kws_y.npy")
    order = np.random.default_rng(split_seed).permutation(len(y))
    for name, picked in (("calibration", order[:calibration]), ("eval", order[calibration:])):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "x.npy", x[np.sort(picked)])
        np.save(folder / "y.npy", y[np.sort(picked)])
    (out / "ATTRIBUTION.txt").write_text(
        "Derived from Speech Commands v2, Pete Warden, Google, CC BY 4.0 "
        "(https://creativecommons.org/licenses/by/4.0/); MFCC features from the MLPerf Tiny "
        "KWS evaluation set (EEMBC EnergyRunner datasets/kws01).\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calibration", type=int, default=200)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--layout", choices=("nchw", "nhwc"), default="nchw")
    args = parser.parse_args()
    write_split(args.out, args.calibration, args.split_seed, args.layout)
    print(
        f"wrote {args.out}/calibration ({args.calibration} samples) and {args.out}/eval "
        f"({1000 - args.calibration}), {args.layout}"
    )


if __name__ == "__main__":
    main()
