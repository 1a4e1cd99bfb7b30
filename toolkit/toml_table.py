"""Typed reading of TOML files (target files, bench suites): errors name the file, the key path and
what was expected, as one line."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from .errors import UserError

_DIGITS = re.compile(r"value has (\d+) digits")


def load_toml(path: Path, kind: str) -> dict[str, Any]:
    """The file's top table; kind ("target file", "suite file") starts every error message."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{kind} {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{kind} {path} is not UTF-8 text (byte {exc.start}): save it as UTF-8"
        ) from None
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
        raise UserError(f"{kind} {path} is not valid TOML: {_problem(exc)}") from None


def _problem(exc: Exception) -> str:
    if isinstance(exc, RecursionError):  # tomllib parses nested arrays and tables recursively
        return "nested too deeply"
    digits = _DIGITS.search(str(exc))
    if digits and not isinstance(exc, tomllib.TOMLDecodeError):  # Python's int-from-text limit
        return f"an integer of {int(digits[1]):,} digits (TOML integers are 64-bit)"
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


class TomlTable:
    """A TOML table that reports missing or mistyped keys with file and key path."""

    def __init__(self, data: dict[str, Any], path: Path, kind: str, prefix: str = ""):
        self.data, self.path, self.kind, self.prefix = data, path, kind, prefix

    def fail(self, key: str, message: str) -> UserError:
        return UserError(f"{self.kind} {self.path}: key '{self.prefix}{key}' {message}")

    def wrong(self, key: str, expected: str, got: Any = None) -> UserError:
        shown = repr(got) if len(repr(got)) <= 80 else f"{repr(got)[:60]}..."
        what = "missing" if got is None else f"is {type(got).__name__} {shown}"
        return self.fail(key, f"{what}, expected {expected}")

    def sub(self, data: dict[str, Any], prefix: str) -> TomlTable:
        """A table inside this one (prefix: its key path, ending in '.')."""
        return TomlTable(data, self.path, self.kind, f"{self.prefix}{prefix}")

    def get(self, key: str, typ: type | tuple[type, ...], expected: str, default: Any = ...) -> Any:
        if key not in self.data:
            if default is ...:
                raise self.wrong(key, expected)
            return default
        value = self.data[key]
        if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
            raise self.wrong(key, expected, value)
        return value

    def table(self, key: str) -> TomlTable:
        return self.sub(self.get(key, dict, "a table"), f"{key}.")

    def optional_table(self, key: str) -> TomlTable | None:
        value = self.get(key, dict, "a table", default=None)
        return None if value is None else self.sub(value, f"{key}.")

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self.get(key, list, "a list of strings")
        if not all(isinstance(v, str) for v in value):
            raise self.wrong(key, "a list of strings", value)
        return tuple(value)

    def str_dict(self, key: str) -> dict[str, str]:
        value = self.get(key, dict, "a table of strings", default={})
        if not all(isinstance(v, str) for v in value.values()):
            raise self.wrong(key, "a table of strings", value)
        return dict(value)

    def strings(
        self, key: str, default: Any = ..., choices: tuple[str, ...] = ()
    ) -> tuple[str, ...]:
        """A non-empty list of distinct strings (from choices, when given)."""
        if key not in self.data and default is not ...:
            return tuple(default)
        expected = "a list of strings" + (f" from {', '.join(choices)}" if choices else "")
        value = self.get(key, list, expected)
        if not all(isinstance(v, str) for v in value) or (
            choices and not set(value) <= set(choices)
        ):
            raise self.fail(key, f"is {value!r}, expected {expected}")
        if not value:
            raise self.fail(key, "is empty")
        if len(set(value)) != len(value):
            raise self.fail(key, f"lists an entry twice: {value!r}")
        return tuple(value)
