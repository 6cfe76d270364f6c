"""Act layer: bundle.lock.json: what a build put next to the exe, and why — a view of the Plan.

Every file with its SHA-256, size, file version, where it came from (artifact, the URL / wheel /
folder, the archive's SHA-256 and the member inside it) and the shortest chain that needs it.
The next build reads it to know which files it owns (--clean, overwrite rules), to skip hashing
unchanged files, and `--locked` compares a new result against it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path, PurePosixPath
from typing import Any

from bundler import __version__, files
from bundler.errors import OutputError, PlanFormatError
from bundler.profiles import GpuDriver

LOCK_NAME = "bundle.lock.json"
DOCTOR_EXE = "bundle-doctor.exe"
DOCTOR_DATA = "bundle-doctor.dat"  # rendered from the lock (bundler/render/doctor_dat.py)
SCHEMA_VERSION = 1
# What must be equal for --locked: identity and content, not where a mirror served it from.
_COMPARED = ("kind", "sha256", "size", "artifact", "archive_sha256", "member")


@dataclass(frozen=True)
class LockedFile:
    name: str  # relative to the output folder, posix
    kind: str  # "app" | "bundled" | "license" | "installer" | "sdk" (a header, an import library)
    sha256: str
    size: int
    file_version: str | None = None
    artifact: str | None = None
    origin: str | None = None
    archive_sha256: str | None = None
    member: str | None = None
    why: str | None = None
    # A bundled DLL's import tables (API sets left out): what it loads stays known to the audit
    # when the file is gone. None in locks written before they were recorded.
    imports: tuple[str, ...] | None = None
    delay_imports: tuple[str, ...] | None = None
    mtime_ns: int | None = None  # the placed file's modification time, for the audit's cheap check
    # The CUDA code in a bundled DLL's fat binaries (bundler/fatbin.py): SASS architectures and
    # PTX targets, e.g. ("sm_80", "sm_90a"); () for none. None: not read (a lock written before).
    sass: tuple[str, ...] | None = None
    ptx: tuple[str, ...] | None = None


@dataclass(frozen=True)
class LockedModel:
    """A model the build was given (--model): the bundle keeps what its ops load."""

    name: str  # the file name
    sha256: str
    ops: tuple[str, ...]


@dataclass(frozen=True)
class PrunedFile:
    """A DLL the profile ships that this bundle leaves out (bundler/prune.py), and why."""

    name: str
    size: int
    why: str


@dataclass(frozen=True)
class PayloadFile:
    """One file of a bundle, relative to the bundle folder (posix)."""

    name: str
    kind: str  # a LockedFile kind, or "app" for an exe built in place, or "lock"
    sha256: str | None  # None where the lock holds no hash (an in-place exe, the lock itself)


@dataclass(frozen=True)
class Lock:
    """bundle.lock.json: every file a build wrote with its hash and origin, and what the target
    machine must provide (driver, VC++ runtime). `bundle build --locked` and `audit` read it."""

    profile: str
    architecture: str
    vc_runtime: str
    files: tuple[LockedFile, ...]
    driver_requirements: tuple[str, ...] = ()
    app: str | None = None  # the exe's name in the output folder (listed in files only with --out)
    app_file_version: str | None = None  # the exe's VS_VERSIONINFO FileVersion, if it has one
    app_product_name: str | None = None  # and its ProductName
    min_windows: str | None = None
    vc_runtime_min: str | None = None  # newest MSVC linker among the runtime's users, "14.40"
    gpu_driver: GpuDriver | None = None
    ort_version: str | None = None  # the ORT release the profile pins (the doctor compares it)
    gpus: tuple[str, ...] = ()  # target GPUs the profile or bundle.toml declares, e.g. "sm_86"
    loads: tuple[str, ...] = ()  # what ORT loads by path at run time, in load order (the doctor)
    doctor: bool = False  # bundle-doctor.exe and its data file ship with the bundle
    models: tuple[LockedModel, ...] = ()  # --model: what the pruning was decided for
    pruned: tuple[PrunedFile, ...] = ()  # left out for those models, each with its reason
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION

    def by_name(self) -> dict[str, LockedFile]:
        return {item.name: item for item in self.files}

    def payload(self) -> list[PayloadFile]:
        """What ships: the app, every file the build placed, and the lock file itself, sorted
        by name. Generated views (setup script, SBOM, archives) are not part of it."""
        entries = {item.name: PayloadFile(item.name, item.kind, item.sha256) for item in self.files}
        if self.app and self.app not in entries:
            entries[self.app] = PayloadFile(self.app, "app", None)
        entries[LOCK_NAME] = PayloadFile(LOCK_NAME, "lock", None)
        if self.doctor:
            entries[DOCTOR_DATA] = PayloadFile(DOCTOR_DATA, "doctor-data", None)
        return sorted(entries.values(), key=lambda entry: entry.name)

    def to_json(self) -> str:
        data = asdict(self)
        body = {"schema_version": data.pop("schema_version"), **data}
        return json.dumps({**body, "digest": content_digest(body)}, indent=2) + "\n"


def content_digest(body: dict[str, Any]) -> str:
    """The SHA-256 of the lock's content (every key but `digest`, canonical JSON). The next
    build trusts the lock's hashes for files whose size and time are unchanged, so a hand edit
    must not pass: a lock whose digest does not match is refused."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


_REWRITE = "delete it, the next build writes a new one"
_FILE_KEYS = frozenset(field.name for field in fields(LockedFile))


def read_lock(path: Path) -> Lock | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PlanFormatError(
            f"{path}: not a valid bundle lock file ({exc}); {_REWRITE}."
        ) from None
    if not isinstance(data, dict):
        raise PlanFormatError(f"{path}: not a valid bundle lock file (not an object); {_REWRITE}.")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise PlanFormatError(
            f"{path}: lock schema_version {data.get('schema_version')!r} is not "
            f"{SCHEMA_VERSION}; delete it or rebuild with a matching bundle."
        )
    _check_entries(path, data.get("files"))
    digest = data.pop("digest", None)  # absent in locks written before it existed
    if digest is not None and digest != content_digest(data):
        raise PlanFormatError(
            f"{path}: edited by hand (its content no longer matches its digest); {_REWRITE}."
        )
    return _lock(path, data)


def _check_entries(path: Path, files: object) -> None:
    """Each entry has only known keys and a name inside the output folder: `--clean` deletes
    what the lock lists, so '../x' or an absolute name must never get that far."""
    if not isinstance(files, list):
        raise PlanFormatError(f"{path}: not a valid bundle lock file (no files list); {_REWRITE}.")
    for number, item in enumerate(files, start=1):
        where = f"{path}: files[{number}]"
        if not isinstance(item, dict):
            raise PlanFormatError(f"{where} is not an object; {_REWRITE}.")
        unknown = sorted(set(item) - _FILE_KEYS)
        if unknown:
            keys = ", ".join(repr(key) for key in unknown)
            raise PlanFormatError(
                f"{where} ({item.get('name')!r}): unknown key {keys}; {_REWRITE}."
            )
        name = item.get("name")
        if not isinstance(name, str) or not is_inside(name):
            raise PlanFormatError(
                f"{where}: file name {name!r} is outside the output folder; {_REWRITE}."
            )


def is_inside(name: str) -> bool:
    """A relative posix path that stays inside its folder (no '..', drive, backslash)."""
    path = PurePosixPath(name)
    return (
        bool(name)
        and not path.is_absolute()
        and ".." not in path.parts
        and not any(char in name for char in "\\:")
    )


def _lock(path: Path, data: dict[str, Any]) -> Lock:
    try:
        return Lock(
            profile=data["profile"],
            architecture=data["architecture"],
            vc_runtime=data["vc_runtime"],
            files=tuple(_locked_file(item) for item in data["files"]),
            driver_requirements=tuple(data.get("driver_requirements", ())),
            app=data.get("app"),
            app_file_version=data.get("app_file_version"),
            app_product_name=data.get("app_product_name"),
            min_windows=data.get("min_windows"),
            vc_runtime_min=data.get("vc_runtime_min"),
            gpu_driver=GpuDriver(**data["gpu_driver"]) if data.get("gpu_driver") else None,
            ort_version=data.get("ort_version"),
            gpus=tuple(data.get("gpus", ())),
            loads=tuple(data.get("loads", ())),
            doctor=bool(data.get("doctor", False)),
            models=tuple(_model(item) for item in data.get("models", ())),
            pruned=tuple(PrunedFile(**item) for item in data.get("pruned", ())),
            tool_version=data.get("tool_version", "?"),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PlanFormatError(
            f"{path}: not a valid bundle lock file ({exc}); {_REWRITE}."
        ) from None


_LIST_KEYS = ("imports", "delay_imports", "sass", "ptx")


def _model(item: dict[str, Any]) -> LockedModel:
    return LockedModel(item["name"], item["sha256"], tuple(item["ops"]))


def _locked_file(item: dict[str, Any]) -> LockedFile:
    lists = {key: tuple(item[key]) for key in _LIST_KEYS if item.get(key) is not None}
    return LockedFile(**{**item, **lists})


def write_lock(path: Path, lock: Lock) -> None:
    """Atomically (a temporary name, then rename); a folder that cannot take it is an
    OutputError with the temporary file removed."""
    temp = path.with_name(f".{path.name}.bundle-tmp")
    try:
        temp.write_text(lock.to_json(), encoding="utf-8", newline="\n")  # the same bytes on Windows
        files.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise OutputError(
            f"{path}: cannot write the lock file ({exc.strerror or exc}); check free space "
            "and permissions there, then build again."
        ) from exc


def differences(old: Lock, new: Lock) -> list[str]:
    """Human-readable differences that matter for --locked."""
    changes = []
    if old.profile != new.profile:
        changes.append(f"profile {old.profile} -> {new.profile}")
    before, after = old.by_name(), new.by_name()
    for name in sorted(before.keys() - after.keys()):
        changes.append(f"{name}: no longer part of the bundle")
    for name in sorted(after.keys() - before.keys()):
        changes.append(f"{name}: new in the bundle")
    if {m.sha256 for m in old.models} != {m.sha256 for m in new.models}:
        changes.append("the models (--model) differ")
    for name in sorted(before.keys() & after.keys()):
        for key in _COMPARED:
            a, b = getattr(before[name], key), getattr(after[name], key)
            if a != b:
                changes.append(f"{name}: {key} {a} -> {b}")
    return changes
