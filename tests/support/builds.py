"""`bundle build` as the tests run it on the session's caches, and copies of a built folder.

`build` runs the command (tests.support.runs.bundle_from_cache); GENERATED names the files a build
writes beside its payload (the lock and its views, which the lock does not list). A field
failure is made from a copy of a built folder: `linked_copy` and `broken_copy` make one of hard
links, minus a file or a few; `patched_copy` makes a real copy of one file, to patch it without
patching the session's cache through a hard link."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.runs import bundle_from_cache

# Views of the lock written beside it, and the build's local note of its files' times
# (bundle.times.json); not payload, so not in the lock.
GENERATED = (
    "bundle.lock.json",
    "bundle.times.json",
    "bundle-doctor.dat",
    "setup.iss",
    "postbuild.cmd",
    "postbuild.event.xml",
)


def build(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return bundle_from_cache("build", *args, cwd=cwd)


def linked_copy(folder: Path, target: Path, without: str) -> Path:
    """A copy of a bundle made of hard links, minus one file."""
    for path in folder.rglob("*"):
        if path.is_file() and path.name != without:
            destination = target / path.relative_to(folder)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, destination)
    return target


def broken_copy(bundle: Path, target: Path, *remove: str) -> Path:
    """A hard-linked copy of the bundle minus `remove` (unlinking a link leaves the cache)."""
    linked_copy(bundle, target, without="")
    for name in remove:
        (target / name).unlink()
    return target


def patched_copy(original: Path, target: Path) -> Path:
    """A real copy to patch: a hard link would carry the patch into the session's cache."""
    if target.exists():
        target.unlink()
    shutil.copyfile(original, target)
    assert target.stat().st_ino != original.stat().st_ino
    return target
