"""A job with what is resolved once: the target, the NPU configuration (and so its family), the
runner with what it can do, and the checked options. The CLI, the Python API and bench runs build
one and hand it to pipeline.run_resolved; nothing downstream resolves the target again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .job import Job
from .npu import NpuConfig
from .resolve import resolve_runner, resolve_target
from .targets import Target

if TYPE_CHECKING:
    from .runners.base import Runner


@dataclass(frozen=True)
class ResolvedJob:
    job: Job
    target: Target
    npu: NpuConfig  # what the compile targets: accelerator, system config, memory mode
    runner: Runner | None = None  # None: the host reference only (compile, compare)
    runner_note: str = ""  # which runner runs and why not the others

    @property
    def family(self) -> str:
        """The NPU family: "ethos-u55", "ethos-u65" or "ethos-u85"."""
        return self.npu.family

    @property
    def fixed_inputs(self) -> str | None:
        """ "ones" when the runner's firmware feeds its own all-ones sample, else None (it runs
        etk's inputs). Read here once: a runner states it as fixed_inputs(target), if at all."""
        ask = getattr(self.runner, "fixed_inputs", None)
        return None if ask is None else ask(self.target)


def resolve_job(job: Job, runner: Runner | None = None, runner_note: str = "") -> ResolvedJob:
    """The job's target and NPU configuration, resolved once; runner: one the caller chose."""
    target, npu = resolve_target(
        job.target, job.npu, job.system_config, job.memory_mode, job.vela_config
    )
    return ResolvedJob(job, target, npu, runner, runner_note)


def resolve_deploy(job: Job, runner: str, **runner_options: Any) -> ResolvedJob:
    """resolve_job, and the runner named ("auto", "fvp", "sim", "tosa-ref", "serial") for this
    model on this target (runners/select.py: select_runner's options)."""
    resolved = resolve_job(job)
    chosen, note = resolve_runner(
        job.model, runner, resolved.target, resolved.npu, **runner_options
    )
    return ResolvedJob(job, resolved.target, resolved.npu, chosen, note)
