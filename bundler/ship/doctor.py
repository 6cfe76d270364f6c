"""Decide layer: what the build gives bundle-doctor.exe. The exe itself is placed like any
other file (kind "doctor"); the lock learns the CUDA code of every bundled DLL
(bundler.binary.fatbin,
reused from the previous lock for an unchanged file), the load order the doctor proves, and the
ORT release; bundle-doctor.dat is rendered from the lock afterwards (bundler.render.doctor_dat)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bundler.binary.fatbin import read_gpu_code
from bundler.closure.lock import DOCTOR_EXE, Lock, LockedFile
from bundler.closure.plan import EdgeKind, Plan, Status
from bundler.errors import InputFileError
from bundler.ship.output_folder import Placement
from bundler.ship.placements import Placed, Source
from bundler.target.profiles import dll_key
from bundler.target.resources import doctor_exe

ORT_DLL = "onnxruntime.dll"


def doctor_placement() -> Placed:
    """bundle-doctor.exe as shipped inside the package."""
    path = doctor_exe()
    if not path.is_file():
        raise InputFileError(
            f"{path}: bundle-doctor.exe is missing from this installation; reinstall ort-bundle, "
            "or build with --no-doctor."
        )
    return Placement(DOCTOR_EXE, path, path.stat().st_size), Source("doctor")


def load_order(plan: Plan) -> tuple[str, ...]:
    """The DLLs ORT loads by path, in the order the doctor loads them: ORT's own DLL, the
    profile's runtime roots (the providers), then what the runtime rules load (cuDNN's
    sub-libraries, NVRTC, ...). Only bundled files."""
    bundled = {item.key: item.name for item in plan.with_status(Status.BUNDLED)}
    keys = [dll_key(ORT_DLL)]
    keys += [edge.child for edge in plan.edges if edge.kind is EdgeKind.PROFILE_ROOT]
    keys += [edge.child for edge in plan.edges if edge.kind is EdgeKind.RUNTIME]
    ordered = dict.fromkeys(key for key in keys if key in bundled)
    return tuple(bundled[key] for key in ordered)


def with_gpu_code(lock: Lock, placed: Sequence[Placed], previous: Lock | None) -> Lock:
    """The lock with the SASS and PTX of every bundled DLL: read from the placed file's source
    (headers only), or taken from the previous lock where the hash is the same."""
    sources = {placement.name: placement.source for placement, _ in placed}
    before = previous.by_name() if previous else {}
    files = [_gpu_code(item, sources.get(item.name), before.get(item.name)) for item in lock.files]
    return replace(lock, files=tuple(files))


def _gpu_code(item: LockedFile, source: Path | None, old: LockedFile | None) -> LockedFile:
    if item.kind != "bundled" or source is None:
        return item
    if old is not None and old.sha256 == item.sha256 and old.sass is not None:
        return replace(item, sass=old.sass, ptx=old.ptx)
    code = read_gpu_code(source)  # None: no fat binary, recorded as () so it is not read again
    return replace(item, sass=code.sass if code else (), ptx=code.ptx if code else ())
