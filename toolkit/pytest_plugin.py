"""pytest plugin for on-device regression suites (registered as pytest11 entry point `etk`).

    pytest --etk-target corstone-300 [--etk-runner sim] [--etk-npu ethos-u55-256] tests_on_device/

    @pytest.mark.etk_tolerance(lsb=1, sqnr_db=30)
    def test_ds_cnn(etk_deploy):
        result = etk_deploy("zoo:ds_cnn", fusion="on")   # fails the test if out of tolerance
        assert result.cycles.npu_cycles < 500_000

Tests that use the fixtures skip when --etk-target is not given. Cycle figures and errors go to
the JUnit XML (--junitxml) as test properties. Heavy imports happen only inside the fixtures, so
the plugin costs nothing in sessions that do not use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .errors import UserError
from .resolve import FUSION_VARIANT, RUNNER_CHOICES, resolve_runner

if TYPE_CHECKING:
    from .artifacts import Variant


@dataclass(frozen=True)
class Tolerance:
    lsb: float = 0  # largest allowed |device - host reference| in output LSBs
    sqnr_db: float | None = None  # smallest allowed SQNR of the device outputs vs the float model


@dataclass(frozen=True)
class DeviceResult:
    model: str
    variant: str
    runner: str
    cycles: Any  # toolkit.artifacts.CycleFigures: kind says measured, simulated or estimate
    max_diff_lsb: float
    sqnr_db: float
    job: Any = None  # the toolkit.results.JobResult, for anything else


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("etk", "ethos-u-toolkit on-device tests")
    group.addoption(
        "--etk-target",
        help="target to deploy to (corstone-300, a .toml file); "
        "tests using etk fixtures skip without it",
    )
    group.addoption(
        "--etk-runner",
        default="auto",
        choices=RUNNER_CHOICES,
        help="runner (default auto: FVP, else simulator, else TOSA reference)",
    )
    group.addoption("--etk-npu", help="NPU configuration (default: the target's)")
    group.addoption("--etk-port", help="serial port of the board (--etk-runner serial)")
    group.addoption("--etk-baud", type=int, help="baud rate of the board's UART")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "etk_tolerance(lsb=0, sqnr_db=None): allowed difference of device outputs "
        "from the host reference (LSB) and least SQNR vs the float model (dB)",
    )


class _Deployer:
    """Deploys each (model, variant) once per session."""

    def __init__(self, config: pytest.Config, out: Path):
        self.target = config.getoption("--etk-target")
        self.runner, self.npu = config.getoption("--etk-runner"), config.getoption("--etk-npu")
        self.port, self.baud = config.getoption("--etk-port"), config.getoption("--etk-baud")
        self.out = out
        self._results: dict[tuple[str, str], DeviceResult] = {}

    def deploy(self, model: str, variant: Variant) -> DeviceResult:
        if (model, variant) not in self._results:
            self._results[(model, variant)] = self._run(model, variant)
        return self._results[(model, variant)]

    def _run(self, model: str, variant: Variant) -> DeviceResult:
        from dataclasses import replace

        from .job import Job
        from .pipeline import run_resolved
        from .resolved_job import resolve_job

        out = self.out / f"{model.replace(':', '_').replace('/', '_')}_{variant}"
        job = Job(model=model, target=self.target, variants=(variant,), npu=self.npu, out_dir=out)
        resolved = resolve_job(job)  # the target resolved once
        runner, note = resolve_runner(
            model, self.runner, resolved.target, resolved.npu, port=self.port, baud=self.baud
        )
        result = run_resolved(replace(resolved, runner=runner, runner_note=note))
        device = next(iter(result.variants.values())).run  # one variant ("tflite" for a .tflite)
        assert device is not None  # run_job ran it on the runner
        accuracy = device.evaluation.accuracy
        if device.max_diff_lsb is None or accuracy is None:
            raise UserError(
                f"{model}: etk_deploy checks the outputs against the host reference and the float "
                "model, and a .tflite model has neither"
            )
        return DeviceResult(
            model,
            variant,
            runner.name,
            device.evaluation.runs[0].cycles,
            device.max_diff_lsb,
            accuracy.sqnr_db,
            result,
        )


@pytest.fixture(scope="session")
def etk_deployer(request: pytest.FixtureRequest, tmp_path_factory) -> _Deployer:
    if not request.config.getoption("--etk-target"):
        pytest.skip("on-device test: pass --etk-target TARGET")
    return _Deployer(request.config, tmp_path_factory.mktemp("etk"))


@pytest.fixture
def etk_tolerance(request: pytest.FixtureRequest) -> Tolerance:
    marker = request.node.get_closest_marker("etk_tolerance")
    return Tolerance(**marker.kwargs) if marker else Tolerance()


def out_of_tolerance(result: DeviceResult, tolerance: Tolerance) -> list[str]:
    problems = []
    if result.max_diff_lsb > tolerance.lsb:
        problems.append(
            f"outputs differ from the host reference by {result.max_diff_lsb:g} LSB "
            f"(allowed {tolerance.lsb:g})"
        )
    if tolerance.sqnr_db is not None and not result.sqnr_db >= tolerance.sqnr_db:
        problems.append(
            f"SQNR vs the float model is {result.sqnr_db:.2f} dB "
            f"(at least {tolerance.sqnr_db:g} dB required)"
        )
    return problems


@pytest.fixture
def etk_deploy(
    request: pytest.FixtureRequest, etk_deployer: _Deployer, etk_tolerance: Tolerance
) -> Callable[..., DeviceResult]:
    """etk_deploy(model, fusion="on") -> DeviceResult; fails the test when out of tolerance."""

    def deploy(model: str, fusion: str = "on") -> DeviceResult:
        variant = FUSION_VARIANT[fusion]
        result = etk_deployer.deploy(model, variant)
        prefix = f"etk {model} {variant}"
        for name, value in (
            (f"{prefix} runner", result.runner),
            (f"{prefix} npu_cycles ({result.cycles.kind})", result.cycles.npu_cycles),
            (f"{prefix} max_diff_lsb", result.max_diff_lsb),
            (f"{prefix} sqnr_db", round(result.sqnr_db, 3)),
        ):
            request.node.user_properties.append((name, value))
        problems = out_of_tolerance(result, etk_tolerance)
        if problems:
            pytest.fail(
                f"{model} {variant} on {result.runner}: " + "; ".join(problems), pytrace=False
            )
        return result

    return deploy
