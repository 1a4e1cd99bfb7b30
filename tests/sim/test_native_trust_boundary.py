"""The native kernels' trust boundary (native.h): every kernel checks its description against
the sizes of the memories it is given before it touches them, so no description, whatever made
it, reads or writes outside its buffers. Seeded mutations of a real program's descriptions run
in a child process (a slip would be a signal there, not a crash of the test run): each either
runs or is refused as a RegionError, never a signal."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from toolkit.lower.tflite import compile_tflite
from toolkit.sim import forget_programs, load_payload, simulate
from toolkit.sim.errors import PayloadError, RegionError
from toolkit.sim.families import accelerator as configuration
from toolkit.sim.native import batch
from toolkit.sim.plan import plan_for
from toolkit.targets import load_target

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ACC = "ethos-u55-128"
MUTATIONS = 400

pytestmark = pytest.mark.skipif(not batch.available(), reason="the native kernels are not built")


def _planned(folder: Path):
    """KWS on Ethos-U55 planned and run twice (its native runs made), with its input."""
    compiled = compile_tflite(
        FIXTURES / "kws_ref_model.tflite", load_target("corstone-300").npu(ACC), folder
    )
    program = load_payload(compiled.delegates[0].vela_npz_path)
    x = np.random.default_rng(1).integers(-128, 128, compiled.input_specs[0].shape, np.int8)
    forget_programs()
    simulate(program, [x], ACC)
    simulate(program, [x], ACC)
    return plan_for(program, configuration(ACC))


def _native_runs(plan) -> list:
    return [s.run for s in plan.steps if batch.row_of(s.run) is not None]


def _with_desc(run, desc: np.ndarray):
    """A copy of a native run (a convolution's: of its engine too) with this description."""
    changed = copy.copy(run)
    engine = changed if not hasattr(run, "engine") else copy.copy(run.engine)
    engine.desc, engine._desc_address = desc, desc.ctypes.data
    if engine is not changed:
        changed.engine = engine
    return changed


# words that describe arrays made together with the description, not memory (a convolution's
# weight and scale array sizes, a copy's "through the byte table"): those arrays are checked
# against them, so a word changed there is a different array, not a different description
_ARRAY_WORDS = {"NativeConv": {2 * 18 + 11 + 3, 2 * 18 + 11 + 4}, "NativeCopy": {3}}


def _mutated(run, rng: np.random.Generator):
    """A copy of a native run with one description word changed: to a value near it, a large
    one, or a negative one."""
    engine = getattr(run, "engine", run)
    desc = engine.desc.copy()
    kept = _ARRAY_WORDS.get(type(engine).__name__, set())
    word = int(rng.choice([w for w in range(len(desc)) if w not in kept]))
    old = int(desc[word])
    choices = [
        old + int(rng.integers(-64, 65)),
        -int(rng.integers(1, 1 << 20)),
        int(rng.integers(1 << 16, 1 << 40)),
        old * 1000 + 1,
        -(1 << 62),
    ]
    desc[word] = choices[int(rng.integers(0, len(choices)))]
    return _with_desc(run, desc)


def fuzz(folder: str, seed: int) -> None:
    """MUTATIONS mutated runs, each alone and as a one-row batch, on fresh memory; prints how
    many ran and how many were refused."""
    plan = _planned(Path(folder))
    runs = _native_runs(plan)
    rng = np.random.default_rng(seed)
    ran = refused = 0
    for _ in range(MUTATIONS):
        changed = _mutated(runs[int(rng.integers(0, len(runs)))], rng)
        for as_batch in (False, True):
            memory = plan.frame.memory()
            plan.execute(memory)  # the streams DMA'd in where the operations find them
            try:
                if as_batch:
                    batch.NativeBatch.of_rows([changed.row()], lambda mem, k: None)(memory)
                else:
                    changed(memory)
                ran += 1
            except (RegionError, PayloadError):  # a stream the mutated run wrote over, decoded
                refused += 1
            except MemoryError:  # a shape within the limits that the machine cannot buffer
                ran += 1
    print(ran, refused)


if __name__ == "fuzz":
    fuzz(sys.argv[1], int(sys.argv[2]))


def run_fuzz_child(test_file: str, folder: Path, seed: int) -> subprocess.CompletedProcess:
    """Run test_file's fuzz(folder, seed) in a child process (run_name 'fuzz'); -P: the child
    imports the toolkit pytest imports, not a source tree in the working directory."""
    code = f"import runpy; runpy.run_path({test_file!r}, run_name='fuzz')"
    return subprocess.run(
        [sys.executable, "-P", "-c", code, str(folder), str(seed)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_mutated_descriptions_run_or_are_refused_never_a_signal(tmp_path):
    done = run_fuzz_child(__file__, tmp_path, 7)
    assert done.returncode == 0, done.stderr[-2000:]
    ran, refused = (int(v) for v in done.stdout.split())
    assert ran + refused == 2 * MUTATIONS
    assert refused > MUTATIONS // 4 and ran > 0  # the checks refuse, and do not refuse all


@pytest.fixture(scope="module")
def kws_plan(tmp_path_factory):
    return _planned(tmp_path_factory.mktemp("kws"))


def _first(runs, kind: str):
    return next(r for r in runs if type(r).__name__ == kind)


def test_an_ofm_past_its_region_is_refused_before_anything_is_written(kws_plan):
    conv = _first(_native_runs(kws_plan), "ConvRun")
    region = conv.engine.ofm_region
    memory = kws_plan.frame.memory()
    desc = conv.engine.desc.copy()
    desc[18 + 1] = memory.size(region) - 1  # the OFM's first tile base (an fmap is 18 words)
    changed = _with_desc(conv, desc)
    before = memory.regions[region].copy()
    (core,) = conv.streams
    streams = (core.weights.last[1], *core.scales.last[1])  # what its last run read
    with pytest.raises(RegionError, match="refused a convolution: conv: the description reaches"):
        changed.engine(memory, *streams)
    with pytest.raises(RegionError, match="refused an operation: run_batch: the description"):
        batch.NativeBatch.of_rows([changed.engine.row()], lambda mem, k: None)(memory)
    assert np.array_equal(memory.regions[region], before)
    conv.engine(memory, *streams)  # the description as planned runs
    assert not np.array_equal(memory.regions[region], before)


def test_a_check_row_past_its_memory_is_refused(kws_plan):
    memory = kws_plan.frame.memory()
    size = memory.size(1)
    expected = np.zeros(16, np.uint8)
    row = batch.Row(4, np.array([size - 8, 16], np.int64), (1, -1, -1, -1), (expected,))
    with pytest.raises(RegionError, match="reaches outside its memory"):
        batch.NativeBatch.of_rows([row], lambda mem, k: None)(memory)
