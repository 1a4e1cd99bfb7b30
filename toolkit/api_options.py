"""The Python API's keyword options checked by type before anything runs: UserError naming the
option, what it got and what it takes (a string where a list of flags belongs would otherwise be
read one character at a time, a number where a path belongs fail deep in the pipeline)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .errors import UserError


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _flags(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "text": (_text, "a string"),
    "path": (_path, "a path (str or pathlib.Path)"),
    "count": (_count, "an integer"),
    "flag": (_flag, "True or False"),
    "flags": (_flags, "a list of strings, e.g. ['--optimise=Size']"),
    "callable": (callable, "a function taking one string"),
}
OPTION_KINDS = {
    "fusion": "text",
    "runner": "text",
    "output": "path",
    "progress": "callable",
    "runner_elf": "path",
    "port": "text",
    "baud": "count",
    "build": "flag",
    "flash": "flag",
    "fvp_fast": "flag",
    "compare_fusion": "flag",
    "target": "text",  # a target name or a .toml file's path
    "npu": "text",
    "system_config": "text",
    "memory_mode": "text",
    "vela_config": "path",
    "input_shape": "text",
    "calibration_samples": "count",
    "calibration_data": "path",
    "eval_data": "path",
    "seeds": "count",
    "seed": "count",
    "eval_samples": "count",
    "vela_options": "flags",
    "rewrites": "text",
    "io_layout": "text",
    "parallel_variants": "flag",
    "quant": "text",
}


def check_option_types(options: dict[str, Any]) -> None:
    """UserError for the first option (None: left to its default) whose value has a wrong type."""
    for name, value in options.items():
        kind = OPTION_KINDS.get(name)
        if kind is None or value is None:
            continue
        accepts, expected = _KINDS[kind]
        if not accepts(value):
            shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:50]}..."
            raise UserError(f"{name}={shown} ({type(value).__name__}): {name} takes {expected}")
