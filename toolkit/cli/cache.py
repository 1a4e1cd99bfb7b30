"""`etk cache`: the shared compile cache (ETK_CACHE_DIR): its size, clear it, prune it to a size."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..errors import UserError
from ..lower.cache_entries import (
    Removal,
    least_recently_used,
    list_entries,
    remove_entries,
    remove_stale_partials,
)
from ..lower.compile_cache import CACHE_DIR_ENV, cache_root, unusable_cache

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([KMGT]?)(?:I?B)?")


def parse_size(text: str) -> int:
    """5G, 500M, 1.5G, 800K (powers of 1024; B, iB suffixes allowed) or plain bytes."""
    match = _SIZE.fullmatch(text.strip().upper())
    if not match:
        raise UserError(
            f"--max-size {text!r} is not a size: give bytes or a number with K, M, G or T "
            "(powers of 1024), e.g. 500M or 5G"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def format_size(size: int) -> str:
    """Exact bytes, with a readable figure from 1 KiB on."""
    value, unit = float(size), ""
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{size} bytes ({value:.1f} {unit})" if unit else f"{size} bytes"


def _entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _root() -> Path | None:
    root = cache_root()
    if root is None:
        print(
            f"the compile cache is off: set {CACHE_DIR_ENV} to a folder to share compiled "
            "programs between runs and processes"
        )
        return None
    if root.exists() and not root.is_dir():
        raise unusable_cache(root, "it is not a folder")
    return root


def _print_busy(removal: Removal) -> None:
    if removal.busy:
        keys = ", ".join(e.key for e in removal.busy)
        print(f"left {_entries(len(removal.busy))} in use by another process: {keys}")
    if removal.stuck:
        keys = ", ".join(e.key for e in removal.stuck)
        print(f"could not remove {_entries(len(removal.stuck))} (check permissions): {keys}")


def _info(args) -> int:
    root = _root()
    if root is None:
        return 0
    entries = list_entries(root)
    print(f"compile cache: {root}")
    print(f"{_entries(len(entries))}, {format_size(sum(e.size for e in entries))}")
    return 0


def _clear(args) -> int:
    root = _root()
    if root is None:
        return 0
    removal = remove_entries(root, list_entries(root))
    if root.is_dir():
        remove_stale_partials(root)
    print(f"removed {_entries(len(removal.removed))}, {format_size(removal.freed)}, from {root}")
    _print_busy(removal)
    return 0


def _prune(args) -> int:
    max_size = parse_size(args.max_size)
    root = _root()
    if root is None:
        return 0
    entries = list_entries(root)
    removal = remove_entries(root, least_recently_used(entries, max_size))
    left = [e for e in entries if e not in removal.removed]
    print(
        f"removed {_entries(len(removal.removed))}, {format_size(removal.freed)}; "
        f"{_entries(len(left))} left, {format_size(sum(e.size for e in left))}"
    )
    _print_busy(removal)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache", help=f"the shared compile cache ({CACHE_DIR_ENV}): size, clear, prune"
    )
    parser.set_defaults(func=_info)
    actions = parser.add_subparsers(
        dest="cache_action",
        metavar="[ACTION]",
        title="actions (optional: plain `etk cache` is info)",
    )
    actions.add_parser("info", help="the folder, its entries and their size (the default)")
    actions.add_parser("clear", help="remove every entry").set_defaults(func=_clear)
    prune = actions.add_parser("prune", help="remove the least recently used entries")
    prune.add_argument(
        "--max-size",
        required=True,
        metavar="SIZE",
        help="keep at most this much, e.g. 500M or 5G (powers of 1024)",
    )
    prune.set_defaults(func=_prune)
