"""`bundle build`: acquire → resolve → decide → apply, as one short script of calls.

Everything that writes into the output folder happens after every decision has been made and
checked (missing DLLs, VC runtime version, conflicts, --locked): a failed build writes nothing
there. Files go first, the lock file last, so the lock always describes complete files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.acquire.artifacts import (
    Acquired,
    AcquireOptions,
    ProgressFactory,
    acquire_profile,
    dll_search_path,
)
from bundler.acquire.cache import Cache, files_sha256
from bundler.acquire.provenance import attach_provenance
from bundler.errors import ConfigError, LockMismatchError, MissingDependenciesError
from bundler.fit import require_fit
from bundler.lock import LOCK_NAME, Lock, LockedFile, differences, read_lock, write_lock
from bundler.plan import EdgeKind, Plan, PlanFile, Status
from bundler.profiles import Artifact, Profile, load_profile
from bundler.render.iss import ISS_NAME, IssResult, IssSettings, write_iss
from bundler.render.postbuild import PostbuildResult, PostbuildSettings, write_postbuild
from bundler.render.sbom import SBOM_NAME, write_sbom
from bundler.resolve import read_inputs, resolve
from bundler.ship.deploy import (
    Counters,
    Deployment,
    Placement,
    apply,
    output_lock,
    plan_deployment,
    same_file,
)
from bundler.system import load_system_policy
from bundler.vcruntime import apply_vc_runtime_policy, required_vc_runtime

if TYPE_CHECKING:  # bundler.ship.archive (py7zr) is imported only when --archive asks for it
    from bundler.ship.archive import ArchiveResult

LICENSES_DIR = "licenses"
VC_REDIST_NAME = "vc_redist.x64.exe"


@dataclass(frozen=True)
class BuildOptions:
    exe: Path
    profile: str
    cache_dir: Path
    out: Path | None = None
    search: tuple[Path, ...] = ()
    vc_runtime: str | None = None
    vc_redist: Path | None = None
    dry_run: bool = False
    clean: bool = False
    force: bool = False
    link: bool = False
    locked: bool = False
    sbom: bool = False
    iss: Path | bool = True  # True: setup.iss in the output folder; False: no script
    installer: IssSettings = field(default_factory=IssSettings)
    archive: Path | None = None
    # postbuild.cmd and postbuild.event.xml in the output folder; None: neither
    postbuild: PostbuildSettings | None = field(default_factory=PostbuildSettings)
    acquire: AcquireOptions = field(default_factory=AcquireOptions)

    def iss_path(self, out: Path) -> Path | None:
        if self.iss is False:
            return None
        return out / ISS_NAME if self.iss is True else Path(self.iss)


@dataclass(frozen=True)
class Source:
    """Where a placed file comes from, as the lock file records it."""

    kind: str
    plan_file: PlanFile | None = None
    artifact: Artifact | None = None
    archive_sha256: str | None = None
    member: str | None = None


@dataclass
class BuildResult:
    out: Path
    plan: Plan
    lock: Lock
    deployment: Deployment
    counters: Counters
    dry_run: bool
    iss: IssResult | None = None
    archive: ArchiveResult | None = None
    postbuild: PostbuildResult | None = None


def build(options: BuildOptions, progress: ProgressFactory) -> BuildResult:
    profile = load_profile(options.profile)
    (app,) = read_inputs([options.exe], profile, options.search)  # before any download
    out = options.out or options.exe.parent
    mode = options.vc_runtime or profile.vc_runtime
    if mode == "installer" and options.vc_redist is None:
        raise ConfigError(
            "--vc-runtime installer needs --vc-redist PATH (the vc_redist.x64.exe to ship)."
        )
    options.installer.checked()  # invalid installer settings fail before any work
    if options.archive is not None:
        from bundler.ship.archive import archive_format

        archive_format(options.archive)  # a wrong suffix fails before any work
    read_lock(out / LOCK_NAME)  # a bad lock fails before any download (read again to deploy)
    cache = Cache(options.cache_dir)
    acquired = acquire_profile(profile, cache, options.acquire, progress)
    search = list(options.search) + dll_search_path(acquired)
    plan = resolve(
        [app], profile, load_system_policy(), search, app_folders_first=False, unreadable="error"
    )
    plan = apply_vc_runtime_policy(attach_provenance(plan, acquired), mode)
    require_fit(plan, profile)  # a pin of another version than the DLLs import: exit 21
    require_complete(plan)
    if profile.signatures == "verify":
        from bundler.signatures import verify_vendor_signatures

        bundled = plan.with_status(Status.BUNDLED)
        verify_vendor_signatures([(i.name, Path(i.source or "")) for i in bundled], profile)
    placed = placements(plan, profile, acquired, options, out)
    if options.dry_run:
        return _deploy(options, out, plan, profile, mode, placed, cache, progress)
    with output_lock(out):  # the old lock is read again inside: another build may have run
        result = _deploy(options, out, plan, profile, mode, placed, cache, progress)
        _write_views(options, out, profile, app.name, result, progress)
    return result


def _deploy(
    options: BuildOptions,
    out: Path,
    plan: Plan,
    profile: Profile,
    mode: str,
    placed: list[tuple[Placement, Source]],
    cache: Cache,
    progress: ProgressFactory,
) -> BuildResult:
    """Decide against the lock file as it is now, then (unless --dry-run) place the files
    and write the lock last, so that the lock always describes complete files."""
    previous = read_lock(out / LOCK_NAME)
    sizes = {item.name: item.size for item in previous.files} if previous else {}
    deployment = plan_deployment(
        [p for p, _ in placed], out, sizes, options.link, options.force, options.clean
    )
    counters = Counters()
    lock = _lock(
        plan, profile, mode, placed, placement_hashes(placed, out, previous, cache, counters)
    )
    if options.locked:
        _check_locked(out, previous, lock)
    result = BuildResult(out, plan, lock, deployment, counters, options.dry_run)
    if options.dry_run:
        return result
    size = deployment.bytes_to_write
    apply(deployment, counters, progress(f"deploying into {out}", size) if size else None)
    write_lock(out / LOCK_NAME, lock)
    return result


def _write_views(
    options: BuildOptions,
    out: Path,
    profile: Profile,
    app_name: str,
    result: BuildResult,
    progress: ProgressFactory,
) -> None:
    """The SBOM, setup script, post-build files and archive: views of the written lock."""
    lock = result.lock
    if options.sbom:
        write_sbom(out / SBOM_NAME, lock, profile, app_name)
    script = options.iss_path(out)
    if script is not None:
        result.iss = write_iss(lock, out, script, options.installer.checked())
    if options.postbuild is not None:
        result.postbuild = write_postbuild(lock, out, out, options.postbuild)
    if options.archive is not None:
        from bundler.ship.archive import write_archive

        total = sum(item.size for item in lock.files)
        packing = progress(f"packing {options.archive}", total)
        result.archive = write_archive(out, lock, options.archive, packing)


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


def placements(
    plan: Plan,
    profile: Profile,
    acquired: Sequence[Acquired],
    options: BuildOptions,
    out: Path,
) -> list[tuple[Placement, Source]]:
    """Every file the output folder must hold: the app (when --out is elsewhere), the bundled
    DLLs, the artifacts' licence files, and vc_redist.x64.exe in installer mode."""
    placed: list[tuple[Placement, Source]] = []
    if options.exe.parent.resolve() != out.resolve():
        app = plan.with_status(Status.APP)[0]
        placed.append((Placement(options.exe.name, options.exe, app.size or 0), Source("app", app)))
    placed += bundled_placements(plan)
    placed += licence_placements(plan, profile, acquired)
    if options.vc_redist is not None and plan.with_status(Status.REDIST):
        size = options.vc_redist.stat().st_size
        placed.append((Placement(VC_REDIST_NAME, options.vc_redist, size), Source("installer")))
    return placed


def bundled_placements(plan: Plan, folder: str = "") -> list[tuple[Placement, Source]]:
    """Every bundled DLL of the plan, placed in `folder` of the output ("" for its top)."""
    placed = []
    for item in plan.with_status(Status.BUNDLED):
        assert item.source is not None
        source = Source("bundled", item, archive_sha256=item.archive_sha256, member=item.member)
        name = f"{folder}/{item.name}" if folder else item.name
        placed.append((Placement(name, Path(item.source), item.size or 0), source))
    return placed


def licence_placements(
    plan: Plan, profile: Profile, acquired: Sequence[Acquired]
) -> list[tuple[Placement, Source]]:
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
    placed: Sequence[tuple[Placement, Source]],
    out: Path,
    previous: Lock | None,
    cache: Cache,
    counters: Counters,
) -> dict[str, str]:
    """SHA-256 of every placed file without re-reading what is already known: the cache's
    memo of extracted members, else the previous lock for a target that is still identical
    to its source; only then the file itself (counted in counters.hashed), all such files
    at once on parallel threads."""
    locked = previous.by_name() if previous else {}
    hashes: dict[str, str] = {}
    unknown: list[tuple[Placement, Source]] = []
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


def _lock(
    plan: Plan,
    profile: Profile,
    mode: str,
    placed: Sequence[tuple[Placement, Source]],
    hashes: dict[str, str],
) -> Lock:
    files = locked_files(plan, placed, hashes)
    drivers = tuple(sorted(item.name for item in plan.with_status(Status.DRIVER)))
    app = plan.with_status(Status.APP)[0]
    return Lock(
        plan.profile,
        plan.architecture,
        mode,
        files,
        drivers,
        app=app.name,
        app_file_version=app.file_version,
        app_product_name=app.product_name,
        min_windows=plan.min_windows,
        vc_runtime_min=required_vc_runtime(plan),
        gpu_driver=profile.gpu_driver,
    )


def locked_files(
    plan: Plan, placed: Sequence[tuple[Placement, Source]], hashes: dict[str, str]
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
                origin=item.origin if item else None,
                archive_sha256=source.archive_sha256,
                member=source.member,
                why=plan.why(item.key) if item and source.kind == "bundled" else None,
                **_recorded_imports(plan, item if source.kind == "bundled" else None),
                mtime_ns=_mtime_ns(placement.source),
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


def _mtime_ns(path: Path) -> int | None:
    """The deployed copy keeps its source's time (bundler.ship.deploy), so the source's is it."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _check_locked(out: Path, previous: Lock | None, lock: Lock) -> None:
    if previous is None:
        raise LockMismatchError(
            f"{out / LOCK_NAME}: --locked needs an existing lock file; build once without it."
        )
    changes = differences(previous, replace(lock, tool_version=previous.tool_version))
    if changes:
        shown = "; ".join(changes[:8]) + (
            f"; and {len(changes) - 8} more" if len(changes) > 8 else ""
        )
        raise LockMismatchError(
            f"{out / LOCK_NAME}: the build would differ from the lock file ({shown}); nothing "
            "was written. Rebuild without --locked to update it."
        )
