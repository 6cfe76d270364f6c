"""Act layer: bundle-doctor.dat, the doctor's view of the lock, rendered and written into the
bundle folder. `doctor_data` renders it, `write_doctor_data` writes it when it changed.
bundle-doctor.exe (doctor/) reads it on the customer's machine without a JSON parser: one
record a line, fields split by a tab, the last line the SHA-256 of everything before it, so
that a truncated or edited file is refused (exit 22) rather than trusted. docs/doctor.md
describes the format."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from bundler.binary.fatbin import GpuCode
from bundler.closure.gpu import judged
from bundler.closure.lock import DOCTOR_DATA, Lock
from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.findings import CATALOGUE, DOCTOR_CODES
from bundler.render.engine import write_text
from bundler.target.system import load_system_policy

FORMAT = "bundle-doctor-data"
# 2 since issue 40: the ep record gained a field (the pack's min_ort); a new record kind
# needs no new version, a record of another shape does (doctor/README.md).
FORMAT_VERSION = 2
# What the doctor reports: the lock's file checks, the installed runtime pack, the GPU findings
# and its own codes.
DOCTOR_CHECKS = ("BA401", "BA402", "BA406", "BA701", "BA702", *DOCTOR_CODES)


def doctor_data(lock: Lock) -> str:
    """The whole file, its digest line included."""
    body = "".join(f"{_field(fields)}\n" for fields in _records(lock))
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return f"{body}end\t{digest}\n"


def write_doctor_data(lock: Lock, folder: Path) -> Path:
    """Written only when it differs from what is there (a no-op rebuild writes nothing)."""
    path = folder / DOCTOR_DATA
    text = doctor_data(lock)
    try:
        same = path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        write_text(path, text)
    return path


def _field(fields: tuple[str, ...]) -> str:
    for value in fields:
        if "\t" in value or "\n" in value or "\r" in value:
            raise ValueError(f"a doctor data field holds a tab or line break: {value!r}")
    return "\t".join(fields)


def _records(lock: Lock) -> Iterator[tuple[str, ...]]:
    yield FORMAT, str(FORMAT_VERSION)
    yield "tool", lock.tool_version
    yield "profile", lock.profile
    if lock.ort_version:
        yield "ort", lock.ort_version
    yield "vc_runtime", lock.vc_runtime, lock.vc_runtime_min or "-"
    # the doctor's name lists, from bundle's one source of each
    for name in sorted(VC_RUNTIME_DLLS):
        yield "vc_dll", name
    for prefix in load_system_policy().api_set_prefixes:
        yield "api_set", prefix
    driver = lock.gpu_driver
    if driver is not None:
        yield "driver", driver.dll, str(driver.cuda_major), driver.min_version
    for code in DOCTOR_CHECKS:
        check = CATALOGUE[code]
        yield "check", code, check.severity.value, check.name, check.title
    for item in lock.files:
        yield "file", str(item.size), item.sha256, item.kind, item.name
    for item in lock.files:
        if item.file_version and item.kind == "bundled":
            yield "version", item.name, item.file_version
    for name in lock.loads:
        yield "load", name
    for pruned in lock.pruned:
        yield "pruned", pruned.name
    for item in lock.files:
        imported = (*(item.imports or ()), *(item.delay_imports or ()))
        if imported:
            yield "imports", item.name, ",".join(imported)
    gpu_code = {item.name: GpuCode(item.sass or (), item.ptx or (), 0) for item in lock.files}
    for name, code_of in judged(gpu_code).items():
        yield "gpu", name, _archs(code_of.sass), _archs(code_of.ptx)
    for pack in lock.eps:  # the doctor judges each on the target (--eps, BA811-BA813)
        cc, floor = pack.min_compute_capability or "-", pack.min_driver or "-"
        # "ep" since issue 39 ("pack" before it: the doctor reads both)
        record = (pack.name, pack.folder, pack.plugin, pack.probe, cc, floor, pack.needs)
        yield "ep", *record, pack.min_ort  # the doctor prints it beside the ORT that loads
    if lock.runtime_pack is not None:  # the doctor compares it with bundle-pack.txt (BA406)
        yield "runtime_pack", lock.runtime_pack.sha256


def _archs(names: tuple[str, ...] | None) -> str:
    return ",".join(names) if names else "-"
