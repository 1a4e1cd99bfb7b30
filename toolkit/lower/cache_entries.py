"""The compile cache's entries, for `etk cache`: list them, remove them (each under its key's lock,
so a process copying or filling an entry is not broken), choose the least recently used to prune.

An entry is a folder ETK_CACHE_DIR/KEY (compile_cache.py); `.KEY.partial-*` folders are copies
being published, or left by an interrupted one, and go with a clear.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .compile_cache import key_lock


@dataclass(frozen=True)
class CacheEntry:
    key: str
    path: Path
    size: int  # bytes of its files
    last_used: float  # the folder's mtime: written, or last copied from


@dataclass(frozen=True)
class Removal:
    removed: tuple[CacheEntry, ...]
    busy: tuple[CacheEntry, ...]  # another process held the key: left in place
    stuck: tuple[CacheEntry, ...] = ()  # could not be removed (permissions, a busy mount)

    @property
    def freed(self) -> int:
        return sum(e.size for e in self.removed)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def list_entries(root: Path) -> list[CacheEntry]:
    """The entries in root, least recently used first (none when root does not exist)."""
    if not root.is_dir():
        return []
    entries = [  # a link is no entry etk made: neither counted nor followed
        CacheEntry(p.name, p, _size(p), p.stat().st_mtime)
        for p in root.iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    ]
    return sorted(entries, key=lambda e: (e.last_used, e.key))


def least_recently_used(entries: list[CacheEntry], max_size: int) -> list[CacheEntry]:
    """The oldest entries whose removal brings the total down to max_size bytes."""
    total = sum(e.size for e in entries)
    chosen = []
    for entry in sorted(entries, key=lambda e: (e.last_used, e.key)):
        if total <= max_size:
            break
        chosen.append(entry)
        total -= entry.size
    return chosen


def remove_entries(root: Path, entries: list[CacheEntry]) -> Removal:
    """Remove each entry holding its key's lock; an entry in use by another process stays."""
    removed: list[CacheEntry] = []
    busy: list[CacheEntry] = []
    stuck: list[CacheEntry] = []
    for entry in entries:
        with key_lock(root, entry.key, wait=False) as held:
            if not held:
                busy.append(entry)
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            (stuck if os.path.lexists(entry.path) else removed).append(entry)
    return Removal(tuple(removed), tuple(busy), tuple(stuck))


def remove_stale_partials(root: Path) -> None:
    """Partial copies whose key nobody holds (a publish interrupted before its rename)."""
    for partial in root.glob(".*.partial-*"):
        key = partial.name[1:].split(".partial-")[0]
        with key_lock(root, key, wait=False) as held:
            if held:
                shutil.rmtree(partial, ignore_errors=True)
