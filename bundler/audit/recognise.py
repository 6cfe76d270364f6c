"""Decide layer of the audit: which profile a folder is audited against, and where that choice
came from.

The order: `--profile`; else the profile the folder's bundle.lock.json records; else the one
the folder's own ORT names: its release from onnxruntime.dll's version resource
(bundler.binary.ort_build.ort_release), its flavour from what is beside it (a CUDA provider: a
GPU profile; DirectML.dll, or an onnxruntime.dll that imports it: DirectML; neither: CPU).
Without onnxruntime.dll, or without its version resource, the default profile stays, with a
note. Where the catalogue has no profile for that release and flavour, no other profile's
run-time rules are borrowed: the folder's DLLs are audited for their import closure alone
(`closure_only`), and the note names the missing profile and how to derive it.
"""

from __future__ import annotations

import re
from pathlib import Path

from bundler.audit.report import FolderFiles, ProfileChoice
from bundler.binary.ort_build import OrtRelease, ort_release
from bundler.binary.pe import PEInfo
from bundler.closure.lock import LOCK_NAME, Lock
from bundler.target.profile_names import flavour_of, release_of, version_key
from bundler.target.profiles import (
    ARCHITECTURES,
    DEFAULT_PROFILE,
    Profile,
    available_profiles,
    dll_key,
    load_profile,
)

ORT_FRONT = "onnxruntime.dll"
CUDA_PROVIDER = "onnxruntime_providers_cuda.dll"
DIRECTML = "directml.dll"
CLOSURE_ONLY = "import-closure-only"
# The flavours each kind of folder may be audited against, by profile name.
_KINDS = {
    "gpu": re.compile(r"gpu-cuda\d+"),
    "directml": re.compile(r".*(directml|windowsml).*"),
    "cpu": re.compile(r"cpu"),
}
FLAG, LOCKED, INFERRED, DEFAULT, NONE = "flag", "lock", "inferred", "default", "none"


def choose_profile(name: str | None, lock: Lock | None, files: FolderFiles) -> ProfileChoice:
    """--profile, else the lock's profile, else the one the folder's ORT names."""
    if name is not None:
        return ProfileChoice(load_profile(name), FLAG, "named with --profile")
    if lock is not None:
        return ProfileChoice(load_profile(lock.profile), LOCKED, f"recorded in {LOCK_NAME}")
    return recognise(files)


def recognise(files: FolderFiles) -> ProfileChoice:
    front = files.named(ORT_FRONT)
    if front is None:
        return _default(f"no {ORT_FRONT} in the folder")
    release = ort_release(front.file_version)
    if release is None:
        return _default(f"{front.name} has no version resource")
    kind, seen = _kind(files, front)
    found = _shipped(release, kind)
    where = f"{front.name} {release.text} (its version resource)"
    if found is None:
        return _closure_only(files, front, release, kind, where)
    return ProfileChoice(load_profile(found), INFERRED, f"inferred from {where}{seen}")


def _kind(files: FolderFiles, front: PEInfo) -> tuple[str, str]:
    """The flavour of ORT the folder holds, and the words saying what showed it."""
    keys = {dll_key(name): name for name in files.pe}
    if CUDA_PROVIDER in keys:
        return "gpu", f" and {keys[CUDA_PROVIDER]}"
    if DIRECTML in keys:
        return "directml", f" and {keys[DIRECTML]}"
    if any(dll_key(name) == DIRECTML for name in (*front.imports, *front.delay_imports)):
        return "directml", ", which imports DirectML.dll"
    return "cpu", ", with no execution provider DLL beside it"


def _shipped(release: OrtRelease, kind: str) -> str | None:
    """The newest shipped profile of that release (as far as the version resource tells it)
    and kind."""
    pattern = _KINDS[kind]
    names = [
        name
        for name in available_profiles()
        if release.matches(release_of(name)) and pattern.fullmatch(flavour_of(name))
    ]
    return max(names, key=lambda name: version_key(release_of(name)), default=None)


def _default(why: str) -> ProfileChoice:
    note = (
        f"{why}: audited against the default profile {DEFAULT_PROFILE}; name the folder's "
        "profile with --profile"
    )
    detail = f"left at the default: {why}"
    return ProfileChoice(load_profile(DEFAULT_PROFILE), DEFAULT, detail, (note,))


def _closure_only(
    files: FolderFiles, front: PEInfo, release: OrtRelease, kind: str, where: str
) -> ProfileChoice:
    """No shipped profile fits: every DLL of the folder is a root, no run-time rule applies."""
    missing = f"ort-{release.text}-{kind}"
    note = (
        f"{where} is a {kind} build, and no shipped profile is for it ({missing}): audited for "
        "the import closure of the folder's DLLs only, with no profile's run-time rules; "
        f"derive its profile with bundle profiles new --ort {release.text} --flavour {kind} "
        "and audit with --profile"
    )
    architecture = front.machine if front.machine in ARCHITECTURES else "x64"
    roots = tuple(
        name
        for name, info in files.pe.items()
        if info.is_dll and info.runs_as(architecture) and not info.managed
    )
    profile = Profile(
        name=CLOSURE_ONLY,
        description=f"the import closure of {files.path.name}: no shipped profile fits",
        architecture=architecture,
        min_windows=(10, 0, 10240),
        vc_runtime="app-local",
        roots=roots,
        driver_dlls=(),
        runtime_rules=(),
        artifacts=(),
        path=Path(files.path),
    )
    detail = f"none: no shipped profile fits {where}, a {kind} build ({missing})"
    return ProfileChoice(profile, NONE, detail, (note,), missing)
