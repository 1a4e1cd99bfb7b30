"""A variant's host reference runs on two CPUs when each run is slow.

The TOSA reference model runs one sample at a time and mostly holds the GIL: the 49-step GRU's
graph takes ~2 s a sample, so its 8 evaluation samples kept one CPU busy for 16 s while the other
waited. When the first sample took SLOW_RUN_S or more, a forked child runs the second half of the
rest (a fork inherits the loaded program: nothing is imported or read again) and sends its results
back; the outputs are the same bits in the same order. Fast runs (DS-CNN: ~0.05 s) stay in this
process, where a fork would cost more than it saves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..forked import ForkedWork, can_fork_a_worker

SLOW_RUN_S = 0.5

Sample = TypeVar("Sample")
Result = TypeVar("Result")


def run_samples(run_one: Callable[[Sample], Result], samples: Sequence[Sample]) -> list[Result]:
    """[run_one(s) for s in samples], the second half of samples 2.. in a forked child when the
    first sample's run took SLOW_RUN_S or more."""
    if not samples:
        return []
    start = time.perf_counter()
    results = [run_one(samples[0])]
    rest = list(samples[1:])
    slow = time.perf_counter() - start >= SLOW_RUN_S
    if len(rest) < 2 or not slow or not can_fork_a_worker():
        return results + [run_one(sample) for sample in rest]
    half = (len(rest) + 1) // 2
    child = ForkedWork(lambda: [run_one(sample) for sample in rest[half:]], "a host reference run")
    try:
        results += [run_one(sample) for sample in rest[:half]]
    except BaseException:
        child.cancel()
        raise
    return results + child.result()
