"""Act layer: `bundle verify`, the user's check of a download: each file's SHA-256 against
SHA256SUMS; the provenance statement's subjects against SHA256SUMS; and, with a lock at hand
(the file, or unpacked from the bundle's .zip or .7z), the statement's dependencies against the
lock's pins. The first difference is a VerifyError naming the file or the artifact.

It checks content, not who signed it: the signature of an attestation is Sigstore's to check
(`gh attestation verify`, docs/publishing.md).
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from bundler.acquire.archive_entries import corruption_is_archive_error, py7zr_errors, py7zr_module
from bundler.closure.lock import LOCK_NAME, Lock
from bundler.closure.lockfile import read_lock
from bundler.disk.digest import file_sha256
from bundler.errors import InputFileError, VerifyError
from bundler.publish.checksums import SUMS_NAME, parse_sums
from bundler.publish.release import ARCHIVE_SUFFIXES
from bundler.publish.slsa import STATEMENT_NAME, STATEMENT_TYPE, dependencies, dependency_keys


@dataclass
class Verified:
    """What passed: the files checked, whether a statement and a lock took part."""

    files: dict[str, str] = field(default_factory=dict)  # name -> sha256
    statement: Path | None = None
    lock: str | None = None  # where the lock came from
    dependencies: int = 0


def verify(targets: list[Path], sums: Path, statement: Path | None, lock: Path | None) -> Verified:
    listed = parse_sums(_text(sums), str(sums))
    result = Verified()
    for path in _files(targets, listed, sums):
        result.files[path.name] = _check_digest(path, listed, sums)
    if statement is not None:
        document = _statement(statement)
        _check_subjects(document, listed, statement)
        result.statement = statement
        found = _lock(lock, targets, sums)
        if found is not None:
            where, chosen = found
            result.dependencies = _check_dependencies(document, chosen, statement, where)
            result.lock = where
    return result


def _files(targets: list[Path], listed: dict[str, str], sums: Path) -> list[Path]:
    """A folder stands for every file SHA256SUMS lists in it; a file for itself."""
    chosen: list[Path] = []
    for target in targets:
        if target.is_dir():
            missing = [name for name in sorted(listed) if not (target / name).is_file()]
            if missing:
                raise VerifyError(f"{target / missing[0]}: listed in {sums}, and missing.")
            chosen += [target / name for name in sorted(listed)]
        elif target.is_file():
            chosen.append(target)
        else:
            raise InputFileError(f"{target}: no such file or folder; give the downloaded files.")
    return chosen


def _check_digest(path: Path, listed: dict[str, str], sums: Path) -> str:
    expected = listed.get(path.name)
    if expected is None:
        raise VerifyError(f"{path}: not listed in {sums}; is it a file of this release?")
    actual = file_sha256(path)
    if actual != expected:
        raise VerifyError(
            f"{path}: SHA-256 {actual} differs from {expected} in {sums}: the file is not the "
            "one published; download it again, and do not run it."
        )
    return actual


def _statement(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(_text(path))
    except ValueError as exc:
        raise InputFileError(f"{path}: not JSON ({exc}); give {STATEMENT_NAME}.") from None
    if not isinstance(document, dict) or document.get("_type") != STATEMENT_TYPE:
        raise InputFileError(f"{path}: not an in-toto v1 Statement; give {STATEMENT_NAME}.")
    return document


def _check_subjects(document: dict[str, Any], listed: dict[str, str], where: Path) -> None:
    subjects = {
        str(item.get("name")): str((item.get("digest") or {}).get("sha256", ""))
        for item in document.get("subject") or []
        if isinstance(item, dict)
    }
    for name in sorted(listed.keys() | subjects.keys()):
        if subjects.get(name) != listed.get(name):
            raise VerifyError(
                f"{where}: subject {name}: the statement says {subjects.get(name) or 'nothing'},"
                f" SHA256SUMS says {listed.get(name) or 'nothing'}; they belong to different "
                "releases."
            )


def _check_dependencies(document: dict[str, Any], lock: Lock, where: Path, source: str) -> int:
    definition = (document.get("predicate") or {}).get("buildDefinition") or {}
    stated = dependency_keys(definition.get("resolvedDependencies") or [])
    pinned = dependency_keys(dependencies(lock))
    for name in sorted(stated.keys() | pinned.keys()):
        if stated.get(name) != pinned.get(name):
            raise VerifyError(
                f"{where}: dependency {name}: the statement says "
                f"{stated.get(name) or 'nothing'}, the lock ({source}) pins "
                f"{pinned.get(name) or 'nothing'}."
            )
    return len(pinned)


def _lock(given: Path | None, targets: list[Path], sums: Path) -> tuple[str, Lock] | None:
    """The lock given, else bundle.lock.json beside SHA256SUMS, else the one inside an archive
    among the files; None: no lock at hand (the dependencies are then not checked)."""
    candidates = [given] if given is not None else [sums.parent / LOCK_NAME]
    if given is None:
        folders = [t for t in targets if t.is_dir()]
        candidates += [f / name for f in folders for name in sorted(_names(f))]
        candidates += [t for t in targets if t.is_file()]
    for path in candidates:
        if path.name == LOCK_NAME and path.is_file():
            return str(path), _read(path)
        if path.suffix.lower() in ARCHIVE_SUFFIXES and path.is_file():
            return f"{path} {LOCK_NAME}", _from_archive(path)
    if given is not None:
        raise InputFileError(
            f"{given}: no such lock; give bundle.lock.json or the bundle's archive."
        )
    return None


def _names(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.suffix.lower() in ARCHIVE_SUFFIXES]


def _read(path: Path) -> Lock:
    lock = read_lock(path)
    if lock is None:
        raise InputFileError(f"{path}: cannot read the lock.")
    return lock


def _from_archive(archive: Path) -> Lock:
    """The archive's bundle.lock.json (the one nearest its top), read from a temporary copy."""
    with tempfile.TemporaryDirectory(prefix="bundle-verify-") as folder:
        target = Path(folder) / LOCK_NAME
        if archive.suffix.lower() == ".zip":
            with corruption_is_archive_error(archive), zipfile.ZipFile(archive) as handle:
                member = _lock_member(archive, handle.namelist())
                target.write_bytes(handle.read(member))
        else:
            with (
                corruption_is_archive_error(archive, also=py7zr_errors()),
                py7zr_module().SevenZipFile(archive, mode="r") as handle,
            ):
                member = _lock_member(archive, handle.getnames())
                handle.extract(path=folder, targets=[member])
            (Path(folder) / member).replace(target)
        return _read(target)


def _lock_member(archive: Path, names: list[str]) -> str:
    found = sorted(
        (n for n in names if PurePosixPath(n).name == LOCK_NAME), key=lambda n: n.count("/")
    )
    if not found:
        raise InputFileError(f"{archive}: holds no {LOCK_NAME}; give the bundle's archive.")
    return found[0]


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(
            f"{path}: cannot read ({exc}); give {SUMS_NAME} and its statement."
        ) from None
