"""bundle-doctor.dat for tests: the product's renderer (bundler/render/doctor_dat.py) on a built
bundle's lock, with the changes a test needs (other GPU code, fewer load records, another ORT
release), and `seal` for hand-made files (the bad-input cases)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from bundler.findings import CATALOGUE
from bundler.lock import DOCTOR_DATA, LOCK_NAME, Lock
from bundler.lockfile import read_lock
from bundler.render.doctor_dat import DOCTOR_CHECKS, doctor_data

PROVIDER = "onnxruntime_providers_cuda.dll"
# docs/field-notes.md#gpu-code: ORT 1.22.0's provider (all 158 blobs)
PROVIDER_1_22_0 = {PROVIDER: (("sm_52", "sm_61", "sm_75", "sm_86", "sm_89"), ("sm_90",))}
# The catalogue rows the product writes: code, severity, name, title.
CHECKS = tuple(
    (code, CATALOGUE[code].severity.value, CATALOGUE[code].name, CATALOGUE[code].title)
    for code in DOCTOR_CHECKS
)


def changed_lock(
    folder: Path,
    gpu: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    skip_loads: tuple[str, ...] = (),
    **changes: Any,
) -> Lock:
    lock = read_lock(folder / LOCK_NAME)
    assert lock is not None, folder
    files = tuple(
        replace(item, sass=gpu[item.name][0], ptx=gpu[item.name][1])
        if gpu and item.name in gpu
        else item
        for item in lock.files
    )
    loads = tuple(name for name in lock.loads if name not in skip_loads)
    return replace(lock, **{"files": files, "loads": loads, **changes})


def write(
    folder: Path,
    gpu: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    *,
    name: str = DOCTOR_DATA,
    skip_loads: tuple[str, ...] = (),
    **changes: Any,
) -> Path:
    """Writes `folder/name` for the bundle in `folder` (its lock, changed) and returns it."""
    target = folder / name
    target.unlink(missing_ok=True)  # maybe a hard link shared with another copy
    target.write_text(doctor_data(changed_lock(folder, gpu, skip_loads, **changes)))
    return target


def seal(lines: list[tuple[str, ...]]) -> bytes:
    """Records joined with TAB and LF, then the `end` line with the digest of all before it."""
    body = "".join("\t".join(fields) + "\n" for fields in lines).encode()
    return body + b"end\t" + hashlib.sha256(body).hexdigest().encode() + b"\n"
