"""Act layer: extract the DLLs and licence files bundle needs from a pinned release archive,
and, from a source that carries it, ORT's C/C++ SDK (headers and import libraries).

Archives come from a content-addressed cache, so the extracted tree is keyed by the archive's
SHA-256: `<extract_root>/<sha256>/`, members at their archive paths, and a `.complete` marker
(a JSON record of the members and of the selection that chose them) written last. The tree is
built in a temp folder beside it and renamed into place, so a killed run never leaves a tree
that looks complete, and a second run does no work at all.

Every member of the archive is validated before anything is written (absolute paths, drive
letters, "..", symlinks, absurd declared sizes): one unsafe member refuses the whole archive.
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
import stat
import tempfile
import zipfile
from collections.abc import Collection, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeGuard

from bundler.acquire.download import ProgressCallback
from bundler.acquire.unpack import (
    _LOCAL_SIGNATURE,
    DEFLATE_MAX_RATIO,
    MAX_MEMBER_BYTES,
    WORKERS,
    Unpacking,
    _corrupt,
    _corruption_is_archive_error,
    _inflate_zip,
    _Member,
    _py7zr,
    _py7zr_errors,
    _unpack_sevenzip,
    _unsafe,
    _write_members,
)
from bundler.errors import ArchiveError, InputFileError

FORMATS = (".zip", ".whl", ".7z")
MARKER = ".complete"
LICENCE_WORDS = ("license", "licence", "eula", "notice")

_SEVENZIP_MAGIC = b"7z\xbc\xaf\x27\x1c"
_MAGIC = {_LOCAL_SIGNATURE: ".zip", b"PK\x05\x06": ".zip", _SEVENZIP_MAGIC: ".7z"}
_DRIVE = re.compile(r"[A-Za-z]:")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REPARSE_POINT = 0x400  # stat.FILE_ATTRIBUTE_REPARSE_POINT, which typeshed has on Windows only


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
        _write_members(unpacking, workers, progress)
        finished = iter([_finish(job) for job in jobs])
    return [found if found is not None else next(finished) for found in results]


@dataclass(frozen=True)
class _Job:
    """An archive being extracted: its checked members and the temp tree they go to."""

    archive: Path
    target: Path  # <extract_root>/<sha256>
    tree: Path  # the temp folder beside target, renamed to it when complete
    members: list[_Member]
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
    sevenzip = _format_of(archive) == ".7z"
    entries = _sevenzip_entries(archive) if sevenzip else _zip_entries(archive)
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


def unpack_all(archive: Path, tree: Path, workers: int = 4) -> tuple[str, ...]:
    """Every file of `archive` into the existing folder `tree`, with extract()'s safety checks
    (no absolute, "..", link or size-lying member) but no selection: `bundle audit` judges an
    archive exactly as shipped, odd files included. Returns the members' tree paths, sorted."""
    sevenzip = _format_of(archive) == ".7z"
    members = _sevenzip_entries(archive) if sevenzip else _zip_entries(archive)
    try:
        if sevenzip:
            _unpack_sevenzip(archive, members, tree)
        else:
            _inflate_zip(archive, members, tree, workers)
    except OSError as exc:  # e.g. a member that is also another member's folder
        raise _corrupt(archive, None, exc) from None
    return tuple(sorted(member.path for member in members))


def _basename(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1].lower()


def _cache_key(sha256: str) -> str:
    """The tree's folder name; validated because it is joined to a path."""
    key = sha256.lower()
    if not _SHA256.fullmatch(key):
        raise ValueError(f"sha256 must be 64 hexadecimal digits, not {sha256!r}")
    return key


def _format_of(archive: Path) -> str:
    """The suffix decides; a path without one (a content-addressed blob, blobs/sha256/<hash>)
    is recognised by its first bytes instead."""
    suffix = archive.suffix.lower()
    if suffix in FORMATS:
        return suffix
    if not suffix:
        with archive.open("rb") as handle:
            start = handle.read(len(_SEVENZIP_MAGIC))
        for magic, sniffed in _MAGIC.items():
            if start.startswith(magic):
                return sniffed
    shown = archive.suffix or "no suffix, and not zip or 7z bytes"
    raise ArchiveError(
        f"{archive}: unsupported archive format ({shown}); "
        f"bundle extracts {', '.join(FORMATS)} archives."
    )


# --- validation: every entry, before anything is written -------------------------------------


def _path_problem(name: str) -> str | None:
    """Why a member name could land outside the tree (on Linux or on Windows), or None."""
    posix = name.replace("\\", "/")
    if posix.startswith("/"):
        return "absolute path"
    if _DRIVE.match(posix):
        return "Windows drive path"
    if ":" in posix:
        return "':' in its name, an NTFS stream or drive on Windows"
    if ".." in posix.split("/"):
        return "'..' in its path"
    return None


def _tree_path(name: str) -> str:
    return "/".join(part for part in name.replace("\\", "/").split("/") if part not in ("", "."))


def _zip_size_problem(info: zipfile.ZipInfo) -> str | None:
    """A declared size no honest archive has: refused up front, before it can fill a disk."""
    if info.file_size > MAX_MEMBER_BYTES:
        return f"declares {info.file_size} bytes, more than {MAX_MEMBER_BYTES}"
    if info.compress_type == zipfile.ZIP_STORED and info.file_size > info.compress_size:
        return f"stored, declares {info.file_size} bytes but holds {info.compress_size}"
    if (
        info.compress_type == zipfile.ZIP_DEFLATED
        and info.file_size > info.compress_size * DEFLATE_MAX_RATIO
    ):
        return (
            f"declares {info.file_size} bytes from {info.compress_size} deflated bytes, "
            "more than deflate can produce"
        )
    return None


def _zip_entries(archive: Path) -> list[_Member]:
    """All file entries of a zip or wheel; raises on the first unsafe one."""
    with _corruption_is_archive_error(archive), zipfile.ZipFile(archive) as handle:
        infos = handle.infolist()
    for info in infos:
        problem = _path_problem(info.filename)
        if problem is None and stat.S_ISLNK(info.external_attr >> 16):
            problem = "symbolic link"
        problem = problem or _zip_size_problem(info)
        if problem is not None:
            raise _unsafe(archive, info.filename, problem)
    return [
        _Member(info.filename, _tree_path(info.filename), info.file_size, info)
        for info in infos
        if not info.is_dir()
    ]


def _sevenzip_entries(archive: Path) -> list[_Member]:
    """All file entries of a 7z; raises on the first unsafe one. py7zr already turned
    backslashes into slashes; its FileInfo refuses an entry that is both a folder and a link
    with ValueError, which is a damaged (or hostile) header like any other.

    A link is recorded two ways: p7zip and py7zr put S_IFLNK in the unix extension (the
    attribute word's high half), 7-Zip for Windows sets FILE_ATTRIBUTE_REPARSE_POINT. py7zr's
    is_symlink sees either, but trusts a unix extension that says "regular file" over the
    reparse bit, which 7-Zip for Windows would restore as a link: the bit alone refuses."""
    with (
        _corruption_is_archive_error(archive, also=(ValueError, *_py7zr_errors())),
        _py7zr().SevenZipFile(archive, mode="r") as handle,
    ):
        infos = handle.list()
        reparse = {
            member.filename
            for member in handle.files
            if (member.file_properties().get("attributes") or 0) & _REPARSE_POINT
        }
    for info in infos:
        problem = _path_problem(info.filename)
        if problem is None and info.is_symlink:
            problem = "symbolic link"
        if problem is None and info.filename in reparse:
            problem = "reparse point: a symbolic link or junction on Windows"
        if problem is None and not (info.is_file or info.is_directory):
            problem = "special file: junction, socket or device"
        if problem is None and info.uncompressed > MAX_MEMBER_BYTES:
            problem = f"declares {info.uncompressed} bytes, more than {MAX_MEMBER_BYTES}"
        if problem is not None:
            raise _unsafe(archive, info.filename, problem)
    return [
        _Member(info.filename, _tree_path(info.filename), info.uncompressed)
        for info in infos
        if not info.is_directory
    ]


def _select(archive: Path, entries: list[_Member], selection: Selection) -> list[_Member]:
    """The wanted entries, refusing two that would be the same file on Windows (where the
    tree is deployed, names are case-insensitive) or a file that is also another's folder."""
    wanted = [entry for entry in entries if selection.wants(entry.name)]
    seen: dict[str, str] = {}
    for member in wanted:
        if not member.path:
            raise _unsafe(archive, member.name, "empty path")
        key = member.path.lower()
        if key in seen:
            raise _unsafe(archive, member.name, f"same file as {seen[key]!r} on Windows")
        seen[key] = member.name
    folders = {str(parent).lower() for m in wanted for parent in PurePosixPath(m.path).parents}
    for member in wanted:
        if member.path.lower() in folders:
            raise _unsafe(archive, member.name, "both a file and a folder")
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
