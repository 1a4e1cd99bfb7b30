"""Vela options checked before anything compiles: the system config and memory mode against the
Vela config file, extra flags against Vela's own argument parser."""

from __future__ import annotations

import argparse
import contextlib
import io
from configparser import Error as ConfigError
from pathlib import Path

from ..errors import UserError
from ..npu import NpuConfig, vela_ini_sections

# Flags the toolkit sets from the target and NPU: given again as extra flags, one would silently
# win over the other.
OWN_FLAGS = {
    "--accelerator-config": "--npu",
    "--config": "the target file",
    "--system-config": "--system-config",
    "--memory-mode": "--memory-mode",
    "--output-format": "nothing (etk needs raw output)",
    "--output-dir": "-o (etk chooses Vela's output folder)",
}


def _config_sections(config_ini: str) -> tuple[str, ...]:
    from ethosu.vela.architecture_features import CONFIG_FILES_PATH

    path = Path(config_ini)
    if not path.is_file():
        path = Path(CONFIG_FILES_PATH) / config_ini
    if not path.is_file():
        raise UserError(f"Vela config file {config_ini} not found")
    try:
        return vela_ini_sections(path)
    except ConfigError as exc:
        raise UserError(
            f"Vela config file {config_ini} is not an .ini file Vela reads: {exc}"
        ) from None


def _check_name(
    kind: str, option: str, name: str, sections: tuple[str, ...], config_ini: str
) -> None:
    names = sorted(s.split(".", 1)[1] for s in sections if s.startswith(f"{kind}."))
    if name not in names:
        raise UserError(
            f"{option} '{name}' is not in the Vela config file {config_ini}: use one "
            f"of {', '.join(names)}"
        )


class _Parsed(Exception):
    pass


class _Rejected(Exception):
    pass


def vela_flag_problem(flags: tuple[str, ...]) -> str | None:
    """Vela's own argument parser on flags (nothing compiled): its complaint, or None."""
    from unittest import mock

    from ethosu.vela import vela

    parser = argparse.ArgumentParser
    parse = parser.parse_args

    def parse_only(self, args=None, namespace=None):
        parse(self, args, namespace)
        raise _Parsed

    def reject(self, message):
        raise _Rejected(message)

    try:
        with (
            mock.patch.object(parser, "parse_args", parse_only),
            mock.patch.object(parser, "error", reject),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            vela.main([*flags, "model.tosa"])
    except _Parsed:
        return None
    except _Rejected as exc:
        return str(exc)
    except (KeyError, ValueError, TypeError) as exc:  # Vela's own value parsers, e.g. --optimise
        return f"invalid value {exc}"
    except SystemExit:
        return "it is not a compile option (Vela printed something and exited)"
    return "it is not a compile option"


def check_vela_options(npu: NpuConfig, extra: tuple[str, ...]) -> None:
    """UserError naming the bad option and the valid choices."""
    sections = _config_sections(npu.config_ini)
    _check_name("System_Config", "--system-config", npu.system_config, sections, npu.config_ini)
    _check_name("Memory_Mode", "--memory-mode", npu.memory_mode, sections, npu.config_ini)
    for flag in extra:
        name = flag.split("=", 1)[0].split(" ", 1)[0]
        if name in OWN_FLAGS:
            raise UserError(
                f"--vela-option={flag}: etk sets {name} itself; use {OWN_FLAGS[name]} instead"
            )
    problem = vela_flag_problem(extra)
    if problem:
        raise UserError(
            f"--vela-option {' '.join(extra)}: Vela rejects it: {problem} (see vela --help)"
        )
