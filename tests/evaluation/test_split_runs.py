"""Slow host reference runs: the second half of the samples after the first in a forked child,
results in sample order; fast runs stay in this process; a child's failure is the parent's."""

from __future__ import annotations

import os
import time

import pytest

from toolkit.errors import ToolError
from toolkit.evaluation import split_runs
from toolkit.evaluation.split_runs import run_samples


def _slow_first(sample: int) -> tuple[int, int]:
    if sample == 0:
        time.sleep(split_runs.SLOW_RUN_S + 0.1)
    return sample * sample, os.getpid()


def test_slow_runs_split_across_a_child_in_sample_order():
    results = run_samples(_slow_first, list(range(8)))
    assert [value for value, _ in results] == [k * k for k in range(8)]
    pids = [pid for _, pid in results]
    # sample 0, then the first half of the other 7 (4) here, the last 3 in the child
    assert pids[:5] == [os.getpid()] * 5
    assert len(set(pids[5:])) == 1 and pids[5] != os.getpid()


def test_fast_runs_and_short_lists_stay_in_this_process():
    fast = run_samples(lambda k: (k, os.getpid()), list(range(8)))
    assert fast == [(k, os.getpid()) for k in range(8)]
    two = run_samples(_slow_first, [0, 1])  # one sample after the first: no one to share with
    assert [pid for _, pid in two] == [os.getpid()] * 2
    assert run_samples(_slow_first, []) == []


def _fails_in_child(sample: int) -> int:
    if sample == 0:
        time.sleep(split_runs.SLOW_RUN_S + 0.1)
    if sample == 7:
        raise ToolError("the reference model refused sample 7")
    return sample


def _dies_in_child(sample: int) -> int:
    if sample == 0:
        time.sleep(split_runs.SLOW_RUN_S + 0.1)
    if sample == 7:
        os._exit(9)
    return sample


def test_a_childs_error_is_raised_here_and_its_death_named():
    with pytest.raises(ToolError, match="refused sample 7"):
        run_samples(_fails_in_child, list(range(8)))
    with pytest.raises(ToolError, match=r"in a child process failed \(exit code 9\)"):
        run_samples(_dies_in_child, list(range(8)))
