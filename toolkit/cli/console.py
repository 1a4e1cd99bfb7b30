"""A plain console for listings that are read or piped (no markup, a fixed width when piped)."""

from __future__ import annotations

from rich.console import Console


def plain_console() -> Console:
    console = Console(markup=False, highlight=False)
    if not console.is_terminal:  # piped or captured: no terminal width to fit
        console.width = 120
    return console
