"""ExecuTorch's own Vela run of each delegate, kept: the payload in the .pte and the figures in
our report come from one Vela run.

ExecuTorch's Ethos-U backend calls `arm_vela.vela_compile` once per delegate and keeps only the
packed payload. While lowering we wrap that call: Vela runs in a folder of ours with the report
flags added (they change no output, only add CSVs), and we note the payload it returned, which
is how a run is matched to its delegate afterwards.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..console_capture import capture_fds
from ..errors import ToolError

REPORT_FLAGS = ("--verbose-performance",)
VELA_STEM = "out"  # vela_compile writes the TOSA graph as out.tosa


@dataclass(frozen=True)
class VelaRun:
    folder: Path  # out.tosa, output/ (out_vela.npz and the CSV reports), vela.log
    payload: bytes  # the vela_bin_stream that went into the .pte


@contextmanager
def recorded_vela_runs(root: Path):
    """Yields the list of VelaRun, filled as ExecuTorch compiles delegates. `root` must be a
    path without spaces: ExecuTorch joins Vela's arguments and splits them on spaces."""
    from executorch.backends.arm.ethosu import backend

    original = backend.vela_compile
    runs: list[VelaRun] = []

    def recording(
        tosa_flatbuffer, args, verbose=False, intermediate_path=None, block_placements=None
    ):
        folder = root / f"vela_run{len(runs)}"
        folder.mkdir(parents=True)
        error = None
        with capture_fds() as log:
            try:
                result = original(
                    tosa_flatbuffer,
                    [*args, *REPORT_FLAGS],
                    verbose=verbose,
                    intermediate_path=str(folder),
                    block_placements=block_placements,
                )
            except (Exception, SystemExit) as exc:  # Vela's argument parser exits
                error = exc
        (folder / "vela.log").write_text(log.text)
        if error is not None:
            tail = " | ".join(log.text.strip().splitlines()[-3:])
            raise ToolError(f"Vela failed ({type(error).__name__}: {error}): {tail}") from error
        runs.append(VelaRun(folder, result.processed_bytes))
        return result

    backend.vela_compile = recording
    try:
        yield runs
    finally:
        backend.vela_compile = original


def keep_vela_run(runs: list[VelaRun], payload: bytes, index: int, work_dir: Path) -> Path:
    """Copy the run that produced `payload` to work_dir/vela_delegateN with its files named
    delegateN_*; returns that folder."""
    run = next((r for r in runs if r.payload == payload), None)
    if run is None:
        raise ToolError(f"no Vela run produced delegate {index}'s payload")
    target = work_dir / f"vela_delegate{index}"
    target.mkdir()
    stem = f"delegate{index}"
    for path in sorted((run.folder / "output").iterdir()):
        name = path.name
        if name.startswith(VELA_STEM):
            name = stem + name[len(VELA_STEM) :]
        shutil.copyfile(path, target / name)
    (target / "vela.log").write_text(_kept_log(run, stem))
    return target


def _kept_log(run: VelaRun, stem: str) -> str:
    """Vela's log of the run, naming its graph as the kept files are named (delegateN) instead
    of by the temporary folder it ran in, which is gone once lowering ends."""
    text = (run.folder / "vela.log").read_text()
    output = run.folder / "output"
    for temporary, kept in ((output / VELA_STEM, stem), (output, "."), (run.folder, ".")):
        text = text.replace(str(temporary), kept)
    return text
