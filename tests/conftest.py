"""Shared fixtures: each shared model is compiled once per test session."""

from __future__ import annotations

import functools

import pytest

from toolkit.job import Job
from toolkit.pipeline import run_job


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    """compiled(model) -> JobResult with fused and unfused variants on corstone-300."""

    @functools.cache
    def build(model: str, eval_samples: int = 4):
        out = tmp_path_factory.mktemp(model.replace(":", "_"))
        return run_job(Job(model=model, out_dir=out, eval_samples=eval_samples))

    return build
