"""Decide layer shared by `bundle build` and `bundle msbuild`: what a bundle folder holds
(`Placed`: each file's placement and where it comes from), the hashes of those files without
re-reading what is known, and the lock file's record of them. Neither pipeline imports the
other's internals; both import these."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.acquire.acquired import Acquired, MemberHashes
from bundler.closure.lock import Lock, LockedFile
from bundler.closure.plan import EdgeKind, Plan, PlanFile, Status
from bundler.disk.digest import files_sha256
from bundler.errors import IntegrityError, MissingDependenciesError
from bundler.ship.output_folder import Counters, Placement, same_file
from bundler.target.profiles import Artifact, Profile

if TYPE_CHECKING:  # bundler.ship.archive (py7zr) is imported only when --archive asks for it
    pass


LICENSES_DIR = "licenses"


@dataclass(frozen=True)
class Source:
    """Where a placed file comes from, as the lock file records it."""

    kind: str
    plan_file: PlanFile | None = None
    artifact: Artifact | None = None
    archive_sha256: str | None = None
    member: str | None = None
    pinned: str | None = None  # the SHA-256 a manifest pins for this very file (an EP pack's)
    origin: str | None = None  # the pinned source, where no plan file says it (an EP pack's)


Placed = tuple[Placement, Source]  # a file of the bundle folder, and where it comes from


def require_complete(plan: Plan) -> None:
    if not plan.missing:
        return
    details = []
    for item in plan.missing:
        why = plan.why(item.key)
        details.append(f"{item.name} (needed by {why})" if why else item.name)
    raise MissingDependenciesError(
        f"the closure is incomplete, nothing was written: missing {'; '.join(details)}. "
        "Run 'bundle deps' with the same options for the full tree, or add --search DIR."
    )


def bundled_placements(plan: Plan, folder: str = "") -> list[Placed]:
    """Every bundled DLL of the plan, placed in `folder` of the output ("" for its top)."""
    placed = []
    for item in plan.with_status(Status.BUNDLED):
        assert item.source is not None
        source = Source("bundled", item, archive_sha256=item.archive_sha256, member=item.member)
        name = f"{folder}/{item.name}" if folder else item.name
        placed.append((Placement(name, Path(item.source), item.size or 0), source))
    return placed


def licence_placements(plan: Plan, profile: Profile, acquired: Sequence[Acquired]) -> list[Placed]:
    """licenses/<artifact>/<file> for every artifact that ships a DLL of the plan."""
    used = {item.artifact for item in plan.with_status(Status.BUNDLED) if item.artifact}
    artifacts = {artifact.name: artifact for artifact in profile.artifacts}
    placed = []
    for item in acquired:
        if item.artifact not in used or item.sha256 is None:
            continue
        artifact = artifacts[item.artifact]
        wanted = {name.lower() for name in artifact.licenses}
        first: dict[str, Path] = {}  # one file per licence name: the first in path order
        found = (Path(folder) / name for folder, _, names in os.walk(item.folder) for name in names)
        for path in sorted(path for path in found if path.name.lower() in wanted):
            first.setdefault(path.name.lower(), path)
        for path in first.values():
            member = path.relative_to(item.folder).as_posix()
            source = Source("license", None, artifact, item.sha256, member)
            name = f"{LICENSES_DIR}/{item.artifact}/{path.name}"
            placed.append((Placement(name, path, path.stat().st_size), source))
    return placed


def placement_hashes(
    placed: Sequence[Placed],
    out: Path,
    previous: Lock | None,
    cache: MemberHashes,
    counters: Counters,
) -> dict[str, str]:
    """SHA-256 of every placed file without re-reading what is already known: the cache's
    memo of extracted members, else the previous lock for a target that is still identical
    to its source; only then the file itself (counted in counters.hashed), all such files
    at once on parallel threads."""
    locked = previous.by_name() if previous else {}
    hashes: dict[str, str] = {}
    unknown: list[Placed] = []
    for placement, source in placed:
        known = None
        if source.archive_sha256 and source.member:
            known = cache.known_hash(source.archive_sha256, source.member, placement.source)
        entry = locked.get(placement.name)
        unchanged = entry is not None and entry.size == placement.size
        if known is None and unchanged and same_file(placement.source, out / placement.name):
            known = entry.sha256 if entry else None
        if known is None:
            unknown.append((placement, source))
        else:
            hashes[placement.name] = known
    computed = files_sha256([placement.source for placement, _ in unknown])
    for (placement, source), digest in zip(unknown, computed, strict=True):
        counters.hashed += 1
        if source.archive_sha256 and source.member:
            cache.remember_hash(source.archive_sha256, source.member, placement.source, digest)
        hashes[placement.name] = digest
    return {placement.name: hashes[placement.name] for placement, _ in placed}


def require_pins(placed: Sequence[Placed], hashes: dict[str, str]) -> None:
    """Every placed file whose manifest pins its SHA-256 has those bytes, before any is written."""
    for placement, source in placed:
        if source.pinned and hashes[placement.name] != source.pinned:
            raise IntegrityError(
                f"{placement.source}: SHA-256 {hashes[placement.name]}, not the pinned "
                f"{source.pinned} ({placement.name}); nothing was written. Run bundle cache "
                "clean, or check the mirror it came from."
            )


def locked_files(
    plan: Plan, placed: Sequence[Placed], hashes: dict[str, str]
) -> tuple[LockedFile, ...]:
    """The lock's record of every placed file: hash, size, version, provenance, and for a
    bundled DLL the shortest chain that needs it."""
    files = []
    for placement, source in placed:
        item = source.plan_file
        files.append(
            LockedFile(
                name=placement.name,
                kind=source.kind,
                sha256=hashes[placement.name],
                size=placement.size,
                file_version=item.file_version if item else None,
                artifact=item.artifact
                if item
                else (source.artifact.name if source.artifact else None),
                origin=item.origin if item else source.origin,
                archive_sha256=source.archive_sha256,
                member=source.member,
                why=plan.why(item.key) if item and source.kind == "bundled" else None,
                **_recorded_imports(plan, item if source.kind == "bundled" else None),
                mtime_ns=None,  # no local time in the lock: bundle.times.json
            )
        )
    return tuple(files)


def _recorded_imports(plan: Plan, item: PlanFile | None) -> dict[str, tuple[str, ...]]:
    """A bundled DLL's import and delay-import names as the Plan's edges hold them (API sets
    left out), for the audit of a folder where the DLL is gone."""
    if item is None:
        return {}
    found: dict[EdgeKind, list[str]] = {EdgeKind.IMPORT: [], EdgeKind.DELAY_IMPORT: []}
    for edge in plan.children(item.key):
        child = plan.file(edge.child)
        if edge.kind in found and child is not None and child.status is not Status.API_SET:
            found[edge.kind].append(child.name)
    return {
        "imports": tuple(found[EdgeKind.IMPORT]),
        "delay_imports": tuple(found[EdgeKind.DELAY_IMPORT]),
    }
