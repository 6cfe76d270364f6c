"""Act layer: extract the DLLs and licence files bundle needs from a pinned release archive,
and, from a source that carries it, ORT's C/C++ SDK (headers and import libraries).

Archives come from a content-addressed cache, so the extracted tree is keyed by the archive's
SHA-256: `<extract_root>/<sha256>/`, members at their archive paths, and a `.complete` marker
(a JSON record of the members and of the selection that chose them) written last. The tree is
built in a temp folder beside it and renamed into place, so a killed run never leaves a tree
that looks complete, and a second run does no work at all.

Every member of the archive is validated before anything is written (absolute paths, drive
letters, "..", symlinks, absurd declared sizes: bundler.acquire.archive_entries): one unsafe
member refuses the whole archive.
Zip members are inflated by our own streaming loop rather than `ZipFile.open`, because zipfile
silently truncates a member that inflates past its declared size; here that is an error.

Speed (benchmarks/README.md, P4): `extract_all` inflates the members of every archive a command
needs on one pool of threads, largest member first across all archives (zlib and ISA-L release
the GIL), so the 600 MB members of different wheels inflate side by side instead of one
archive after another. ISA-L's inflate (the `isal` package) is used where it is installed: it
inflates the same deflate streams about twice as fast as zlib.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Collection, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeGuard

from bundler.acquire.archive_entries import (
    Member,
    archive_format,
    sevenzip_entries,
    unsafe_member,
    zip_entries,
)
from bundler.acquire.unpack import WORKERS, Unpacking, write_members
from bundler.errors import InputFileError
from bundler.progress_meter import ProgressCallback

MARKER = ".complete"
LICENCE_WORDS = ("license", "licence", "eula", "notice")

_SHA256 = re.compile(r"[0-9a-f]{64}")


def sdk_member(name: str) -> bool:
    """True for the C/C++ SDK members of a release zip: headers (`*.h`) anywhere under an
    `include/` folder, and import libraries (`*.lib`) directly in a `lib/` folder, where ORT's
    zip keeps them beside the DLLs (its `.pdb` files stay out). Case-insensitive."""
    parts = name.replace("\\", "/").lower().split("/")
    base, folders = parts[-1], parts[:-1]
    if base.endswith(".h"):
        return "include" in folders
    if base.endswith(".lib"):
        return bool(folders) and folders[-1] == "lib"
    return False


def wanted_member(name: str, licence_names: Collection[str] = ()) -> bool:
    """True for the members bundle deploys or must ship: DLLs (any folder) and licence files.

    A licence file is one whose basename is in `licence_names` (a profile lists the odd ones,
    such as NVIDIA's SLA) or contains license/licence/eula/notice. Case-insensitive, because
    the archives are made on Windows.
    """
    base = _basename(name)
    if not base:
        return False
    if base.endswith(".dll") or any(word in base for word in LICENCE_WORDS):
        return True
    return base in {_basename(licence) for licence in licence_names}


@dataclass(frozen=True)
class Extracted:
    """The extracted tree of one archive."""

    root: Path  # the cached tree: <extract_root>/<sha256>/
    members: tuple[str, ...]  # paths written, relative to root (posix, normalised), sorted
    reused: bool  # True when this call wrote nothing: the tree was complete, or another won


@dataclass(frozen=True)
class Selection:
    """Which members a tree holds besides DLLs: licence files by name, and with `sdk` the
    C/C++ SDK (sdk_member). A tree made for one selection serves every selection it covers;
    a request it does not cover extracts again, for the union of both (a tree only grows)."""

    licence_names: frozenset[str] = frozenset()
    sdk: bool = False

    def covers(self, other: Selection) -> bool:
        return other.licence_names <= self.licence_names and (self.sdk or not other.sdk)

    def union(self, other: Selection) -> Selection:
        return Selection(self.licence_names | other.licence_names, self.sdk or other.sdk)

    def wants(self, name: str) -> bool:
        return wanted_member(name, self.licence_names) or (self.sdk and sdk_member(name))


def _selection(licence_names: Collection[str], sdk: bool) -> Selection:
    return Selection(frozenset(_basename(name) for name in licence_names), sdk)


@dataclass(frozen=True)
class _Record:
    """What a `.complete` marker promises: these members, chosen by this selection. A marker
    written before the SDK existed has no "sdk" key: its tree holds no SDK members."""

    members: tuple[str, ...]
    selection: Selection


@dataclass(frozen=True)
class Request:
    """One archive to extract: the verified blob, its SHA-256 (the tree's name), and what to
    take from it besides DLLs (licence files by name; with `sdk` the C/C++ SDK)."""

    archive: Path
    sha256: str
    licence_names: Collection[str] = ()
    sdk: bool = False


def extract(
    archive: Path,
    sha256: str,
    extract_root: Path,
    licence_names: Collection[str] = (),
    workers: int = WORKERS,
    *,
    sdk: bool = False,
) -> Extracted:
    """Extract the wanted members of `archive` into `<extract_root>/<sha256>/`, once.

    `sha256` is trusted: the fetch layer verified it, and re-hashing a 600 MB archive on every
    run would cost more than the extraction it saves. A complete tree is reused without
    opening the archive, unless it was made with fewer licence names than asked for now, or
    without the SDK members (`sdk`: headers and import libraries) when they are asked for.
    `workers` threads inflate zip members in parallel; a 7z is unpacked in one py7zr pass.
    The format comes from the suffix, or for a suffix-less cache blob from its first bytes.
    """
    request = Request(archive, sha256, licence_names, sdk)
    return extract_all([request], extract_root, workers)[0]


def extract_all(
    requests: Sequence[Request],
    extract_root: Path,
    workers: int = WORKERS,
    progress: ProgressCallback | None = None,
) -> list[Extracted]:
    """extract() for several archives at once, their members inflated on one pool of
    `workers` threads, largest first. `progress` hears (bytes written, bytes to write).
    Every archive is checked before any is written; on an error every unfinished tree is
    dropped and the first error is raised."""
    results: list[Extracted | None] = []
    jobs: list[_Job] = []
    with ExitStack() as cleanup:
        for request in requests:
            found = _reusable(request, extract_root)
            if found is None:
                job = _plan_job(request, extract_root)
                cleanup.callback(shutil.rmtree, job.tree, ignore_errors=True)
                jobs.append(job)
            results.append(found)
        unpacking = [Unpacking(job.archive, job.tree, job.members, job.sevenzip) for job in jobs]
        write_members(unpacking, workers, progress)
        finished = iter([_finish(job) for job in jobs])
    return [found if found is not None else next(finished) for found in results]


@dataclass(frozen=True)
class _Job:
    """An archive being extracted: its checked members and the temp tree they go to."""

    archive: Path
    target: Path  # <extract_root>/<sha256>
    tree: Path  # the temp folder beside target, renamed to it when complete
    members: list[Member]
    selection: Selection
    sevenzip: bool


def _reusable(request: Request, extract_root: Path) -> Extracted | None:
    target = extract_root / _cache_key(request.sha256)
    recorded = _read_marker(target)
    if recorded is not None and recorded.selection.covers(_request_selection(request)):
        return Extracted(target, recorded.members, reused=True)
    return None


def _request_selection(request: Request) -> Selection:
    return _selection(request.licence_names, request.sdk)


def _plan_job(request: Request, extract_root: Path) -> _Job:
    """Validate every entry and make the temp tree; nothing is inflated yet."""
    archive, target = request.archive, extract_root / _cache_key(request.sha256)
    selection = _request_selection(request)
    recorded = _read_marker(target)
    if recorded is not None:  # grow the tree, never drop what others asked for
        selection = selection.union(recorded.selection)
    if not archive.is_file():
        raise InputFileError(f"{archive}: archive not found; download it again.")
    sevenzip = archive_format(archive) == ".7z"
    entries = sevenzip_entries(archive) if sevenzip else zip_entries(archive)
    members = _select(archive, entries, selection)
    target.parent.mkdir(parents=True, exist_ok=True)
    tree = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    return _Job(archive, target, tree, members, selection, sevenzip)


def is_extracted(
    extract_root: Path, sha256: str, licence_names: Collection[str] = (), *, sdk: bool = False
) -> bool:
    """True when extract() would reuse the tree without opening the archive."""
    recorded = _read_marker(extract_root / _cache_key(sha256))
    return recorded is not None and recorded.selection.covers(_selection(licence_names, sdk))


def _basename(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1].lower()


def _cache_key(sha256: str) -> str:
    """The tree's folder name; validated because it is joined to a path."""
    key = sha256.lower()
    if not _SHA256.fullmatch(key):
        raise ValueError(f"sha256 must be 64 hexadecimal digits, not {sha256!r}")
    return key


def _select(archive: Path, entries: list[Member], selection: Selection) -> list[Member]:
    """The wanted entries, refusing two that would be the same file on Windows (where the
    tree is deployed, names are case-insensitive) or a file that is also another's folder."""
    wanted = [entry for entry in entries if selection.wants(entry.name)]
    seen: dict[str, str] = {}
    for member in wanted:
        if not member.path:
            raise unsafe_member(archive, member.name, "empty path")
        key = member.path.lower()
        if key in seen:
            raise unsafe_member(archive, member.name, f"same file as {seen[key]!r} on Windows")
        seen[key] = member.name
    folders = {str(parent).lower() for m in wanted for parent in PurePosixPath(m.path).parents}
    for member in wanted:
        if member.path.lower() in folders:
            raise unsafe_member(archive, member.name, "both a file and a folder")
    return wanted


# --- writing: a temp tree, renamed into place -------------------------------------------------


def _finish(job: _Job) -> Extracted:
    """Write the marker into the finished temp tree, then rename it to its target: the temp
    folder is on the same filesystem, so the rename is atomic."""
    record = _Record(tuple(sorted(member.path for member in job.members)), job.selection)
    _write_marker(job.tree, job.archive, record)
    if _install(job.tree, job.target, job.selection):
        return Extracted(job.target, record.members, reused=False)
    theirs = _read_marker(job.target)
    assert theirs is not None  # _install only declines a complete tree
    return Extracted(job.target, theirs.members, reused=True)


def _install(tree: Path, target: Path, selection: Selection) -> bool:
    """Rename the finished tree to `target`. False when another process completed a tree that
    serves this call meanwhile; an incomplete or narrower tree there is replaced."""
    try:
        os.replace(tree, target)
        return True
    except OSError:
        if not os.path.lexists(target):
            raise
        recorded = _read_marker(target)
        if recorded is not None and recorded.selection.covers(selection):
            return False
    stale = target.with_name(f".{target.name}.{secrets.token_hex(4)}.stale")
    os.replace(target, stale)
    os.replace(tree, target)
    shutil.rmtree(stale, ignore_errors=True)
    return True


def _write_marker(tree: Path, archive: Path, record: _Record) -> None:
    document = {
        "archive": archive.name,
        "licence_names": sorted(record.selection.licence_names),
        "sdk": record.selection.sdk,
        "members": list(record.members),
    }
    (tree / MARKER).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def _read_marker(tree: Path) -> _Record | None:
    """The record of a complete tree; None when there is no tree, or no valid marker in it."""
    try:
        document = json.loads((tree / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    members, names = document.get("members"), document.get("licence_names")
    sdk = document.get("sdk", False)  # absent in markers older than the SDK selection
    if not _is_str_list(members) or not _is_str_list(names) or not isinstance(sdk, bool):
        return None
    return _Record(tuple(members), Selection(frozenset(names), sdk))


def _is_str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
