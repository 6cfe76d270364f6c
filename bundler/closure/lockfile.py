"""Act layer: bundle.lock.json on disk, read and checked before anything trusts it, and written
atomically.

Reading checks the schema version, every entry's keys and name, and the digest that a hand edit
breaks; writing goes to a temporary name first and renames it into place. The lock's content
(the dataclasses, its JSON text, what `--locked` compares) is bundler.closure.lock.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from bundler.closure.lock import (
    READABLE,
    Lock,
    LockedEp,
    LockedFile,
    LockedModel,
    PrunedFile,
    RuntimePack,
    content_digest,
    differences,
    is_inside,
)
from bundler.disk import files
from bundler.errors import LockMismatchError, OutputError, PlanFormatError
from bundler.target.profiles import CudaEp, GpuDriver

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
    if data.get("schema_version") not in READABLE:
        readable = " or ".join(str(version) for version in READABLE)
        raise PlanFormatError(
            f"{path}: lock schema_version {data.get('schema_version')!r} is not "
            f"{readable}; delete it or rebuild with a matching bundle."
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
            eps=tuple(LockedEp(**item) for item in _renamed(data, "eps", "packs", ())),
            runtime_pack=_runtime_pack(_renamed(data, "runtime_pack", "pack", None)),
            cuda_ep=CudaEp(**data["cuda_ep"]) if data.get("cuda_ep") else None,
            tool_version=data.get("tool_version", "?"),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PlanFormatError(
            f"{path}: not a valid bundle lock file ({exc}); {_REWRITE}."
        ) from None


def _renamed(data: dict[str, Any], name: str, before: str, default: Any) -> Any:
    """A key under its name, else under the name schema 1 gave it."""
    return data.get(name, data.get(before, default))


def _runtime_pack(data: dict[str, Any] | None) -> RuntimePack | None:
    if data is None:
        return None
    return RuntimePack(str(data["sha256"]), tuple(data["files"]), int(data["size"]))


_LIST_KEYS = ("imports", "delay_imports", "sass", "ptx")


def _model(item: dict[str, Any]) -> LockedModel:
    return LockedModel(item["name"], item["sha256"], tuple(item["ops"]))


def _locked_file(item: dict[str, Any]) -> LockedFile:
    lists = {key: tuple(item[key]) for key in _LIST_KEYS if item.get(key) is not None}
    return LockedFile(**{**item, **lists})


def write_lock(path: Path, lock: Lock) -> None:
    """Atomically (a temporary name, then rename); a folder that cannot take it is an
    OutputError with the temporary file removed."""
    try:
        files.write_atomically(path, lock.to_json().encode("utf-8"))  # LF on Windows too
    except OSError as exc:
        raise OutputError(
            f"{path}: cannot write the lock file ({exc.strerror or exc}); check free space "
            "and permissions there, then build again."
        ) from exc


def require_as_locked(path: Path, previous: Lock | None, lock: Lock) -> None:
    """`build --locked`: the lock a build would write is the one at `path`, or nothing is."""
    if previous is None:
        raise LockMismatchError(
            f"{path}: --locked needs an existing lock file; build once without it."
        )
    changes = differences(previous, replace(lock, tool_version=previous.tool_version))
    if changes:
        shown = "; ".join(changes[:8]) + (
            f"; and {len(changes) - 8} more" if len(changes) > 8 else ""
        )
        raise LockMismatchError(
            f"{path}: the build would differ from the lock file ({shown}); nothing "
            "was written. Rebuild without --locked to update it."
        )
