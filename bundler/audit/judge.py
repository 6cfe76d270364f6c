"""Act layer: `bundle audit`, running one.

`bundle audit`: judge a shipped folder the way the customer's machine will see it.

The folder is resolved by the resolver `deps` and `build` use (bundler.closure.resolve), against
that
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

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.acquire.unpack import unpack_all
from bundler.audit.checks import CHECKS
from bundler.audit.recognise import choose_profile
from bundler.audit.report import (
    Audited,
    AuditReport,
    FolderFiles,
    gpu_summary,
    is_pe_name,
    pack_summary,
    scan_folder,
)
from bundler.audit.restore import restore_list
from bundler.audit.suppressions import Suppression, ordered, suppress
from bundler.closure.lock import INSTALLED_LIST, LOCK_NAME, PACK_MARKER, Lock
from bundler.closure.lockfile import read_lock
from bundler.closure.plan import Plan, Status
from bundler.closure.resolve import Recorded, resolve
from bundler.closure.times import read_times
from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.errors import ArchiveError, InputFileError
from bundler.findings import Finding
from bundler.target.profiles import Profile, dll_key
from bundler.target.system import SystemPolicy, load_system_policy

if TYPE_CHECKING:
    pass

ARCHIVE_SUFFIXES = (".zip", ".7z")
LOCK_RECORD = "the lock file"
PROFILE_RECORD = "the profile"


def installed_names(folder: Path) -> frozenset[str] | None:
    """The names a setup listed in the folder's bundle-installed.txt (UTF-8 with a byte-order
    mark, Windows separators), posix and lower case; None where no setup wrote one."""
    try:
        text = (folder / INSTALLED_LIST).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(
            f"{folder / INSTALLED_LIST}: cannot be read ({exc}); the setup writes it as UTF-8: "
            "run the setup again, or delete the file to audit the folder as a build's output."
        ) from None
    lines = (line.strip().replace("\\", "/").lower() for line in text.splitlines())
    return frozenset(line for line in lines if line)


def installed_pack(folder: Path) -> str | None:
    """The pack hash in the folder's bundle-pack.txt (its first line); None without one."""
    try:
        lines = (folder / PACK_MARKER).read_text(encoding="utf-8-sig").split()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""  # unreadable: matches no pack (BA406)
    return lines[0].lower() if lines else ""


def audit(
    path: Path,
    profile_name: str | None = None,
    ignore: Sequence[Suppression] = (),
    verify: bool = False,
) -> AuditReport:
    """Audit PATH, a bundle folder or its bundle.lock.json. The profile is `profile_name`,
    else the one the lock file records, else the one the folder's ORT names
    (bundler.audit.recognise). Findings matching an
    `ignore` rule are moved to `suppressed`. Hashes are checked with `verify`, or when PATH
    is the lock file. An archive is unpacked first: see unpacked()."""
    folder, lock_path = locate(path)
    lock_file = lock_path or folder / LOCK_NAME
    lock = read_lock(lock_file)
    files = scan_folder(folder)
    choice = choose_profile(profile_name, lock, files)
    profile = choice.profile
    policy = load_system_policy()
    plan = resolve_folder(files, profile, policy, lock)
    hashed = lock is not None and (verify or lock_path is not None)
    audited = Audited(
        files,
        profile,
        policy,
        plan,
        lock,
        hashed,
        installed_names(folder),
        installed_pack(folder),
        read_times(folder, lock_file),
    )
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
        gpu=gpu_summary(audited),
        packs=pack_summary(audited),
        choice=choice,
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


def refuse_source_folder(path: Path, profile_name: str | None) -> None:
    """PATH is a folder without bundle.lock.json, and a folder in it has one: most likely the
    app's source folder next to its built bundle (examples/hello beside examples/hello/dist).
    Auditing it would report every DLL as missing, dozens of findings that hide the mistake,
    so this stops first with one line naming the bundle (InputFileError, exit 4). Naming the
    profile (--profile) says the folder itself is meant: it is then audited without a lock."""
    if profile_name is not None or not path.is_dir() or (path / LOCK_NAME).is_file():
        return
    built = bundle_inside(path)
    if built is not None:
        raise InputFileError(
            f"no {LOCK_NAME} in {path}; did you mean {built}? (bundle audit {built}; to audit "
            f"{path} itself, without a lock file, name its profile: --profile NAME.)"
        )


def bundle_inside(folder: Path) -> Path | None:
    """The folder in `folder` that holds a bundle.lock.json: dist first, then by name."""
    children = [entry for entry in folder.iterdir() if entry.is_dir()]
    children.sort(key=lambda child: (child.name.lower() != "dist", child.name.lower()))
    return next((child for child in children if (child / LOCK_NAME).is_file()), None)


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
    plan = installed_by_redist(plan) if mode == "installer" else plan
    return pruned_by_build(plan, lock) if lock and lock.pruned else plan


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


def pruned_by_build(plan: Plan, lock: Lock) -> Plan:
    """--model: the lock's pruned DLLs are absent by design (the models never load them),
    not missing; each keeps the build's reason."""
    why = {dll_key(item.name): item.why for item in lock.pruned}
    files = tuple(
        replace(item, status=Status.PRUNED, note=why[item.key])
        if item.key in why and item.status is Status.MISSING
        else item
        for item in plan.files
    )
    return replace(plan, files=files)


def run_checks(audited: Audited) -> tuple[Finding, ...]:
    """Every check's findings, errors first, then by code and file."""
    return ordered(item for check in CHECKS.values() for item in check(audited))


def with_signatures(report: AuditReport, ignore: Sequence[Suppression] = ()) -> AuditReport:
    """--signatures: every PE file of the folder's Authenticode signature (BA601, BA602)."""
    from bundler.binary.signatures import signature_findings

    names = [entry.name for entry in os.scandir(report.folder) if entry.is_file()]
    found = signature_findings(report.folder, filter(is_pe_name, names), report.profile)
    kept, suppressed = suppress(found, ignore)
    return replace(
        report,
        findings=ordered([*report.findings, *kept]),
        suppressed=(*report.suppressed, *suppressed),
        signatures=True,
    )
