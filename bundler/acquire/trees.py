"""Act layer: the extracted trees of every archive a command acquired, made at once (one pool of
threads inflates the members of every archive, largest first; one lock per archive across
processes), and the `Acquired` record of each artifact over its tree: its DLL folders, found
by scanning, and where its bytes came from."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bundler.acquire.acquired import Acquired
from bundler.acquire.cache import Cache
from bundler.acquire.extract import Extracted, Request, extract_all, is_extracted
from bundler.acquire.source_choice import archive_filename, pinned_location
from bundler.acquire.sources import _DISK_FULL
from bundler.progress_meter import ProgressFactory
from bundler.target.profiles import Artifact, PipSource, UrlSource, has_sdk, matches

# An extraction failing with one of these could not write into the cache
_CANNOT_WRITE = {*_DISK_FULL, errno.EROFS, errno.EACCES, errno.EPERM}


@dataclass(frozen=True)
class PendingArchive:
    """A verified archive in the cache whose tree is still to be extracted (or reused)."""

    artifact: Artifact
    source: UrlSource | PipSource
    blob: Path
    origin: str
    cached: bool
    skipped: tuple[str, ...]


def unpack_archives(
    outcomes: Sequence[Acquired | PendingArchive], cache: Cache, progress: ProgressFactory
) -> list[Acquired]:
    """Extract (or reuse) the trees of all archives at once: one pool of threads inflates
    the members of every archive, largest first."""
    archives = [item for item in outcomes if isinstance(item, PendingArchive)]
    requests = [
        Request(item.blob, item.source.sha256, item.artifact.licenses, has_sdk(item.source))
        for item in archives
    ]
    root = cache.extract_root
    fresh = [
        archive_filename(item.source)
        for item, request in zip(archives, requests, strict=True)
        if not is_extracted(root, request.sha256, request.licence_names, sdk=request.sdk)
    ]
    what = fresh[0] if len(fresh) == 1 else f"{len(fresh)} archives"
    report = progress(f"extracting {what}", None) if fresh else None
    with ExitStack() as held:
        # One extraction per archive across processes: several builds on one cache would
        # otherwise each inflate the same archive, the losers' trees thrown away. Locks
        # in sorted order (no deadlock); extract_all looks again for a complete tree
        # once they are held, so a waiter reuses the winner's.
        if fresh:
            names = {item.source.sha256: archive_filename(item.source) for item in archives}
            for sha256, name in sorted(names.items()):
                held.enter_context(cache.lock(sha256, f"the extraction of {name}"))
        try:
            trees = iter(extract_all(requests, root, progress=report))
        except OSError as exc:  # the partial trees are gone already (extract.py)
            if exc.errno not in _CANNOT_WRITE:
                raise
            raise cache.write_error(exc) from exc
    return [
        _acquired(item, next(trees)) if isinstance(item, PendingArchive) else item
        for item in outcomes
    ]


def _acquired(item: PendingArchive, tree: Extracted) -> Acquired:
    source, artifact = item.source, item.artifact
    return Acquired(
        artifact=artifact.name,
        version=artifact.version,
        source=source.kind,
        origin=item.origin,
        pinned=pinned_location(source),
        filename=archive_filename(source),
        sha256=source.sha256,
        size=item.blob.stat().st_size,
        cached=item.cached,
        folder=tree.root,
        dll_folders=dll_folders(tree.root, artifact),
        skipped=item.skipped,
        sdk=has_sdk(source),
    )


def dll_folders(root: Path, artifact: Artifact) -> tuple[Path, ...]:
    """Folders of the extracted tree holding the artifact's DLLs (archives differ: lib/, bin/,
    onnxruntime/capi/, a wheel's .data/data/Scripts/), found by scanning, never hard-coded.
    os.walk, not Path.rglob: this runs on every build, and a Path per file costs more."""
    folders: dict[Path, int] = {}
    for folder, _, names in os.walk(root):
        found = sum(1 for name in names if any(matches(want, name) for want in artifact.provides))
        if found:
            folders[Path(folder)] = found
    return tuple(sorted(folders, key=lambda folder: (-folders[folder], str(folder))))
