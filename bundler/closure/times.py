"""Act layer: bundle.times.json, the build's local note of each placed file's time stamp, beside
the lock file and never shipped (it is not in Lock.payload(): no setup installs it, no archive
holds it, `bundle publish` lists it nowhere).

The lock is published and installed, so it records nothing of the machine that built it: a file's
time differs from checkout to checkout and would make two builds of the same inputs differ
(docs/reproducible.md). The audit's cheap check (BA404: a file whose time is not the one the
build left) reads the times from here instead; locks written before kept them in `mtime_ns`,
which the audit still reads. The note names the lock it belongs to by the lock file's SHA-256,
so a lock written by another build (or copied in) is never judged against stale times."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bundler.closure.lock import LOCK_NAME, Lock
from bundler.disk import files
from bundler.errors import OutputError

TIMES_NAME = "bundle.times.json"
_VERSION = 1


def write_times(folder: Path, lock: Lock) -> None:
    """Note the time of each of the lock's files in `folder`, after the lock was written there."""
    stamps: dict[str, int] = {}
    for item in lock.files:
        try:
            stamps[item.name] = (folder / item.name).stat().st_mtime_ns
        except OSError:
            continue
    note = {"schema_version": _VERSION, "lock": _digest(folder / LOCK_NAME), "mtime_ns": stamps}
    text = json.dumps(note, indent=1, sort_keys=True) + "\n"
    path = folder / TIMES_NAME
    if _text(path) == text:
        return  # an unchanged note keeps its time: a no-op rebuild changes nothing
    try:
        files.write_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        raise OutputError(
            f"{path}: cannot write ({exc.strerror or exc}); check free space and permissions "
            "there, then build again."
        ) from exc


def read_times(folder: Path, lock_file: Path | None = None) -> dict[str, int]:
    """The times noted beside the lock `lock_file` (default: the folder's), by file name; empty
    when there is no note, it is unreadable, or it belongs to another lock."""
    lock_file = lock_file or folder / LOCK_NAME
    try:
        note = json.loads((lock_file.parent / TIMES_NAME).read_text(encoding="utf-8"))
        if note.get("schema_version") != _VERSION or note.get("lock") != _digest(lock_file):
            return {}
        return {str(name): int(ns) for name, ns in note["mtime_ns"].items()}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return {}


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def _digest(lock_file: Path) -> str | None:
    try:
        return hashlib.sha256(lock_file.read_bytes()).hexdigest()
    except OSError:
        return None
