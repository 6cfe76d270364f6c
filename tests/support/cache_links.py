"""A new bundle cache that starts with another cache's verified archives and extracted trees as
hard links (instant, no bytes written), for a test that needs a cache of its own.

A cache's records (*.json) are rewritten by renaming, so they are copied; its locks, partial
downloads, rendered templates, runtime packs and Wine prefix stay the source's own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

OWN = ("locks", "tmp", "templates", "runtime-packs", "packs", "wineprefix")


def linked_cache(source: Path, target: Path, without: str | None = None) -> Path:
    """`source`'s archives and trees in the new cache `target`, less an archive `without` (a
    SHA-256: its blob, record and tree), so that a build fetches that one itself; `target`
    back."""

    def link_or_copy(path: str, into: str) -> None:
        if path.endswith(".json"):
            shutil.copy2(path, into)
        else:
            os.link(path, into)

    skipped = (*OWN, f"{without}*") if without else OWN
    shutil.copytree(
        source, target, copy_function=link_or_copy, ignore=shutil.ignore_patterns(*skipped)
    )
    return target
