"""Decide layer of the audit: the checks. Each is one small function over `Audited` returning
findings of one catalogue code (bundler.findings); a new check is a catalogue entry plus a
function in CHECKS."""

from __future__ import annotations

from collections.abc import Iterator

from bundler.audit.closure import (
    is_missing,
    missing_at_start,
    missing_later,
    provider_fails,
    providers_shared_missing,
    vc_runtime_part_missing,
)
from bundler.audit.report import Audited, CheckFunction, is_pe_name
from bundler.audit.restore import absent_locked
from bundler.binary.ort_build import ort_release
from bundler.binary.pe import format_version
from bundler.closure.gpu import target_findings
from bundler.closure.lock import PACK_MARKER
from bundler.closure.plan import Status
from bundler.closure.vcruntime import DEBUG_CRT_DLLS, outdated_runtimes
from bundler.disk.digest import file_sha256
from bundler.findings import Finding, finding
from bundler.target.profile_names import version_key
from bundler.target.profiles import (
    dll_key,
    profile_ort_release,
    versioned,
)

CUDNN = "cudnn"
PROVIDER_PREFIX = "onnxruntime_providers_"
TIME_TOLERANCE_NS = 2_000_000_000  # FAT and zip keep times to 2 s


def unreadable_files(audited: Audited) -> Iterator[Finding]:
    for name, message in audited.folder.unreadable.items():
        yield finding("BA001", (name,), message)


def cuda_version_mismatch(audited: Audited) -> Iterator[Finding]:
    """A versioned NVIDIA DLL whose version is not the one the closure needs for its family:
    cudart64_110.dll (CUDA 11) or cudnn64_8.dll beside a CUDA 12 / cuDNN 9 provider."""
    wanted: dict[str, dict[str, str]] = {}
    for item in audited.plan.with_status(Status.BUNDLED, Status.MISSING):
        parsed = versioned(item.name)
        if parsed:
            wanted.setdefault(parsed[0], {}).setdefault(parsed[1], item.name)
    for name in audited.folder.pe:
        parsed = versioned(name)
        if parsed is None or parsed[0] not in wanted or parsed[1] in wanted[parsed[0]]:
            continue
        family, version = parsed
        needed = sorted(wanted[family].values(), key=str.lower)
        message = (
            f"{name} is {family} version {version}; the closure needs {family} "
            f"{'/'.join(sorted(wanted[family]))} ({', '.join(needed)})"
        )
        yield finding("BA201", (name,), message, wanted=", ".join(needed))


def vc_runtime_too_old(audited: Audited) -> Iterator[Finding]:
    for runtime, newest in outdated_runtimes(audited.plan):
        message = (
            f"{runtime.name} {runtime.file_version or 'without a version'} is older than "
            f"{newest.name}'s MSVC linker {newest.linker_version}"
        )
        yield finding("BA202", (runtime.name,), message, needed=newest.linker_version or "?")


def cudnn_mixed_builds(audited: Audited) -> Iterator[Finding]:
    """cuDNN loads its sub-libraries at run time and they must come from one build: compare
    the file versions of every cuDNN DLL of one major (those without a version cannot tell)."""
    builds: dict[str, dict[str, list[str]]] = {}
    for name, info in audited.folder.pe.items():
        parsed = versioned(name)
        if parsed and parsed[0] == CUDNN and info.file_version:
            version = format_version(info.file_version)
            builds.setdefault(parsed[1], {}).setdefault(version, []).append(name)
    for by_version in builds.values():
        if len(by_version) < 2:
            continue
        common = max(by_version, key=lambda version: len(by_version[version]))
        odd = sorted(
            name for version, names in by_version.items() if version != common for name in names
        )
        details = tuple(f"{v}: {', '.join(names)}" for v, names in sorted(by_version.items()))
        message = f"{', '.join(odd)} differ from the other cuDNN libraries ({common})"
        yield finding("BA203", tuple(odd), message, details)


def debug_crt(audited: Audited) -> Iterator[Finding]:
    for name, info in audited.folder.pe.items():
        debug = sorted(
            {dll for dll in (*info.imports, *info.delay_imports) if dll_key(dll) in DEBUG_CRT_DLLS},
            key=str.lower,
        )
        if debug:
            message = f"{name} imports {', '.join(debug)} (debug runtime: not on users' machines)"
            yield finding("BA204", (name,), message)


def wrong_machine(audited: Audited) -> Iterator[Finding]:
    wanted = audited.profile.architecture
    for name, info in audited.folder.pe.items():
        if info.runs_as(wanted):
            continue
        skipped = "; the loader skips it, so it is missing" if is_missing(audited, name) else ""
        message = f"{name} is built for {info.machine}, the profile targets {wanted}{skipped}"
        yield finding("BA205", (name,), message, architecture=wanted)


def ep_ort_too_old(audited: Audited) -> Iterator[Finding]:
    """A pack of the lock beside an onnxruntime.dll (its file version, else the lock's ORT
    release) older than the pack's min_ort."""
    if not audited.lock or not audited.lock.eps:
        return
    info = audited.folder.pe.get("onnxruntime.dll")
    found = format_version(info.file_version) if info and info.file_version else None
    ort = found or audited.lock.ort_version
    if ort is None:
        return
    for pack in audited.lock.eps:
        if version_key(ort) < version_key(pack.min_ort):
            message = (
                f"EP pack {pack.name} ({pack.plugin}) needs ONNX Runtime {pack.min_ort} or "
                f"newer; onnxruntime.dll here is {ort}"
            )
            yield finding("BA206", (pack.plugin,), message, minimum=pack.min_ort)


def ort_release_mismatch(audited: Audited) -> Iterator[Finding]:
    """ORT's DLLs of different releases, from their version resources: onnxruntime.dll against
    the profile's ORT artifact, and each onnxruntime_providers_*.dll against onnxruntime.dll (a
    DLL without a version resource cannot tell: 1.19.2's CUDA provider has none)."""
    front = audited.front
    core = ort_release(front.file_version) if front else None
    if front is None or core is None:
        return
    wanted = profile_ort_release(audited.profile)
    if wanted is not None and not core.matches(wanted):
        message = (
            f"{front.name} is ORT {core.text}, the profile {audited.profile.name} is ORT "
            f"{wanted}: the profile's run-time rules and pins are not this folder's"
        )
        yield finding("BA207", (front.name,), message, release=wanted)
    for name, info in audited.folder.pe.items():
        release = ort_release(info.file_version)
        if dll_key(name).startswith(PROVIDER_PREFIX) and release and release.parts != core.parts:
            message = (
                f"{name} is ORT {release.text}, {front.name} is {core.text}: a provider of "
                "another revision drifts from the core's contrib-op schemas"
            )
            yield finding("BA207", (name,), message, release=core.text)


def driver_dll_shipped(audited: Audited) -> Iterator[Finding]:
    for name in filter(is_pe_name, audited.folder.names):
        if audited.profile.is_driver(name):
            message = (
                f"{name} belongs to the GPU driver: the app folder's copy is loaded instead of "
                "the installed driver's and breaks CUDA when they differ (not redistributable)"
            )
            yield finding("BA301", (name,), message)


def os_component_shipped(audited: Audited) -> Iterator[Finding]:
    for name in filter(is_pe_name, audited.folder.names):
        if audited.policy.ignores_app_local(name):
            message = f"{name} is part of Windows: Windows 10+ never loads it from the app folder"
            yield finding("BA302", (name,), message)


def unreferenced_dll(audited: Audited) -> Iterator[Finding]:
    """A DLL the closure does not name at all. Copies another check already explains (driver,
    OS component, wrong machine) are left to that check."""
    for name, info in audited.folder.pe.items():
        if not info.is_dll or audited.plan.file(name) is not None:
            continue
        if dll_key(name) in audited.locked:  # the build placed it: the lock's closure has it
            continue
        if audited.profile.is_driver(name) or audited.policy.ignores_app_local(name):
            continue
        if not info.runs_as(audited.profile.architecture):
            continue
        if info.managed:  # a .NET assembly: the CLR loads it by its metadata, not an import
            continue
        message = (
            f"{name} ({info.size:,} bytes) is not needed by the app, the profile's roots or "
            f"its runtime rules ({audited.profile.name})"
        )
        yield finding("BA303", (name,), message)


def case_clash(audited: Audited) -> Iterator[Finding]:
    groups: dict[str, list[str]] = {}
    for name in audited.folder.names:
        groups.setdefault(dll_key(name), []).append(name)
    for names in groups.values():
        if len(names) > 1:
            message = f"{' and '.join(names)} differ only by case: Windows keeps one of them"
            yield finding("BA304", tuple(names), message)


def system32_shadowing(audited: Audited) -> Iterator[Finding]:
    for item in audited.plan.with_status(Status.BUNDLED):
        if item.key in audited.policy.system32_copies:
            message = (
                f"{item.name} is also in System32 on some Windows builds, in another version: a "
                "process that loads that name from elsewhere first gets the wrong one"
            )
            yield finding("BA305", (item.name,), message)


def hash_mismatch(audited: Audited) -> Iterator[Finding]:
    """A size that differs from the lock settles it without hashing. With `verify` every
    other locked file is hashed; without, only its time stamp is compared (BA404)."""
    if not audited.lock:
        return
    for entry in audited.lock.files:
        path = audited.folder.path / entry.name
        try:
            stat = path.stat()
        except OSError:
            continue  # absent: BA402
        if stat.st_size != entry.size:
            message = f"{entry.name} has {stat.st_size:,} bytes, the lock file says {entry.size:,}"
            yield finding("BA401", (entry.name,), message)
        elif audited.verify and (digest := file_sha256(path)) != entry.sha256:
            message = f"{entry.name} has SHA-256 {digest}, the lock file says {entry.sha256}"
            yield finding("BA401", (entry.name,), message)


def time_changed(audited: Audited) -> Iterator[Finding]:
    """Without hashing, a time stamp other than the one the build left is the cheap sign of
    a changed file (the build keeps its sources' times; xcopy and robocopy keep them too). The
    build notes them beside the lock (bundle.times.json); older locks held them themselves."""
    if not audited.lock or audited.verify:
        return
    for entry in audited.lock.files:
        noted = audited.times.get(entry.name, entry.mtime_ns)
        if noted is None:
            continue  # no note: an installed folder, an archive, a lock from before times
        try:
            stat = (audited.folder.path / entry.name).stat()
        except OSError:
            continue
        moved = abs(stat.st_mtime_ns - noted) > TIME_TOLERANCE_NS
        if stat.st_size == entry.size and moved:
            message = (
                f"{entry.name} has another time stamp than the build left (same size): "
                "it may have been changed or copied without its times after the build"
            )
            yield finding("BA404", (entry.name,), message)


def file_removed(audited: Audited) -> Iterator[Finding]:
    """A file of the lock absent from the folder; not the files of a pack the setup left out
    (BA405)."""
    for name in absent_locked(audited):
        yield finding("BA402", (name,), f"{name} is listed in the lock file but absent")


def pack_left_out(audited: Audited) -> Iterator[Finding]:
    for pack in audited.packs_left_out:
        message = (
            f"EP pack {pack.name} was not installed: the setup left {pack.folder}/ out (its "
            "component was not selected; the setup log says why)"
        )
        yield finding("BA405", (pack.plugin,), message)


def pack_mismatch(audited: Audited) -> Iterator[Finding]:
    """bundle-pack.txt (written by the runtime pack's setup) names another pack than the lock."""
    pack = audited.lock.runtime_pack if audited.lock else None
    found = audited.installed_pack
    if pack is None or found is None or found == pack.sha256:
        return
    yield finding(
        "BA406",
        (PACK_MARKER,),
        f"{PACK_MARKER} says the folder holds runtime pack {found[:16]}, the lock's is "
        f"{pack.short}: the app and its runtime come from different releases",
    )


def file_added(audited: Audited) -> Iterator[Finding]:
    if not audited.lock:
        return
    listed = {entry.name for entry in audited.lock.files} | {audited.lock.app or ""}
    for name in filter(is_pe_name, audited.folder.names):
        info = audited.folder.pe.get(name)
        if info is not None and info.managed and info.is_dll:
            continue  # the app's own .NET assemblies: bundle never places them
        if name not in listed:
            yield finding("BA403", (name,), f"{name} is not in the lock file")


def _gpu_findings(audited: Audited, code: str) -> Iterator[Finding]:
    """Declared target GPUs the bundle's CUDA code does not serve natively."""
    if audited.gpu_targets and audited.gpu_code:
        found = target_findings(audited.gpu_targets, audited.gpu_code)
        yield from (item for item in found if item.code == code)


def gpu_unserved(audited: Audited) -> Iterator[Finding]:
    return _gpu_findings(audited, "BA701")


def gpu_jit_only(audited: Audited) -> Iterator[Finding]:
    return _gpu_findings(audited, "BA702")


CHECKS: dict[str, CheckFunction] = {
    "BA001": unreadable_files,
    "BA101": missing_at_start,
    "BA102": missing_later,
    "BA103": provider_fails,
    "BA104": providers_shared_missing,
    "BA105": vc_runtime_part_missing,
    "BA201": cuda_version_mismatch,
    "BA202": vc_runtime_too_old,
    "BA203": cudnn_mixed_builds,
    "BA204": debug_crt,
    "BA205": wrong_machine,
    "BA206": ep_ort_too_old,
    "BA207": ort_release_mismatch,
    "BA301": driver_dll_shipped,
    "BA302": os_component_shipped,
    "BA303": unreferenced_dll,
    "BA304": case_clash,
    "BA305": system32_shadowing,
    "BA401": hash_mismatch,
    "BA402": file_removed,
    "BA403": file_added,
    "BA404": time_changed,
    "BA405": pack_left_out,
    "BA406": pack_mismatch,
    "BA701": gpu_unserved,
    "BA702": gpu_jit_only,
}
