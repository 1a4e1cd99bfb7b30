"""A variant's host reference runs on two CPUs when each run is slow.

The TOSA reference model runs one sample at a time and mostly holds the GIL: the 49-step GRU's
graph takes ~2 s a sample, so its 8 evaluation samples kept one CPU busy for 16 s while the other
waited. When the first sample took SLOW_RUN_S or more, a forked child runs the second half of the
rest (a fork inherits the loaded program: nothing is imported or read again) and sends its results
back; the outputs are the same bits in the same order. Fast runs (DS-CNN: ~0.05 s) stay in this
process, where a fork would cost more than it saves.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..child_process import end_with_parent
from ..errors import ToolError
from ..lower.parallel import can_compile_in_parallel

SLOW_RUN_S = 0.5

Sample = TypeVar("Sample")
Result = TypeVar("Result")


def _child(connection, run_one, samples, parent: int) -> None:
    end_with_parent(parent)
    import torch

    torch.set_num_threads(1)  # GNU OpenMP's threads do not survive a fork (lower/parallel.py)
    try:
        connection.send([run_one(sample) for sample in samples])
    except BaseException as exc:  # noqa: BLE001 - re-raised in the parent
        try:
            connection.send(pickle.loads(pickle.dumps(exc)))
        except Exception:  # noqa: BLE001 - one that does not pickle (any type): its text
            connection.send(ToolError(f"{type(exc).__name__}: {exc}"))
    finally:
        connection.close()


def run_samples(run_one: Callable[[Sample], Result], samples: Sequence[Sample]) -> list[Result]:
    """[run_one(s) for s in samples], the second half of samples 2.. in a forked child when the
    first sample's run took SLOW_RUN_S or more."""
    if not samples:
        return []
    start = time.perf_counter()
    results = [run_one(samples[0])]
    rest = list(samples[1:])
    slow = time.perf_counter() - start >= SLOW_RUN_S
    if len(rest) < 2 or not slow or not can_compile_in_parallel():
        return results + [run_one(sample) for sample in rest]
    mine, theirs = rest[: (len(rest) + 1) // 2], rest[(len(rest) + 1) // 2 :]
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, run_one, theirs, os.getpid()), daemon=True)
    child.start()
    send.close()
    try:
        results += [run_one(sample) for sample in mine]
        outcome = receive.recv()
    except EOFError:  # the child died before it could report
        child.join()
        raise ToolError(
            f"a host reference run in a child process failed (exit code {child.exitcode})"
        ) from None
    except BaseException:
        child.terminate()
        child.join()
        raise
    child.join()
    if isinstance(outcome, BaseException):
        raise outcome
    return results + outcome
