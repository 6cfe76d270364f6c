"""A new bundle cache that starts with another cache's verified archives and extracted trees as
hard links (instant, no bytes written), for a test that needs a cache of its own.

A cache's records (*.json) are rewritten by renaming, so they are copied; its locks, partial
downloads, rendered templates, runtime packs and Wine prefix stay the source's own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from filelock import FileLock

from tests.support.paths import test_cache_dir

# The kept cache of released wheels: the catalogue's derivations and checks, the 1.20.2
# derivation and the EP pack builds share it (one CUDA 12.4 set on disk, not three).
RELEASES = "releases"
OWN = ("locks", "tmp", "templates", "runtime-packs", "packs", "wineprefix")


def link_or_copy(path: str, into: str) -> None:
    """A cache's record (*.json, rewritten by renaming) copied; anything else hard-linked."""
    if path.endswith(".json"):
        shutil.copy2(path, into)
    else:
        os.link(path, into)


def linked_cache(source: Path, target: Path, without: str | None = None) -> Path:
    """`source`'s archives and trees in the new cache `target`, less an archive `without` (a
    SHA-256: its blob, record and tree), so that a build fetches that one itself; `target`
    back."""

    skipped = (*OWN, f"{without}*") if without else OWN
    shutil.copytree(
        source, target, copy_function=link_or_copy, ignore=shutil.ignore_patterns(*skipped)
    )
    return target


def kept_cache(name: str, seed: Path | None = None) -> Path:
    """A bundle cache kept in the test cache between runs (tests/support/paths.test_cache_dir()
    / bundle-caches / `name`), for a module that derives or checks many releases: the archives
    it fetched and verified once are not downloaded and extracted again on the next run, as a
    user's own cache would keep them. Whatever `seed` (this run's verified cache) holds and the
    kept one lacks comes in as hard links first, so a first run writes no more than a cache of
    its own would. Only for caches that bundle itself writes: a test that edits a cached file
    works on a linked copy (linked_cache), never here, or the next run would inherit it."""
    kept = test_cache_dir() / "bundle-caches" / name
    kept.mkdir(parents=True, exist_ok=True)
    with FileLock(kept.parent / f"{name}.lock"):
        if seed is not None:
            _link_missing(seed, kept)
    return kept


def _link_missing(source: Path, target: Path) -> None:
    """Hard links in `target` to what `source` holds and `target` lacks (records copied), less
    OWN; a file `target` has is left as it is."""
    for folder, subfolders, files in os.walk(source):
        here = Path(folder)
        subfolders[:] = [name for name in subfolders if here != source or name not in OWN]
        into = target / here.relative_to(source)
        into.mkdir(exist_ok=True)
        for name in files:
            if not (into / name).exists():
                link_or_copy(str(here / name), str(into / name))
