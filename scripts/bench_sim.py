"""Simulator vs TOSA reference model (and TFLite's reference kernels): cold and warm time per
inference on zoo networks, the collection of real architectures (tests/collection, at the input
shapes of its table nets.toml, which the collection sweep reads too) and the MLPerf Tiny reference
.tflite files.

Zoo and collection networks are compiled through the project's own chain
(toolkit.lower.build_variant.compile_variant, fused), so every delegate of the model runs. Both
engines run the same delegates on the same int8 inputs (captured from one end-to-end run), and the
simulator's outputs are checked against the reference model's bit for bit, per delegate and end to
end through the runners.

cold: the first inference of a freshly loaded program (load_payload of its bytes) in a fresh
      state: the simulator's per-program state (its plan, decoded weights and scales, cycle
      figures) is forgotten first (toolkit.sim.forget_programs), so a cold run plans, decodes
      and times the program as a deploy's first inference does. Imports and the Vela
      memory-system figures of the cycle model are per process, not per program, and are not
      counted. The TOSA reference
      model keeps nothing between runs, so each of its runs is a cold run.
warm: per inference after that, the median of --repeat runs.
Cold figures are the median of --cold-repeat (21) fresh starts, the two engines taking turns. Times
are wall-clock (--clock wall) or the calling thread's CPU time (--clock cpu: steadier on a
loaded machine). Both engines run on the
calling thread (the simulator holds BLAS to it; the reference model and TFLite's reference
kernels make no threads): the process's CPU time also counted torch's idle OpenMP workers, which
spin for a while after the runners' end-to-end check, and tripled small nets' first cold runs
(mean_head_net 5.9 ms of process time in a 1.9 ms run).

The .tflite files run on the simulator only (no TOSA graph); their reference is TFLite's
reference kernels (OpResolverType.BUILTIN_REF, the semantics Vela reproduces), timed when
ai_edge_litert or tflite_runtime is importable (its cold run: load the model, allocate tensors,
set the input, invoke, read the output; its warm run the last three, as a simulator run places
its input and reads its output), and compared bit for bit with the simulator. The build used is named in the output:
with ai-edge-litert 2.3.0, ad01's FULLY_CONNECTED outputs differ by 1 LSB where the rescale
meets a tie: checked by hand on layer 2's one differing output, LiteRT gives acc * M / 2^36
rounded once (56), Vela's stream in TFL mode (the simulator) rounds twice, high multiply then
divide (57), as TFLite's double-rounding MultiplyByQuantizedMultiplier does.
Usage: python scripts/bench_sim.py [--accelerator ethos-u55-128] [--repeat 9] [--out DIR]
                                   [--no-tflite] [--collection] [NAME | collection:NAME ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tomllib
from importlib.metadata import version
from pathlib import Path

import numpy as np

from toolkit.console_capture import COMPILER_SIDE, quiet_torch_import

quiet_torch_import(
    COMPILER_SIDE
)  # torchao's import-time chatter, as etk does; before the imports below

from toolkit.lower.build_variant import compile_variant  # noqa: E402
from toolkit.lower.tflite import compile_tflite  # noqa: E402
from toolkit.models.loader import load_model  # noqa: E402
from toolkit.models.zoo import zoo_names  # noqa: E402
from toolkit.npu import npu_config  # noqa: E402
from toolkit.quantize.calibration import random_calibration  # noqa: E402
from toolkit.runners.host_interpreter import execute  # noqa: E402
from toolkit.runners.sim import SimulatorRunner  # noqa: E402
from toolkit.runners.tosa_ref import TosaReferenceRunner, run_tosa_delegate  # noqa: E402
from toolkit.sim import forget_programs, load_payload, simulate  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
COLLECTION = FIXTURES.parent / "collection"
NETS_TABLE = COLLECTION / "nets.toml"
MLPERF_TFLITE = ("pretrainedResnet_quant", "kws_ref_model", "vww_96_int8", "ad01_int8")
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def _tflite_interpreter():
    """(TFLite's Interpreter class, reference op resolver) and the distribution that gave them,
    or (None, why not)."""
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        distribution = "ai-edge-litert"
    except ImportError:
        try:
            from tflite_runtime.interpreter import Interpreter, OpResolverType

            distribution = "tflite-runtime"
        except ImportError:
            return None, "neither ai_edge_litert nor tflite_runtime is importable"
    return (Interpreter, OpResolverType.BUILTIN_REF), f"{distribution} {version(distribution)}"


class Timer:
    def __init__(self, clock: str, repeat: int, cold_repeat: int):
        self.clock, self.repeat, self.cold_repeat = CLOCKS[clock], repeat, cold_repeat

    def once(self, fn) -> float:
        start = self.clock()
        fn()
        return self.clock() - start

    def cold(self, *engines) -> list[float]:
        """For each engine (fresh, fn), the median over fresh starts: `fresh` (not timed) resets
        its state, then fn runs once. The engines take turns, so a machine that slows down or
        speeds up while they are measured weighs on each alike."""
        times: list[list[float]] = [[] for _ in engines]
        for _ in range(self.cold_repeat):
            for (fresh, fn), kept in zip(engines, times):
                fresh()
                kept.append(self.once(fn))
        return [statistics.median(t) for t in times]

    def warm(self, fn) -> float:
        fn()
        return statistics.median(self.once(fn) for _ in range(self.repeat))


def _delegate_calls(program, inputs):
    """(delegate, its int8 inputs) for every delegate call of one end-to-end run."""
    calls = []

    def record(delegate, arrays):
        calls.append((delegate, [np.array(a) for a in arrays]))
        return run_tosa_delegate(delegate, arrays)

    execute(program, inputs, record)
    return calls


def _row(
    name: str,
    width: int,
    sim: tuple[float, float],
    ref: tuple[float, float] | None,
    tfl: tuple[float, float] | None,
    exact: bool | None,
) -> str:
    def ms(pair):
        return ("" if pair is None else f"{pair[0] * 1e3:9.1f}{pair[1] * 1e3:9.1f}").rjust(18, " ")

    def ratio(pair):
        return ("" if pair is None else f"{sim[0] / pair[0]:7.2f}{sim[1] / pair[1]:7.2f}").rjust(14)

    cells = ms(sim) + ms(ref) + ratio(ref) + ms(tfl) + ratio(tfl)
    verdict = "(no reference)" if exact is None else "yes" if exact else "NO"
    return f"{name:<{width}}{cells}  {verdict}"


def collection_nets() -> dict[str, list[str]]:
    """name -> [MODEL spec inside tests/collection, input shape]: the collection sweep's table."""
    return tomllib.loads(NETS_TABLE.read_text())


def _benched(parser, names: list[str], collection: bool) -> dict[str, tuple[str, str | None]]:
    """row name -> (MODEL spec, input shape) of every net to bench: the named ones (the whole zoo
    when none is named), then with --collection every collection net."""
    if collection or any(n.startswith("collection:") for n in names):
        if not NETS_TABLE.is_file():
            parser.error(f"collection nets are read from {NETS_TABLE}: run from a checkout")
        nets = collection_nets()
    else:
        nets = {}
    benched: dict[str, tuple[str, str | None]] = {}
    for name in names or zoo_names():
        kind, _, net = name.rpartition(":")
        if kind in ("", "zoo") and net in zoo_names():
            benched[f"zoo:{net}"] = (f"zoo:{net}", None)
        elif kind == "collection" and net in nets:
            benched[name] = (str(COLLECTION / nets[net][0]), nets[net][1])
        elif kind == "collection":
            parser.error(f"no net '{net}' in {NETS_TABLE}: it lists {', '.join(nets)}")
        else:
            parser.error(
                f"no zoo net '{name}': name one of {', '.join(zoo_names())}, "
                "or collection:NAME for a collection net"
            )
    for net, (spec, shape) in nets.items() if collection else ():
        benched[f"collection:{net}"] = (str(COLLECTION / spec), shape)
    return benched


def bench_net(spec: str, shape: str | None, accelerator: str, timer: Timer, out_dir: Path):
    model = load_model(spec, shape)
    program = compile_variant(
        model,
        random_calibration(model.example_inputs, samples=4),
        "fused",
        npu_config(accelerator),
        out_dir,
    )
    inputs = [x.numpy() for x in model.example_inputs]
    calls = _delegate_calls(program, inputs)
    exact = all(
        np.array_equal(s.reshape(-1), r.reshape(-1))
        for d, arrays in calls
        for s, r in zip(
            simulate(load_payload(d.payload), arrays, accelerator).outputs,
            run_tosa_delegate(d, arrays),
        )
    )
    exact = exact and all(
        np.array_equal(a, b)
        for a, b in zip(
            SimulatorRunner().run(program, inputs).outputs,
            TosaReferenceRunner().run(program, inputs).outputs,
        )
    )

    def run_sim():
        for d, arrays in calls:
            simulate(load_payload(d.payload), arrays, accelerator)

    def run_ref():
        for d, arrays in calls:
            run_tosa_delegate(d, arrays)

    sim_cold, ref_cold = timer.cold((forget_programs, run_sim), (_nothing, run_ref))
    sim = sim_cold, timer.warm(run_sim)
    ref = ref_cold, timer.warm(run_ref)
    return sim, ref, exact


def _nothing() -> None:
    """The reference model's fresh start: it keeps nothing between runs."""


def bench_tflite(stem: str, accelerator: str, timer: Timer, out_dir: Path, tflite):
    path = FIXTURES / f"{stem}.tflite"
    program = compile_tflite(path, npu_config(accelerator), out_dir / stem)
    (delegate,) = program.delegates
    spec = program.input_specs[0]
    x = np.random.default_rng(0).integers(-128, 128, spec.shape, dtype=np.int8)

    def run_sim():
        return simulate(load_payload(delegate.vela_npz_path), [x], accelerator).outputs

    if tflite is None:
        return (timer.cold((forget_programs, run_sim))[0], timer.warm(run_sim)), None, None
    interpreter_class, resolver = tflite
    state = {}

    def first_inference():  # as the simulator's: load the model, prepare it, run it
        interpreter = interpreter_class(str(path), experimental_op_resolver_type=resolver)
        interpreter.allocate_tensors()
        state["interpreter"] = interpreter
        state["input"] = interpreter.get_input_details()[0]["index"]
        state["output"] = interpreter.get_output_details()[0]["index"]
        next_inference()

    def next_inference():  # as the simulator's run: place the input, run, read the output
        interpreter = state["interpreter"]
        interpreter.set_tensor(state["input"], x)
        interpreter.invoke()
        return interpreter.get_tensor(state["output"])

    sim_cold, ref_cold = timer.cold((forget_programs, run_sim), (_nothing, first_inference))
    sim = sim_cold, timer.warm(run_sim)
    ref = ref_cold, timer.warm(next_inference)
    exact = np.array_equal(run_sim()[0].reshape(-1), next_inference().reshape(-1))
    return sim, ref, exact


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "models",
        nargs="*",
        metavar="NAME",
        help="zoo names (default: the whole zoo) and collection:NAME for a collection net",
    )
    parser.add_argument(
        "--collection",
        action="store_true",
        help="also every net of the collection (tests/collection/nets.toml), at its input shape",
    )
    parser.add_argument("--accelerator", default="ethos-u55-128")
    parser.add_argument("--repeat", type=int, default=9, help="warm runs (median)")
    parser.add_argument(
        "--cold-repeat",
        type=int,
        default=21,
        help="fresh starts of each engine (median; a small net's reference run varies by a third "
        "from one to the next, and 9 left one run's ratios a tenth apart)",
    )
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="keep compiled programs here, reused when the toolkit's code is unchanged "
        "(default: a temporary folder, removed at the end)",
    )
    parser.add_argument(
        "--no-tflite", action="store_true", help="skip the MLPerf Tiny .tflite files"
    )
    args = parser.parse_args()
    benched = _benched(parser, args.models, args.collection)
    width = max(24, *(len(label) + 2 for label in benched))
    timer = Timer(args.clock, args.repeat, args.cold_repeat)
    tflite, tflite_about = _tflite_interpreter()  # the build used, or why there is none
    print(
        f"{args.clock}-clock ms; cold = median of {args.cold_repeat} fresh starts, warm = median "
        f"of {args.repeat}; ratios are simulator / reference (cold, warm)"
    )
    print(
        f"{'':<{width}}{'simulator':^18}{'TOSA reference':^18}{'sim/TOSA':^14}"
        f"{'TFLite ref kernels':^18}{'sim/TFLite':^14}"
    )
    print(
        f"{'model':<{width}}"
        + f"{'cold':>9}{'warm':>9}" * 2
        + f"{'cold':>7}{'warm':>7}"
        + f"{'cold':>9}{'warm':>9}"
        + f"{'cold':>7}{'warm':>7}"
        + "  bit-exact"
    )
    tosa_ratios, tflite_ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.out or Path(tmp)
        for label, (spec, shape) in benched.items():
            folder = out_dir.joinpath(*label.split(":"))
            sim, ref, exact = bench_net(spec, shape, args.accelerator, timer, folder)
            tosa_ratios.append((sim[0] / ref[0], sim[1] / ref[1]))
            print(_row(label, width, sim, ref, None, exact), flush=True)
        if not args.no_tflite:
            for stem in MLPERF_TFLITE:
                sim, ref, exact = bench_tflite(stem, args.accelerator, timer, out_dir, tflite)
                if ref is not None:
                    tflite_ratios.append((sim[0] / ref[0], sim[1] / ref[1]))
                print(_row(f"{stem}.tflite", width, sim, None, ref, exact), flush=True)
    if tflite is None and not args.no_tflite:
        print(f"TFLite reference kernels: not timed ({tflite_about})")
    elif tflite_ratios:
        print(
            f"worst sim/TFLite-ref warm ratio {max(r[1] for r in tflite_ratios):.2f} "
            f"(MLPerf Tiny .tflite files; reference kernels of {tflite_about})"
        )
    print(
        f"worst cold ratio {max(r[0] for r in tosa_ratios):.2f}, "
        f"worst warm ratio {max(r[1] for r in tosa_ratios):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
