"""One start for many samples, on stand-ins that charge a start-up time (issue 50's goals).

FVP: the stand-in FVP (tests/stand_ins/fake_fvp.py) in ExecuTorch's semihosting server mode,
charging --startup-s per launch and --inference-s per inference, counting its launches. Board:
the board emulator (tests/stand_ins/board_emulator.py) running a bundle of test sets, charging
--startup-s per boot and --inference-s per test set, behind a real pty.

Each prints, from one run: the wall time of N samples, the wall time of one start with one
sample (T1), and the bound "one start plus N inferences" = T1 + (N - 1) x one inference (for the
board an inference is the charge plus printing its outputs at the UART's pace), with the ratio
(goal: at most 1.2) and the starts counted. These are stand-ins: their times say how much the
toolkit adds around a start, nothing about a real FVP or board.

python scripts/bench_one_start.py [--samples 100] [--startup-s 2] [--inference-s 0.02]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
STAND_INS = REPO / "tests" / "stand_ins"
sys.path.insert(0, str(STAND_INS))
SERVER_ELF = b"\x7fELF stand-in runner\x00--server_mode\x00SERVER_INFERENCE_DONE %d\x00"


def _fake_fvp():
    spec = importlib.util.spec_from_file_location("etk_fake_fvp", STAND_INS / "fake_fvp.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["etk_fake_fvp"] = module
    spec.loader.exec_module(module)
    return module


def _program(root: Path):
    """A tiny compiled program (zoo:linear_relu, fused) and its host reference runner."""
    from toolkit.job import Job
    from toolkit.pipeline import run_job

    result = run_job(Job(model="zoo:linear_relu", variants=("fused",), out_dir=root / "compiled",
                         eval_samples=1))  # fmt: skip
    return result.variants["fused"].program


def _samples(program, n: int) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(0)
    return [
        tuple(rng.standard_normal(s.shape).astype(s.dtype) for s in program.input_specs)
        for _ in range(n)
    ]


def _expected(program, samples) -> list[tuple[np.ndarray, ...]]:
    from toolkit.runners.sim import SimulatorRunner

    return [SimulatorRunner().run(program, list(s)).outputs for s in samples]


def bench_fvp(root: Path, program, samples, expected, args) -> None:
    from toolkit.runners.fvp import FvpRunner
    from toolkit.targets import load_target

    fake = _fake_fvp()
    elf = root / "arm_executor_runner"
    elf.write_bytes(SERVER_ELF)
    folder = root / "fvp-samples"
    folder.mkdir()
    for k, (sample, outputs) in enumerate(zip(samples, expected)):
        for n, array in enumerate(sample):
            np.save(folder / f"in-{k}-{n}.npy", array)
        for n, array in enumerate(outputs):
            np.save(folder / f"out-{k}-{n}.npy", array)
    launches = root / "launches.txt"
    os.environ.update(
        ETK_FVP_PATH=str(fake.install(root / "fvp-bin")),
        ETK_RUNNER_ELF=str(elf),
        ETK_FAKE_FVP_SAMPLES=str(folder),
        ETK_FAKE_FVP_LAUNCHES=str(launches),
        ETK_FAKE_FVP_STARTUP_S=str(args.startup_s),
        ETK_FAKE_FVP_INFERENCE_S=str(args.inference_s),
    )
    target = load_target("corstone-300")
    runner = FvpRunner(run_root=root / "fvp-run", time_limit_s=120)
    start = time.monotonic()
    runner.run_samples(program, samples[:1], target)
    one = time.monotonic() - start
    launches.unlink()
    start = time.monotonic()
    batch = runner.run_samples(program, samples, target)
    wall = time.monotonic() - start
    count = len(launches.read_text().splitlines())
    bound = one + (len(samples) - 1) * args.inference_s
    ok = sum(r is not None for r in batch.runs)
    print(f"FVP stand-in (server mode), {len(samples)} samples: {wall:.2f} s in {count} launch(es), "
          f"{ok} ran; one launch with one sample T1 = {one:.2f} s; T1 + {len(samples) - 1} x "
          f"{args.inference_s:g} s = {bound:.2f} s; ratio {wall / bound:.3f} (goal <= 1.2)")  # fmt: skip
    k = min(5, len(samples))
    start = time.monotonic()
    FvpRunner(run_root=root / "fvp-off", time_limit_s=120, one_start="off").run_samples(
        program, samples[:k], target
    )
    per = (time.monotonic() - start) / k
    print(f"  for comparison, one launch per sample: {per:.2f} s per sample ({k} measured), "
          f"~{per * len(samples):.0f} s for {len(samples)}")  # fmt: skip


def _board_target(root: Path, emulator) -> Path:
    import shlex

    tool = shlex.join([sys.executable, str(STAND_INS / "board_flash.py")])
    flash = emulator.flash_dir
    path = root / "board.toml"
    path.write_text(
        'name = "emulated"\n[npu]\ndefault = "ethos-u55-128"\nsupported = ["ethos-u55-128"]\n'
        f'[board]\nname = "emulated board"\nport = "{emulator.port}"\n'
        f"flash = '{tool} flash {flash} {{bpte}} {{port}}'\n"
        f"reset = \"command\"\nreset_command = '{tool} reset {flash}'\n"
        'test_sets = "all"\nbanner_time_limit_s = 60\nrun_time_limit_s = 60\n'
    )
    return path


def bench_board(root: Path, program, samples, expected, args) -> None:
    from board_emulator import BoardEmulator

    from toolkit.runners.serial import SerialRunner
    from toolkit.targets import load_target

    emulator = BoardEmulator(root / "board", [program], engine="expected", test_sets="all",
                             boot_s=args.startup_s, inference_s=args.inference_s)  # fmt: skip
    with emulator:
        target = load_target(str(_board_target(root, emulator)))
        runner = SerialRunner(run_root=root / "board-run")
        start = time.monotonic()
        runner.run_samples(program, samples[:1], target, expected[:1])
        one = time.monotonic() - start
        one_bytes = len(emulator.sent[-1])
        boots = emulator.boots
        start = time.monotonic()
        batch = runner.run_samples(program, samples, target, expected)
        wall = time.monotonic() - start
        starts = emulator.boots - boots
        per_sample_bytes = (len(emulator.sent[-1]) - one_bytes) / max(len(samples) - 1, 1)
    uart_s = per_sample_bytes * 10 / emulator.baud
    inference = args.inference_s + uart_s
    bound = one + (len(samples) - 1) * inference
    ok = sum(r is not None for r in batch.runs)
    print(f"board stand-in (bundle of test sets), {len(samples)} samples: {wall:.2f} s in "
          f"{starts} start(s), {ok} ran; one start with one sample T1 = {one:.2f} s; T1 + "
          f"{len(samples) - 1} x {inference:.4f} s ({args.inference_s:g} s charge + "
          f"{per_sample_bytes:.0f} bytes at the UART's pace) = {bound:.2f} s; ratio "
          f"{wall / bound:.3f} (goal <= 1.2)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--startup-s", type=float, default=2.0, help="charged per start")
    parser.add_argument("--inference-s", type=float, default=0.02, help="charged per inference")
    parser.add_argument("--only", choices=("fvp", "board"), help="one of the two")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="etk-bench-one-start-") as tmp:
        root = Path(tmp)
        program = _program(root)
        samples = _samples(program, args.samples)
        expected = _expected(program, samples)
        if args.only != "board":
            bench_fvp(root, program, samples, expected, args)
        if args.only != "fvp":
            bench_board(root, program, samples, expected, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
