"""ExecuTorch's own Vela run of each delegate, kept: the payload in the .pte and the figures in
our report come from one Vela run.

ExecuTorch's Ethos-U backend calls `arm_vela.vela_compile` once per delegate and keeps only the
packed payload. While lowering we wrap that call: Vela runs in a folder of ours with the report
flags added (they change no output, only add CSVs and the debug database), and we note the payload it returned, which
is how a run is matched to its delegate afterwards.
"""

from __future__ import annotations

import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..console_capture import capture_fds
from ..errors import ToolError, UserError
from .vela_debug_db import DEBUG_DB_FLAG

# the per-layer CSV and the debug database (which operation each command-stream offset is of)
REPORT_FLAGS = ("--verbose-performance", DEBUG_DB_FLAG)
VELA_STEM = "out"  # vela_compile writes the TOSA graph as out.tosa
# Vela 5.1's C++ core when it cannot place an operator it has no CPU fallback for
_UNPLACED = re.compile(r"^Non-passthrough operation \((\w+)\) could not run on NPU$")


def _is_16x8(tosa_flatbuffer: bytes) -> bool:
    """Whether the TOSA graph holds a 16x8 convolution (an INT48 accumulator: --quant a16w8)."""
    from tosa.DType import DType
    from tosa.TosaGraph import TosaGraph

    graph = TosaGraph.GetRootAsTosaGraph(tosa_flatbuffer, 0)
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        for b in range(region.BlocksLength()):
            block = region.Blocks(b)
            if any(block.Tensors(t).Type() == DType.INT48 for t in range(block.TensorsLength())):
                return True
    return False


def _unplaced_16x8(error: BaseException, tosa_flatbuffer: bytes) -> UserError | None:
    """The one-line refusal for a 16x8 operator Vela cannot place, or None."""
    match = _UNPLACED.match(str(error)) if isinstance(error, RuntimeError) else None
    if match is None or not _is_16x8(bytes(tosa_flatbuffer)):
        return None
    return UserError(
        f"--quant a16w8: Vela could not place a 16x8 {match.group(1)} of this model on the NPU "
        f'("{error}"), and it has no CPU fallback; seen with Vela 5.1 where a convolution\'s '
        "int16 output feeds both a residual ADD and another convolution (MobileNetV2-style "
        "inverted residuals) and for ConvTranspose2d; --quant int8 compiles it"
    )


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
            refusal = _unplaced_16x8(error, tosa_flatbuffer)
            if refusal is not None:
                raise refusal from error
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
    """Copy the run that produced `payload` to work_dir as delegateN: the TOSA graph Vela compiled
    (delegateN.tosa) and its output (vela_delegateN/, files named delegateN_*); returns that
    folder. The payload says which run it was, whatever order or names ExecuTorch gave them."""
    run = next((r for r in runs if r.payload == payload), None)
    if run is None:
        raise ToolError(f"no Vela run produced delegate {index}'s payload")
    stem = f"delegate{index}"
    shutil.copyfile(run.folder / f"{VELA_STEM}.tosa", work_dir / f"{stem}.tosa")
    target = work_dir / f"vela_{stem}"
    target.mkdir()
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
