"""Decide layer of the audit: the exact files to put back into a folder, with the artifact and
pinned sources each comes from (`bundle build` into the folder restores them all)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bundler.audit.closure import inferred
from bundler.audit.explain import supplier
from bundler.audit.report import Audited, Restore
from bundler.target.profiles import (
    dll_key,
    is_pattern,
)

if TYPE_CHECKING:
    pass


def restore_list(audited: Audited) -> tuple[Restore, ...]:
    """Every file to put back, once, sorted by name: the closure's missing DLLs (concrete
    names where the lock or the profile records them) and the lock's absent files."""
    wanted: dict[str, str] = {}
    for item in audited.plan.missing:
        wanted.setdefault(item.key, item.name)
    for name in absent_locked(audited):
        wanted.setdefault(dll_key(name), name)
    return tuple(_restore(audited, key, wanted[key]) for key in sorted(wanted))


def absent_locked(audited: Audited) -> list[str]:
    """The lock's files (and its app) absent from the folder, but for those of a pack the
    setup left out (BA405: not installed by choice, nothing to restore)."""
    if not audited.lock:
        return []
    listed = [entry.name for entry in audited.lock.files]
    if audited.lock.app and audited.lock.app not in listed:
        listed.append(audited.lock.app)
    left_out = tuple(pack.folder + "/" for pack in audited.packs_left_out)
    return [
        name
        for name in listed
        if not name.startswith(left_out) and not (audited.folder.path / name).is_file()
    ]


def _restore(audited: Audited, key: str, name: str) -> Restore:
    entry = audited.locked.get(key)
    found = supplier(audited.profile, name)
    origins, _ = inferred(audited, key)
    return Restore(
        name=name,
        artifact=(entry.artifact if entry else None) or (found.artifact if found else None),
        version=found.version if found else None,
        origin=entry.origin if entry else None,
        sha256=entry.sha256 if entry else None,
        sources=found.sources if found else (),
        known_from=" and ".join(origins) or None,
        note="no concrete file name is known (a pattern)" if is_pattern(name) else None,
    )
