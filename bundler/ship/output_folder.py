"""Read/decide layer: the output folder's files as data, shared by the pipelines that fill it
and the deployment that writes them.

A `Placement` is one file that must be there; `same_file` says whether the copy there already is
its source (the quick check, a stat of each); `Counters` count what a build did to the folder
(copied, cloned, linked, hashed, ...). Nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Placement:
    """One file that must exist in the output folder."""

    name: str  # file name, relative to the output folder (posix, may include licenses/...)
    source: Path
    size: int


def same_file(source: Path, target: Path) -> bool:
    """The quick check (as rsync's): same inode, or same size and modification time."""
    try:
        a, b = source.stat(), target.stat()
    except OSError:
        return False
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        return True
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


@dataclass
class Counters:
    """What a build did to the output folder, counted as it goes (the views show it)."""

    copied: int = 0  # bytes written (bytes_written), by the kernel's copy or by hand
    cloned: int = 0  # sharing the source's blocks: FICLONE, or block cloning on Windows
    linked: int = 0
    link_fallbacks: int = 0  # --link asked, but the cache is on another volume: copied
    skipped: int = 0
    removed: int = 0
    hashed: int = 0
    bytes_written: int = 0
