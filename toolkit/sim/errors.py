"""Simulator errors: each names what failed and where, so a wrong answer is never silent."""

from __future__ import annotations

from ..errors import UserError


class SimError(UserError):
    """Base class of every simulator error."""


class PayloadError(SimError):
    """The payload (vela_bin_stream, npz or command stream) is malformed or truncated."""


class UnsupportedError(SimError):
    """A command, mode or operation this simulator does not implement."""

    offset: int | None = None  # command-stream offset of the operation, once planning knows it


class RegionError(SimError):
    """An access outside a memory region, or to a region that does not exist."""


def at(offset: int, name: str, value: int) -> str:
    """How errors point at a command: name, value and command-stream byte offset."""
    return f"{name} (value {value:#x}) at command-stream offset {offset:#x}"
