"""Act layer: `bundle msbuild`, the folder a Visual Studio project imports (like NuGet's
build/native folder):

    include/...               ORT's C/C++ headers, laid out as below the release zip's include/
    lib/onnxruntime.lib       and the import library of every other ORT DLL that ships in bin/
    bin/*.dll                 the DLL closure of the profile's roots, resolved as bundle build does
    licenses/<artifact>/...   the licences of every artifact that ships a DLL
    bundle.lock.json          every file above, with SHA-256 and origin; written after them
    ort-bundle.props, ort-bundle.targets: rendered from the lock, last; and for projects that
    prefer a post-build event, postbuild.cmd (copies the DLLs of bin/) and postbuild.event.xml

ORT's headers, import library and DLLs come from one archive, the release zip (the PyPI wheels
carry no SDK, and mixing a wheel's DLLs with the zip's import library would mix two builds):
acquisition is asked for the SDK (AcquireOptions.sdk) and takes that artifact from its SDK
sources only. Every decision (SDK present, closure complete, no foreign file in the way) is made
before anything is written, and files are placed by deploy: a failed run writes nothing, and a
re-run with the same inputs copies nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from bundler.acquire.acquired import Acquired
from bundler.acquire.artifacts import AcquireOptions, acquire_profile
from bundler.acquire.cache import Cache
from bundler.acquire.extract import sdk_member
from bundler.closure.lock import LOCK_NAME, Lock
from bundler.closure.lockfile import read_lock, write_lock
from bundler.closure.plan import Plan, Status
from bundler.closure.times import write_times
from bundler.closure.vcruntime import required_vc_runtime
from bundler.errors import SdkMissingError
from bundler.render.engine import Templates
from bundler.render.msbuild_props import (
    BIN_DIR,
    DEFAULT_OUT,
    IMPORT_LIBRARY,
    INCLUDE_DIR,
    LIB_DIR,
    MsbuildFiles,
    write_msbuild_files,
)
from bundler.render.postbuild import PostbuildResult, write_postbuild
from bundler.render.render_settings import PostbuildSettings
from bundler.reporter import Reporter
from bundler.ship import placements
from bundler.ship.deploy import Deployment, apply, plan_deployment
from bundler.ship.output_folder import Counters, Placement
from bundler.ship.placements import Placed, Source
from bundler.ship.shipped import shipped_closure
from bundler.target.profiles import Artifact, Profile, dll_key, has_sdk, load_profile


@dataclass(frozen=True)
class MsbuildOptions:
    profile: str
    cache_dir: Path
    out: Path = DEFAULT_OUT
    link: bool = False  # hard-link files from the cache where the filesystem allows
    force: bool = False  # overwrite files in the folder that bundle did not write
    acquire: AcquireOptions = field(default_factory=AcquireOptions)
    lock_timeout: float | None = None  # the command's $BUNDLE_LOCK_TIMEOUT (None: wait on)


@dataclass
class MsbuildResult:
    out: Path
    plan: Plan
    lock: Lock
    deployment: Deployment
    counters: Counters
    removed: tuple[str, ...]  # files of an earlier run this layout no longer has
    files: MsbuildFiles
    postbuild: PostbuildResult


def lay_out(options: MsbuildOptions, report: Reporter, templates: Templates) -> MsbuildResult:
    """Acquire, resolve, decide every file of the folder, then write: files, lock, MSBuild
    (rendered by `templates`)."""
    profile = load_profile(options.profile)
    artifact = sdk_artifact(profile)  # before any download
    cache = Cache(options.cache_dir, report, lock_timeout=options.lock_timeout)
    acquired = acquire_profile(profile, cache, replace(options.acquire, sdk=True), report)
    plan = profile_closure(profile, acquired)
    placed = [
        *placements.bundled_placements(plan, BIN_DIR),
        *sdk_placements(plan, artifact, _acquired(acquired, artifact)),
        *placements.licence_placements(plan, profile, acquired),
    ]
    out = options.out
    previous = read_lock(out / LOCK_NAME)
    sizes = {item.name: item.size for item in previous.files} if previous else {}
    deployment = plan_deployment([p for p, _ in placed], out, sizes, options.link, options.force)
    counters = Counters()
    hashes = placements.placement_hashes(placed, out, previous, cache, counters)
    lock = folder_lock(plan, profile, placed, hashes)
    size = deployment.bytes_to_write
    apply(deployment, counters, report.progress(f"laying out {out}", size) if size else None)
    removed = remove_stale(out, deployment.stale)
    counters.removed += len(removed)
    if previous is None or previous.to_json() != lock.to_json():
        write_lock(out / LOCK_NAME, lock)  # an unchanged lock keeps its time stamp
    write_times(out, lock)
    files = write_msbuild_files(templates, lock, out)
    postbuild = write_postbuild(
        templates, postbuild_view(lock), out / BIN_DIR, out, PostbuildSettings()
    )
    return MsbuildResult(out, plan, lock, deployment, counters, removed, files, postbuild)


def sdk_artifact(profile: Profile) -> Artifact:
    """The artifact whose sources include one carrying the C/C++ SDK (ORT's release zip)."""
    for artifact in profile.artifacts:
        if any(has_sdk(source) for source in artifact.sources):
            return artifact
    raise SdkMissingError(
        f"profile {profile.name}: no artifact has a source with ORT's C/C++ headers and import "
        "library (a release zip marked sdk = true); use a profile that has one, such as "
        "ort-1.19.2-gpu-cuda12 or ort-1.19.2-cpu."
    )


def profile_closure(profile: Profile, acquired: Sequence[Acquired]) -> Plan:
    """The closure of the profile's roots in the acquired artifacts, with the profile's VC++
    runtime policy: the resolution of `bundle build` without an app (bundler.ship.shipped)."""
    plan = shipped_closure([], profile, acquired, vc_runtime=profile.vc_runtime, unreadable="error")
    placements.require_complete(plan)
    return plan


def sdk_placements(plan: Plan, artifact: Artifact, acquired: Acquired) -> list[Placed]:
    """include/<path below the archive's include/> for every header; lib/<name> for
    onnxruntime.lib and for the import library of every DLL that ships in bin/ (an import
    library of a DLL that does not ship would link an exe that cannot start). First in path
    order wins, like licence files. Raises when the tree has no headers or no onnxruntime.lib."""
    assert acquired.sha256 is not None  # SDK sources are archives
    shipped = {item.key for item in plan.with_status(Status.BUNDLED)}
    chosen: dict[str, Placed] = {}
    for path in sorted(acquired.folder.rglob("*")):
        member = path.relative_to(acquired.folder).as_posix()
        name = _sdk_name(member, shipped) if path.is_file() and sdk_member(member) else None
        if name is not None and name.lower() not in chosen:
            source = Source("sdk", None, artifact, acquired.sha256, member)
            chosen[name.lower()] = (Placement(name, path, path.stat().st_size), source)
    placed = list(chosen.values())
    _require_sdk(placed, acquired)
    return placed


def _sdk_name(member: str, shipped: set[str]) -> str | None:
    """Where an SDK member of the archive goes in the folder, or None when it is left out."""
    parts = PurePosixPath(member).parts
    base = parts[-1]
    if base.lower().endswith(".h"):
        below = parts[[part.lower() for part in parts].index("include") + 1 :]
        return "/".join((INCLUDE_DIR, *below))
    if base.lower() == IMPORT_LIBRARY or dll_key(f"{base[:-4]}.dll") in shipped:
        return f"{LIB_DIR}/{base}"
    return None


def _require_sdk(placed: Sequence[Placed], acquired: Acquired) -> None:
    names = {placement.name.lower() for placement, _ in placed}
    missing = []
    if not any(name.startswith(f"{INCLUDE_DIR}/") for name in names):
        missing.append("no C/C++ headers under include/")
    if f"{LIB_DIR}/{IMPORT_LIBRARY}" not in names:
        missing.append(f"no lib/{IMPORT_LIBRARY}")
    if missing:
        raise SdkMissingError(
            f"{acquired.filename} (from {acquired.origin}) has {' and '.join(missing)}; "
            "bundle msbuild needs ORT's release zip as published: pass --mirror DIR holding it."
        )


def _acquired(acquired: Sequence[Acquired], artifact: Artifact) -> Acquired:
    return next(item for item in acquired if item.artifact == artifact.name)


def folder_lock(
    plan: Plan,
    profile: Profile,
    placed: Sequence[Placed],
    hashes: dict[str, str],
) -> Lock:
    """The folder's lock: its files, and the target facts a build lock carries (no app)."""
    return Lock(
        plan.profile,
        plan.architecture,
        profile.vc_runtime,
        placements.locked_files(plan, placed, hashes),
        tuple(sorted(item.name for item in plan.with_status(Status.DRIVER))),
        min_windows=plan.min_windows,
        vc_runtime_min=required_vc_runtime(plan),
        gpu_driver=profile.gpu_driver,
        cuda_ep=profile.cuda_ep,
    )


def postbuild_view(lock: Lock) -> Lock:
    """The folder's lock as its postbuild.cmd sees it: the DLLs only, named relative to bin/,
    so the script (rendered with bin/ as its source) copies each straight into TARGET_DIR,
    not into a bin folder below it. Headers and libraries are not the app's; licences stay here."""
    prefix = f"{BIN_DIR}/"
    dlls = [item for item in lock.files if item.kind == "bundled"]
    return replace(lock, files=tuple(replace(d, name=d.name.removeprefix(prefix)) for d in dlls))


def remove_stale(out: Path, stale: Sequence[str]) -> tuple[str, ...]:
    """Remove files an earlier run wrote (its lock lists them) that this layout no longer has:
    `bin\\*.dll` would copy a stale DLL into every project. Names that could point outside the
    folder are never touched."""
    removed = []
    for name in stale:
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts:
            continue
        path = out / relative
        if path.is_file():
            path.unlink()
            removed.append(name)
    return tuple(removed)
