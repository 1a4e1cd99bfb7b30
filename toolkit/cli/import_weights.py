"""`etk import-weights MODEL.tflite --into file.py:Class -o model.pt2`: trained weights from a
.tflite file into the matching PyTorch architecture."""

from __future__ import annotations

from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "import-weights",
        help="load a .tflite file's trained weights into a PyTorch model",
        description="Dequantizes the file's conv/depthwise/fully-connected weights and biases "
        "(per-channel scales) into the model's Conv2d/Linear layers, paired in order "
        "(file: operator order; model: the order a forward pass runs them). Batch "
        "norm is folded into the file's biases: the model's layers need bias=True.",
    )
    parser.add_argument("tflite", type=Path, metavar="MODEL.tflite")
    parser.add_argument(
        "--into",
        required=True,
        metavar="FILE.py:CLASS",
        help="the PyTorch architecture (a class or factory function)",
    )
    parser.add_argument(
        "--input-shape",
        help="input shape(s), e.g. 1,1,49,10 (default: the file's example_inputs())",
    )
    parser.add_argument(
        "-o",
        "--out",
        type=Path,
        default=Path("model.pt2"),
        help="the .pt2 file to write (default model.pt2)",
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..models.import_weights import export_with_tflite_weights

    out = export_with_tflite_weights(args.tflite, args.into, args.out, args.input_shape)
    print(f"wrote {out}: {args.into} with the weights of {args.tflite.name}")
    return 0
