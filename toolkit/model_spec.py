"""What a MODEL argument names, checked without importing torch: a refusal (a missing file, a
spec of no known form) is said in a second, not after torch's import (6-10 s)."""

from __future__ import annotations

from pathlib import Path

from .errors import UserError


def names_a_definition(spec: str) -> bool:
    """path.py:ClassName or path.py:factory (a path with a colon in it is a file)."""
    return ":" in Path(spec).name or (":" in spec and not Path(spec).exists())


def check_model_spec(spec: str) -> None:
    """UserError where spec cannot name a model: a .pt2/.tflite file or a .py file that is not
    there, a file spec without a class name, or no known form. Zoo names are checked when the
    zoo is loaded."""
    if spec.startswith("zoo:"):
        return
    if spec.endswith((".pt2", ".tflite")):
        if not Path(spec).is_file():
            raise UserError(f"model file {spec} not found")
        return
    if not names_a_definition(spec):
        raise UserError(
            f"cannot tell what model '{spec}' is: use zoo:NAME, file.py:ClassName or a .pt2 file"
        )
    file_part, _, name = spec.rpartition(":")
    if not Path(file_part).is_file():
        raise UserError(f"model file {file_part} not found")
    if not name:
        raise UserError(
            f"'{spec}' names no class: use {file_part}:ClassName or {file_part}:factory"
        )
