"""Read/decide layer of the audit: the folder as the audit reads it, what every check reads
(`Audited`), and the report every view reads (`AuditReport`, with the restore list)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler import __version__
from bundler.binary.fatbin import GpuCode, read_gpu_code
from bundler.binary.pe import PEInfo, is_pe_candidate, read_pe
from bundler.closure.gpu import coverage, judged
from bundler.closure.lock import INSTALLED_LIST, Lock, LockedEp, LockedFile
from bundler.closure.plan import Edge, Plan, Status
from bundler.errors import ExitCode, InputFileError
from bundler.findings import Finding, Severity
from bundler.target.profiles import (
    Profile,
    dll_key,
)
from bundler.target.system import SystemPolicy

if TYPE_CHECKING:
    from bundler.audit.loadproof import LoadProof

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FolderFiles:
    """A folder as the audit sees it: every top-level file name, each PE file read once."""

    path: Path
    names: tuple[str, ...]  # every top-level file, as spelled on disk, sorted
    pe: dict[str, PEInfo]  # file name -> what it says about itself
    unreadable: dict[str, str]  # file name -> why it cannot be read

    def named(self, name: str) -> PEInfo | None:
        """The PE file of that name, compared as Windows does (case-insensitively)."""
        key = dll_key(name)
        return next((info for found, info in self.pe.items() if dll_key(found) == key), None)

    def read(self, path: Path) -> PEInfo:
        """The resolver's reader: the scan's result, so no file is parsed twice and an
        unreadable one fails the same way for the resolver as it did for the scan."""
        if path.name in self.unreadable:
            raise InputFileError(self.unreadable[path.name])
        return self.pe[path.name] if path.name in self.pe else read_pe(path)


def is_pe_name(name: str) -> bool:
    return is_pe_candidate(name) or name.lower().endswith(".exe")


# What Inno Setup itself puts into an app folder it installed (its uninstaller, a 32-bit exe,
# and its data): not the bundle's, so not audited where a setup's bundle-installed.txt is.
_SETUP_OWN = re.compile(r"unins\d{3}\.(exe|dat|msg)")


def scan_folder(folder: Path) -> FolderFiles:
    """Top level only, as the loader sees an app folder. A file that should be a PE image and
    is not readable is kept with its error: it is reported, never skipped. In a folder a setup
    installed, the setup's own uninstaller is not the bundle's and is left out."""
    installed = (folder / INSTALLED_LIST).is_file()
    names = tuple(
        sorted(
            entry.name
            for entry in os.scandir(folder)
            if entry.is_file() and not (installed and _SETUP_OWN.fullmatch(entry.name.lower()))
        )
    )
    pe: dict[str, PEInfo] = {}
    unreadable: dict[str, str] = {}
    for name in filter(is_pe_name, names):
        try:
            pe[name] = read_pe(folder / name)
        except InputFileError as exc:
            unreadable[name] = exc.message
    return FolderFiles(folder, names, pe, unreadable)


@dataclass(frozen=True)
class ProfileChoice:
    """The profile an audit uses, and why: `origin` is one of flag, lock, inferred, default,
    none (no shipped profile fits: the import closure alone); `detail` says from what."""

    profile: Profile
    origin: str
    detail: str
    notes: tuple[str, ...] = ()
    missing: str | None = None  # the profile the catalogue lacks (origin "none")

    def to_dict(self) -> dict[str, str | None]:
        return {"origin": self.origin, "detail": self.detail, "missing": self.missing}


@dataclass(frozen=True)
class Audited:
    """What every check reads: the folder, the profile and policy, the Plan resolved from the
    folder alone, and the lock file (`verify`: hash every file against it)."""

    folder: FolderFiles
    profile: Profile
    policy: SystemPolicy
    plan: Plan
    lock: Lock | None = None
    verify: bool = False
    # The names (posix, lower case) of the folder's bundle-installed.txt, which a setup writes:
    # None in a folder no setup installed (a build's output)
    installed: frozenset[str] | None = None
    installed_pack: str | None = None  # the pack hash in bundle-pack.txt; None without one
    # the build's note of its files' times (bundle.times.json), by name: BA404's reference
    times: Mapping[str, int] = field(default_factory=dict)

    @cached_property
    def packs_left_out(self) -> tuple[LockedEp, ...]:
        """The lock's packs a setup left out: bundle-installed.txt lists none of its files and
        its folder is absent (its component was not selected)."""
        if self.lock is None or self.installed is None:
            return ()
        return tuple(
            pack
            for pack in self.lock.eps
            if pack.plugin.lower() not in self.installed
            and not (self.folder.path / pack.folder).exists()
        )

    @property
    def front(self) -> PEInfo | None:
        """The folder's onnxruntime.dll, as read."""
        return self.folder.named("onnxruntime.dll")

    @cached_property
    def load_time(self) -> frozenset[str]:
        """Keys the loader maps at start-up: the import closure of every root (the exes, and
        what the host and ORT load first: the profile's roots)."""
        keys: set[str] = set()
        for root in self.plan.roots:
            keys |= self.plan.import_closure(root).keys()
        return frozenset(keys)

    def name(self, key: str) -> str:
        item = self.plan.file(key)
        return item.name if item else key

    def chains_to(self, key: str) -> list[list[Edge]]:
        """The Plan's chains to `key`, walked once per audit: a missing DLL's finding, its
        inference note and its restore entry all read them."""
        if key not in self._chains:
            self._chains[key] = self.plan.chains_to(key)
        return self._chains[key]

    @cached_property
    def _chains(self) -> dict[str, list[list[Edge]]]:
        return {}

    @cached_property
    def gpu_code(self) -> dict[str, GpuCode]:
        """The CUDA code of the bundle's DLLs: the lock's records, else (a GPU profile, no
        lock) read from the folder's DLLs."""
        if self.lock is not None and any(item.sass is not None for item in self.lock.files):
            return {
                item.name: GpuCode(item.sass or (), item.ptx or (), 0)
                for item in self.lock.files
                if item.sass or item.ptx
            }
        if self.profile.gpu_driver is None:
            return {}
        found = {name: read_gpu_code(self.folder.path / name) for name in self.folder.pe}
        return {name: code for name, code in found.items() if code and (code.sass or code.ptx)}

    @property
    def gpu_targets(self) -> tuple[str, ...]:
        return self.lock.gpus if self.lock and self.lock.gpus else self.profile.gpus

    @cached_property
    def locked(self) -> dict[str, LockedFile]:
        """The lock's entries by lower-case name (empty without a lock file)."""
        return {dll_key(item.name): item for item in self.lock.files} if self.lock else {}


CheckFunction = Callable[[Audited], Iterable[Finding]]


@dataclass(frozen=True)
class Restore:
    """One file to put back into the folder: its artifact, where the build took it (the
    lock's record) and the profile's pinned sources, so a pipeline can fetch exactly it.
    `bundle build` into the same folder restores every one of them."""

    name: str
    artifact: str | None = None
    version: str | None = None
    origin: str | None = None  # the URL / wheel / folder the build took it from (lock file)
    sha256: str | None = None  # the file's own hash (lock file)
    sources: tuple[str, ...] = ()  # the profile artifact's pinned sources, as text
    known_from: str | None = None  # "the lock file" / "the profile" / None: the folder shows it
    note: str | None = None  # e.g. why no concrete file name could be given


@dataclass(frozen=True)
class AuditReport:
    """The audit's document: every view (table, --json, later JUnit and HTML) reads this."""

    folder: Path
    lock: Path | None  # the lock file the folder was checked against (the folder's, or PATH)
    profile: Profile
    plan: Plan
    files: int  # PE files read in the folder
    findings: tuple[Finding, ...]
    suppressed: tuple[Finding, ...] = ()  # matched an --ignore rule: shown, never counted
    load_proof: LoadProof | None = None  # what the real loader said (--run)
    archive: Path | None = None  # the .zip/.7z PATH was; `folder` is then its unpacked copy
    signatures: bool = False  # the Authenticode signatures were checked (--signatures)
    verified: bool = False  # every locked file was hashed (--verify, or PATH was the lock)
    restore: tuple[Restore, ...] = ()  # the exact files to put back, with where they come from
    gpu: dict[str, Any] | None = None  # the compute capabilities its CUDA code serves (gpu_summary)
    packs: tuple[dict[str, Any], ...] = ()  # each EP pack of the lock as found (pack_summary)
    choice: ProfileChoice | None = None  # where the profile came from (bundler.audit.recognise)
    tool_version: str = __version__

    def count(self, severity: Severity) -> int:
        return sum(1 for item in self.findings if item.severity is severity)

    def exit_code(self, strict: bool = False) -> ExitCode:
        """0 clean (warnings and info allowed), 17 with errors, 18 with warnings and --strict."""
        if self.count(Severity.ERROR):
            return ExitCode.AUDIT_ERRORS
        if strict and self.count(Severity.WARNING):
            return ExitCode.AUDIT_WARNINGS
        return ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool_version": self.tool_version,
            "folder": str(self.folder),
            "archive": str(self.archive) if self.archive else None,
            "lock": str(self.lock) if self.lock else None,
            "hashes_verified": self.verified,
            "profile": self.profile.name,
            "profile_origin": self.choice.to_dict() if self.choice else None,
            "notes": list(self.choice.notes) if self.choice else [],
            "summary": {
                **{severity.value: self.count(severity) for severity in Severity},
                "files": self.files,
            },
            "findings": [_finding_dict(item) for item in self.findings],
            "suppressed": [_finding_dict(item) for item in self.suppressed],
            "load_proof": self.load_proof.to_dict() if self.load_proof else None,
            "signatures_checked": self.signatures,
            "restore": [asdict(item) for item in self.restore],
            "gpu": self.gpu,
            "eps": list(self.packs),
            "packs": list(self.packs),  # the name before "eps" (issue 39), kept for readers
            "plan": plan_summary(self.plan),
        }


def _finding_dict(item: Finding) -> dict[str, Any]:
    check = item.check
    return {
        "code": item.code,
        "name": check.name,
        "severity": item.severity.value,
        "title": check.title,
        "files": list(item.files),
        "message": item.message,
        "fix": item.fix,
        "details": list(item.details),
        "inferred_from": list(item.inferred),
    }


def gpu_summary(audited: Audited) -> dict[str, Any] | None:
    """The compute capabilities the bundle serves natively, by PTX JIT only, or not at all, the
    targets, and each DLL's SASS and PTX; None for a bundle without CUDA code."""
    code = audited.gpu_code
    if not code:
        return None
    return {
        **coverage(code),
        "targets": list(audited.gpu_targets),
        "not_judged": sorted(set(code) - set(judged(code))),
        "dlls": {
            name: {"sass": list(item.sass), "ptx": list(item.ptx)} for name, item in code.items()
        },
    }


def pack_summary(audited: Audited) -> tuple[dict[str, Any], ...]:
    """Each EP pack of the lock: its folder, the bytes and files of it the folder holds against
    the lock's, and whether a setup left it out (BA405)."""
    if audited.lock is None:
        return ()
    left_out = {pack.name for pack in audited.packs_left_out}
    found = []
    for pack in audited.lock.eps:
        locked = [item for item in audited.lock.files if item.name.startswith(pack.folder + "/")]
        present = [item for item in locked if (audited.folder.path / item.name).is_file()]
        found.append(
            {
                "name": pack.name,
                "folder": pack.folder,
                "size": sum((audited.folder.path / item.name).stat().st_size for item in present),
                "locked_size": sum(item.size for item in locked),
                "files": len(present),
                "locked_files": len(locked),
                "left_out": pack.name in left_out,
            }
        )
    return tuple(found)


def plan_summary(plan: Plan) -> dict[str, Any]:
    """The Plan in brief: what the folder provides and what the target must provide."""
    bundled = plan.with_status(Status.BUNDLED)
    return {
        "architecture": plan.architecture,
        "min_windows": plan.min_windows,
        "roots": list(plan.roots),
        "statuses": {status.value: len(plan.with_status(status)) for status in Status},
        "bundled_bytes": sum(item.size or 0 for item in bundled),
        "missing": sorted(item.name for item in plan.missing),
        "driver": sorted(item.name for item in plan.with_status(Status.DRIVER)),
        "pruned": {item.name: item.note for item in plan.with_status(Status.PRUNED)},
    }
