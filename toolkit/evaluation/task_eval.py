"""Task accuracy on labelled data: the float model, a compiled variant, a .tflite file.

Classifiers get top-1; a model whose output has its input's shape is an autoencoder and gets the
ROC AUC of its reconstruction error (anomaly detection). Compiled programs run one sample at a
time (their batch is 1) on the simulator, which executes Vela's command stream bit-exactly, or on
the TOSA reference model where the simulator does not model the NPU; the float model runs in
batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..artifacts import Program
from .eval_data import LabelledData, sample_shape
from .task_metrics import reconstruction_scores, roc_auc, top1

FLOAT_BATCH = 256


@dataclass(frozen=True)
class TaskAccuracy:
    metric: str  # "top1" or "auc"
    value: float
    samples: int
    runner: str  # "float (PyTorch)", "sim", "tosa-ref"


def task_metric(input_shape: tuple[int, ...], output_shape: tuple[int, ...]) -> str:
    return "auc" if sample_shape(output_shape) == sample_shape(input_shape) else "top1"


def data_windows(data: LabelledData, input_shape: tuple[int, ...]) -> np.ndarray:
    """(N, W, *sample): one window per clip unless x.npy holds several."""
    sample = sample_shape(input_shape)
    return data.x if data.x.ndim == 2 + len(sample) else data.x[:, None]


def _score(metric: str, data: LabelledData, windows: np.ndarray, outputs: np.ndarray) -> float:
    if metric == "top1":
        return top1(outputs, data.y)
    return roc_auc(reconstruction_scores(windows, outputs), data.y)


def float_accuracy(
    module, data: LabelledData, input_shape: tuple[int, ...], metric: str
) -> TaskAccuracy:
    windows = data_windows(data, input_shape)
    flat = torch.from_numpy(windows.reshape(-1, *sample_shape(input_shape)))
    with torch.no_grad():
        if tuple(input_shape[:1]) == (1,):  # a batch axis: batches of FLOAT_BATCH
            batches = [module(flat[i : i + FLOAT_BATCH]) for i in range(0, len(flat), FLOAT_BATCH)]
            stacked = torch.cat(batches)
        else:  # none: one sample at a time
            stacked = torch.stack([module(x) for x in flat])
    outputs = stacked.numpy().reshape(len(windows), windows.shape[1], -1)
    outputs = outputs[:, 0] if metric == "top1" else outputs.reshape(windows.shape)
    return TaskAccuracy(
        metric, _score(metric, data, windows, outputs), len(data.y), "float (PyTorch)"
    )


def _to_program_input(program: Program, window: np.ndarray) -> np.ndarray:
    """A float input in the model's layout -> what the program takes: for a .tflite file, NHWC
    (if the model is NCHW) and quantized with the file's input parameters."""
    spec, quant = program.input_specs[0], program.input_quant[0]
    x = window[None]
    if x.shape != spec.shape and x.ndim == 4 and x.transpose(0, 2, 3, 1).shape == spec.shape:
        x = x.transpose(0, 2, 3, 1)
    if spec.dtype.startswith("int") and quant is not None:
        x = np.clip(np.round(x / quant.scale) + quant.zero_point, quant.qmin, quant.qmax)
    return np.ascontiguousarray(x.reshape(spec.shape), spec.dtype)


def _from_program_output(program: Program, output: np.ndarray, window_shape) -> np.ndarray:
    quant = program.output_quant[0]
    out = np.asarray(output)
    if program.graph_module is None and quant is not None:  # a .tflite file's raw int8 output
        out = (out.astype(np.float64) - quant.zero_point) * quant.scale
    if out.size == int(np.prod(window_shape)) and out.shape != tuple(window_shape):
        if out.ndim == 4 and out.transpose(0, 3, 1, 2).shape[1:] == tuple(window_shape):
            out = out.transpose(0, 3, 1, 2)
    return out.reshape(-1)


def program_accuracy(
    program: Program,
    runner,
    data: LabelledData,
    input_shape: tuple[int, ...],
    metric: str,
    label: str,
    target=None,
) -> TaskAccuracy:
    windows = data_windows(data, input_shape)
    outputs = program_outputs(program, runner, data, input_shape, label, target)
    outputs = outputs[:, 0] if metric == "top1" else outputs.reshape(windows.shape)
    return TaskAccuracy(metric, _score(metric, data, windows, outputs), len(data.y), runner.name)


def program_outputs(
    program: Program,
    runner,
    data: LabelledData,
    input_shape: tuple[int, ...],
    label: str,
    target=None,
) -> np.ndarray:
    """Float outputs (N, W, output elements), one run per window, with a progress bar."""
    windows = data_windows(data, input_shape)
    outputs = []
    console = Console(stderr=True)
    with Progress(
        TextColumn(f"[dim]... {label}: {runner.name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(label, total=len(windows))
        for clip in windows:
            outputs.append(
                [
                    _from_program_output(
                        program,
                        runner.run(program, [_to_program_input(program, w)], target).outputs[0],
                        w.shape,
                    )
                    for w in clip
                ]
            )
            bar.advance(task)
    return np.asarray(outputs)


def evaluation_runner(program: Program):
    """The simulator where it models the NPU (fast, bit-exact), else the TOSA reference model."""
    from ..runners.sim import SimulatorRunner
    from ..runners.tosa_ref import TosaReferenceRunner
    from ..sim import simulates

    if simulates(program.npu.accelerator) or program.graph_module is None:
        return SimulatorRunner()
    return TosaReferenceRunner()
