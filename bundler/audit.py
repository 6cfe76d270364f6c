"""`bundle audit`: judge a shipped folder the way the customer's machine will see it.

The folder is resolved by the resolver `deps` and `build` use (bundler.resolve), against that
folder and the Windows system policy only: never PATH, never the download cache. The exes in
the folder, the profile's roots and its runtime rules give the closure; the resulting Plan then
says what the loader will find there and what it will not. Each check is one small function
over that Plan and the folder's files returning findings of one catalogue code
(bundler.findings): a new check is a catalogue entry plus a function in CHECKS.

What is expected does not depend on what happens to be present: a DLL that is gone still
needs what it would have loaded. Its import tables come from the lock file in the folder
(recorded by the build), else from the profile's [[files]] (measured on the pinned DLLs), and
a rule's pattern becomes the concrete file name recorded there. Findings that rest on such a
record say so (`Finding.inferred`), and the report ends with the exact files to restore.

With a lock file (in the folder, or given as PATH) the folder is also checked against it:
absent, added, resized or re-timed files. Hashing every file is opt-in (`verify`; implied when
PATH is the lock file itself), so that an audit stays cheaper than one `objdump -p`.

Act layer: it reads the folder, and with `verify` hashes every file the lock lists. It writes
nothing.
"""

from __future__ import annotations

import fnmatch
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler import __version__
from bundler.cache import file_sha256
from bundler.errors import ArchiveError, ConfigError, ExitCode, InputFileError
from bundler.explain import supplier
from bundler.extract import unpack_all
from bundler.findings import CATALOGUE, Finding, Severity, finding, severity_rank
from bundler.lock import LOCK_NAME, Lock, LockedFile, read_lock
from bundler.pe import PEInfo, format_version, is_pe_candidate, read_pe
from bundler.plan import EDGE_LABELS, Edge, EdgeKind, Plan, Status
from bundler.profiles import (
    DEFAULT_PROFILE,
    Profile,
    dll_key,
    is_pattern,
    load_profile,
    versioned,
)
from bundler.resolve import Recorded, resolve
from bundler.system import SystemPolicy, load_system_policy
from bundler.vcruntime import DEBUG_CRT_DLLS, VC_RUNTIME_DLLS, outdated_runtimes

SCHEMA_VERSION = 1
ARCHIVE_SUFFIXES = (".zip", ".7z")
PROVIDER_PREFIX = "onnxruntime_providers_"
PROVIDERS_SHARED = "onnxruntime_providers_shared.dll"
# ORT 1.19.2 imports both; the deployment how-tos forget them (FIELD_NOTES §4).
VC_RUNTIME_PARTS = ("vcruntime140_1.dll", "msvcp140_1.dll")
CUDNN = "cudnn"
LOCK_RECORD = "the lock file"
PROFILE_RECORD = "the profile"
TIME_TOLERANCE_NS = 2_000_000_000  # FAT and zip keep times to 2 s

if TYPE_CHECKING:
    from bundler.loadproof import LoadProof


@dataclass(frozen=True)
class FolderFiles:
    """A folder as the audit sees it: every top-level file name, each PE file read once."""

    path: Path
    names: tuple[str, ...]  # every top-level file, as spelled on disk, sorted
    pe: dict[str, PEInfo]  # file name -> what it says about itself
    unreadable: dict[str, str]  # file name -> why it cannot be read

    def read(self, path: Path) -> PEInfo:
        """The resolver's reader: the scan's result, so no file is parsed twice and an
        unreadable one fails the same way for the resolver as it did for the scan."""
        if path.name in self.unreadable:
            raise InputFileError(self.unreadable[path.name])
        return self.pe[path.name] if path.name in self.pe else read_pe(path)


def is_pe_name(name: str) -> bool:
    return is_pe_candidate(name) or name.lower().endswith(".exe")


def scan_folder(folder: Path) -> FolderFiles:
    """Top level only, as the loader sees an app folder. A file that should be a PE image and
    is not readable is kept with its error: it is reported, never skipped."""
    names = tuple(sorted(entry.name for entry in os.scandir(folder) if entry.is_file()))
    pe: dict[str, PEInfo] = {}
    unreadable: dict[str, str] = {}
    for name in filter(is_pe_name, names):
        try:
            pe[name] = read_pe(folder / name)
        except InputFileError as exc:
            unreadable[name] = exc.message
    return FolderFiles(folder, names, pe, unreadable)


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
            "summary": {
                **{severity.value: self.count(severity) for severity in Severity},
                "files": self.files,
            },
            "findings": [_finding_dict(item) for item in self.findings],
            "suppressed": [_finding_dict(item) for item in self.suppressed],
            "load_proof": self.load_proof.to_dict() if self.load_proof else None,
            "signatures_checked": self.signatures,
            "restore": [asdict(item) for item in self.restore],
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
    }


# --- running an audit --------------------------------------------------------------------------


def audit(
    path: Path,
    profile_name: str | None = None,
    ignore: Sequence[Suppression] = (),
    verify: bool = False,
) -> AuditReport:
    """Audit PATH, a bundle folder or its bundle.lock.json. The profile is `profile_name`,
    else the one the lock file records, else the default profile. Findings matching an
    `ignore` rule are moved to `suppressed`. Hashes are checked with `verify`, or when PATH
    is the lock file. An archive is unpacked first: see unpacked()."""
    folder, lock_path = locate(path)
    lock_file = lock_path or folder / LOCK_NAME
    lock = read_lock(lock_file)
    profile = load_profile(profile_name or (lock.profile if lock else DEFAULT_PROFILE))
    policy = load_system_policy()
    files = scan_folder(folder)
    plan = resolve_folder(files, profile, policy, lock)
    hashed = lock is not None and (verify or lock_path is not None)
    audited = Audited(files, profile, policy, plan, lock, verify=hashed)
    kept, suppressed = suppress(run_checks(audited), ignore)
    return AuditReport(
        folder,
        lock_file if lock else None,
        profile,
        plan,
        len(files.pe),
        kept,
        suppressed,
        verified=hashed,
        restore=restore_list(audited),
    )


def is_archive(path: Path) -> bool:
    return path.suffix.lower() in ARCHIVE_SUFFIXES


@contextmanager
def unpacked(archive: Path) -> Iterator[tuple[Path, str]]:
    """The audit target inside a .zip/.7z as shipped, and the folder's path inside the archive
    ("" for its top level). Every member is unpacked (with the cache's safety checks) into a
    scratch folder removed afterwards. The bundle folder is the archive's one top-level folder
    (what `bundle build --archive` writes), else its top level; its bundle.lock.json, when
    there is one, is the target, so the hashes get checked."""
    if not archive.is_file():
        what = "does not exist" if not archive.exists() else "is not a file"
        raise InputFileError(f"{archive}: {what}; give a .zip or .7z of a bundle folder.")
    with tempfile.TemporaryDirectory(prefix="bundle-audit-") as scratch:
        tree = Path(scratch)
        try:
            unpack_all(archive, tree)
        except ArchiveError as exc:
            reason = exc.message.split("; ")[0]
            raise ArchiveError(
                f"{reason}; it cannot be audited. Rebuild it (bundle build --archive)."
            ) from None
        folder = shipped_folder(tree)
        lock = folder / LOCK_NAME
        yield (lock if lock.is_file() else folder), folder.relative_to(tree).as_posix()


def shipped_folder(tree: Path) -> Path:
    entries = list(tree.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return tree


def as_archived(report: AuditReport, archive: Path, inner: str) -> AuditReport:
    """The report of an unpacked archive, naming places inside the archive instead of the
    scratch folder that is gone once the audit ends."""
    folder = archive / inner if inner not in ("", ".") else archive
    lock = folder / LOCK_NAME if report.lock else None
    return replace(report, folder=folder, lock=lock, archive=archive)


def locate(path: Path) -> tuple[Path, Path | None]:
    """(the folder, the lock file to verify against, if PATH is one)."""
    if path.is_dir():
        return path, None
    if path.is_file() and path.suffix.lower() == ".json":
        return path.parent, path
    what = "does not exist" if not path.exists() else "is neither a folder nor a lock file"
    raise InputFileError(
        f"{path}: {what}; give a bundle folder, its {LOCK_NAME}, or a .zip/.7z of it."
    )


# --- suppressions: --ignore CODE[:FILE-PATTERN] -----------------------------------------------


@dataclass(frozen=True)
class Suppression:
    """One --ignore rule: a catalogue code (or its name), optionally only for findings that
    involve a file matching `pattern` (fnmatch, case-insensitive as Windows names are)."""

    code: str
    pattern: str | None = None

    def matches(self, item: Finding) -> bool:
        if item.code != self.code:
            return False
        if self.pattern is None:
            return True
        return any(fnmatch.fnmatch(name.lower(), self.pattern.lower()) for name in item.files)

    def __str__(self) -> str:
        return self.code if self.pattern is None else f"{self.code}:{self.pattern}"


def parse_suppression(text: str) -> Suppression:
    """`BA303`, `unreferenced-dll` or `BA303:onnxruntime_providers_*.dll`."""
    code, _, pattern = text.strip().partition(":")
    by_name = {check.name: check.code for check in CATALOGUE.values()}
    code = by_name.get(code, code.upper())
    if code not in CATALOGUE:
        raise ConfigError(
            f"--ignore {text!r}: {code!r} is not a finding code or name; "
            "the codes are listed in the README (Auditing a folder) and in --json output."
        )
    return Suppression(code, pattern or None)


def suppress(
    findings: Iterable[Finding], rules: Sequence[Suppression]
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """(kept, suppressed), each in the order given."""
    kept: list[Finding] = []
    suppressed: list[Finding] = []
    for item in findings:
        (suppressed if any(rule.matches(item) for rule in rules) else kept).append(item)
    return tuple(kept), tuple(suppressed)


def resolve_folder(
    files: FolderFiles, profile: Profile, policy: SystemPolicy, lock: Lock | None
) -> Plan:
    """The closure as the folder provides it: searched in the folder alone (the resolver
    adds the system policy), the roots being the folder's exes of the profile's machine (not an
    installer the build placed, such as vc_redist.x64.exe) plus the profile's roots."""
    installers = {item.name for item in lock.files if item.kind == "installer"} if lock else set()
    apps = [
        info
        for name, info in files.pe.items()
        if name.lower().endswith(".exe")
        and name not in installers
        and info.runs_as(profile.architecture)  # a .NET AnyCPU exe runs as x64
    ]
    records = recorded_files(profile, lock)
    plan = resolve(apps, profile, policy, [files.path], reader=files.read, records=records)
    mode = lock.vc_runtime if lock else profile.vc_runtime
    return installed_by_redist(plan) if mode == "installer" else plan


def recorded_files(profile: Profile, lock: Lock | None) -> dict[str, Recorded]:
    """Every DLL known without reading it, by key: the lock's bundled DLLs (its import tables
    as the build read them) over the profile's [[files]] (measured on the pinned artifacts). A
    lock written before imports were recorded still names its files; their import tables
    then come from the profile where it has them."""
    records = {
        dll_key(item.name): Recorded(item.name, item.imports, item.delay_imports, PROFILE_RECORD)
        for item in profile.files
    }
    for entry in lock.files if lock else ():
        if entry.kind != "bundled" or "/" in entry.name:
            continue
        key = dll_key(entry.name)
        if entry.imports is None and key in records:
            records[key] = replace(records[key], name=entry.name, origin=LOCK_RECORD)
            continue
        imports, delayed = entry.imports or (), entry.delay_imports or ()
        records[key] = Recorded(entry.name, imports, delayed, LOCK_RECORD)
    return records


def installed_by_redist(plan: Plan) -> Plan:
    """--vc-runtime installer: vc_redist.x64.exe installs the VC++ runtime on the target, so
    its absence from the folder is by design, not a missing DLL."""
    files = tuple(
        replace(item, status=Status.REDIST, note="installed by vc_redist.x64.exe")
        if item.key in VC_RUNTIME_DLLS and item.status is Status.MISSING
        else item
        for item in plan.files
    )
    return replace(plan, files=files)


def run_checks(audited: Audited) -> tuple[Finding, ...]:
    """Every check's findings, errors first, then by code and file."""
    return ordered(item for check in CHECKS.values() for item in check(audited))


def ordered(found: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(found, key=lambda f: (severity_rank(f.severity), f.code, f.files)))


def with_signatures(report: AuditReport, ignore: Sequence[Suppression] = ()) -> AuditReport:
    """--signatures: every PE file of the folder's Authenticode signature (BA601, BA602)."""
    from bundler.signatures import signature_findings

    names = [entry.name for entry in os.scandir(report.folder) if entry.is_file()]
    found = signature_findings(report.folder, filter(is_pe_name, names), report.profile)
    kept, suppressed = suppress(found, ignore)
    return replace(
        report,
        findings=ordered([*report.findings, *kept]),
        suppressed=(*report.suppressed, *suppressed),
        signatures=True,
    )


# --- helpers shared by the checks ---------------------------------------------------------------


def chains(plan: Plan, key: str) -> tuple[str, ...]:
    """Every chain from a root (an exe, or a DLL loaded at run time) to `key`, as text."""
    return tuple(plan.chain_text(chain, key) for chain in plan.chains_to(key))


def needed_by(
    audited: Audited, key: str, kinds: Iterable[EdgeKind] | None = None, labels: bool = False
) -> str:
    """The direct users of `key` (through edges of `kinds`), display names, once each; with
    `labels`, each with how it loads `key` ("cudnn64_9.dll (runtime)")."""
    wanted = set(kinds) if kinds is not None else set(EdgeKind)
    names = set()
    for edge in audited.plan.parents(key):
        if edge.kind in wanted:
            name = audited.name(edge.parent) if edge.parent else "the profile (a root)"
            names.add(f"{name} ({EDGE_LABELS[edge.kind]})" if labels else name)
    return ", ".join(sorted(names, key=str.lower))


def inferred(audited: Audited, key: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the records a need of `key` rests on, one detail line saying so) when every chain to
    it passes a record (an absent DLL's import table, a pattern's recorded file name); the
    folder alone then cannot show the need. ((), ()) when some chain is all in the folder."""
    chains = audited.plan.chains_to(key)
    if not chains or not all(any(edge.inferred for edge in chain) for chain in chains):
        return (), ()
    origins = tuple(sorted({edge.inferred for c in chains for edge in c if edge.inferred}))
    reasons = []
    for edge in (edge for edge in chains[0] if edge.inferred):
        if edge.kind is EdgeKind.RUNTIME:
            pattern = (edge.detail or "").rpartition("[")[2].rstrip("]")
            reasons.append(f"{audited.name(edge.child)} is the file recorded for {pattern}")
        else:
            reasons.append(f"{audited.name(edge.parent or '')} is absent, its imports recorded")
    line = f"inferred from {' and '.join(origins)}: " + "; ".join(dict.fromkeys(reasons))
    return origins, (line,)


def back_chain(chain: list[Edge], audited: Audited, start: str) -> str:
    """`cublasLt64_12.dll ← cublas64_12.dll ← onnxruntime_providers_cuda.dll`."""
    keys = [start] + [edge.child for edge in chain]
    return " ← ".join(audited.name(key) for key in reversed(keys))


# --- BA0xx: the folder could not be read ---------------------------------------------------------


def unreadable_files(audited: Audited) -> Iterator[Finding]:
    for name, message in audited.folder.unreadable.items():
        yield finding("BA001", (name,), message)


# --- BA1xx: a DLL will fail to load --------------------------------------------------------------


def missing_at_start(audited: Audited) -> Iterator[Finding]:
    """Missing from the import closure of a root: the loader itself reports these."""
    for item in audited.plan.missing:
        if item.key in audited.load_time:
            users = needed_by(audited, item.key, [EdgeKind.IMPORT])
            how = (
                f"imported by {users}, which cannot load"
                if users
                else f"loaded by {needed_by(audited, item.key)} as the app starts"
            )
            message = f"{item.name} is missing: {how}"
            origins, note = inferred(audited, item.key)
            details = (*note, *chains(audited.plan, item.key))
            yield finding("BA101", (item.name,), message, details, origins)


def missing_later(audited: Audited) -> Iterator[Finding]:
    """Missing, but only loaded after start-up (runtime rules, delay imports): no loader
    check at start-up sees it; the first operation that needs it fails, possibly hours in."""
    for item in audited.plan.missing:
        if item.key not in audited.load_time:
            users = needed_by(audited, item.key, labels=True)
            name = item.name
            if is_pattern(name):
                name = (
                    f"a file matching {name} (no concrete name is known: neither a lock file nor "
                    "the profile's [[files]] records one)"
                )
            message = (
                f"{name} is missing, and nothing needs it at start-up: the first operation "
                f"that loads it fails; needed by {users}"
            )
            origins, note = inferred(audited, item.key)
            details = (*note, *chains(audited.plan, item.key))
            yield finding("BA102", (item.name,), message, details, origins)


def provider_fails(audited: Audited) -> Iterator[Finding]:
    """An execution provider whose own import closure is incomplete: ORT's LoadLibrary of it
    fails with error 126, and ORT quietly runs on the CPU."""
    for provider in audited.plan.with_status(Status.BUNDLED):
        if not provider.key.startswith(PROVIDER_PREFIX) or provider.key == PROVIDERS_SHARED:
            continue
        closure = audited.plan.import_closure(provider.key)
        lost = {key: chain for key, chain in closure.items() if _is_missing(audited, key)}
        if lost:
            shown = [back_chain(chain, audited, provider.key) for chain in lost.values()]
            message = (
                f"{provider.name} will fail with error 126 and ORT falls back to CPU: "
                f"missing {'; '.join(shown)}"
            )
            files = (provider.name, *(audited.name(key) for key in lost))
            yield finding("BA103", files, message, file=provider.name)


def _is_missing(audited: Audited, key: str) -> bool:
    item = audited.plan.file(key)
    return item is not None and item.status is Status.MISSING


def providers_shared_missing(audited: Audited) -> Iterator[Finding]:
    if _is_missing(audited, PROVIDERS_SHARED):
        users = needed_by(audited, PROVIDERS_SHARED)
        message = (
            f"{audited.name(PROVIDERS_SHARED)} is missing: needed by {users}; ORT loads no "
            "execution provider DLL without it"
        )
        yield finding("BA104", (audited.name(PROVIDERS_SHARED),), message)


def vc_runtime_part_missing(audited: Audited) -> Iterator[Finding]:
    for key in VC_RUNTIME_PARTS:
        if _is_missing(audited, key):
            users = needed_by(audited, key)
            message = f"{audited.name(key)} is missing: {users} import it and cannot load"
            yield finding("BA105", (audited.name(key),), message)


# --- BA2xx: builds and versions that do not go together ------------------------------------------


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
        skipped = "; the loader skips it, so it is missing" if _is_missing(audited, name) else ""
        message = f"{name} is built for {info.machine}, the profile targets {wanted}{skipped}"
        yield finding("BA205", (name,), message, architecture=wanted)


# --- BA3xx: what should not ship, or ships for nothing -------------------------------------------


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


# --- BA4xx: the folder no longer matches its lock file -------------------------------------------


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
    a changed file (the build keeps its sources' times; xcopy and robocopy keep them too)."""
    if not audited.lock or audited.verify:
        return
    for entry in audited.lock.files:
        if entry.mtime_ns is None:
            continue  # a lock written before times were recorded
        try:
            stat = (audited.folder.path / entry.name).stat()
        except OSError:
            continue
        moved = abs(stat.st_mtime_ns - entry.mtime_ns) > TIME_TOLERANCE_NS
        if stat.st_size == entry.size and moved:
            message = (
                f"{entry.name} has another time stamp than the lock file records (same size): "
                "it may have been changed or copied without its times after the build"
            )
            yield finding("BA404", (entry.name,), message)


def file_removed(audited: Audited) -> Iterator[Finding]:
    if not audited.lock:
        return
    listed = [entry.name for entry in audited.lock.files]
    if audited.lock.app and audited.lock.app not in listed:
        listed.append(audited.lock.app)
    for name in listed:
        if not (audited.folder.path / name).is_file():
            yield finding("BA402", (name,), f"{name} is listed in the lock file but absent")


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
    "BA301": driver_dll_shipped,
    "BA302": os_component_shipped,
    "BA303": unreferenced_dll,
    "BA304": case_clash,
    "BA305": system32_shadowing,
    "BA401": hash_mismatch,
    "BA402": file_removed,
    "BA403": file_added,
    "BA404": time_changed,
}


# --- what to restore -----------------------------------------------------------------------------


def restore_list(audited: Audited) -> tuple[Restore, ...]:
    """Every file to put back, once, sorted by name: the closure's missing DLLs (concrete
    names where the lock or the profile records them) and the lock's absent files."""
    wanted: dict[str, str] = {}
    for item in audited.plan.missing:
        wanted.setdefault(item.key, item.name)
    for name in absent_locked(audited):
        wanted.setdefault(dll_key(name), name)
    return tuple(_restore(audited, key, wanted[key]) for key in sorted(wanted))


def absent_locked(audited: Audited) -> list[str]:
    if not audited.lock:
        return []
    listed = [entry.name for entry in audited.lock.files]
    if audited.lock.app and audited.lock.app not in listed:
        listed.append(audited.lock.app)
    return [name for name in listed if not (audited.folder.path / name).is_file()]


def _restore(audited: Audited, key: str, name: str) -> Restore:
    entry = audited.locked.get(key)
    found = supplier(audited.profile, name)
    origins, _ = inferred(audited, key)
    return Restore(
        name=name,
        artifact=(entry.artifact if entry else None) or (found.artifact if found else None),
        version=found.version if found else None,
        origin=entry.origin if entry else None,
        sha256=entry.sha256 if entry else None,
        sources=found.sources if found else (),
        known_from=" and ".join(origins) or None,
        note="no concrete file name is known (a pattern)" if is_pattern(name) else None,
    )
