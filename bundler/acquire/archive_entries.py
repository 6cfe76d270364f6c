"""Read layer: the entries of a zip, wheel or 7z archive, every one checked before anything is
written: no absolute path, drive letter, NTFS stream or "..", no symbolic link, reparse point
or special file, no declared size no honest archive has. One unsafe entry refuses the whole
archive. The format comes from the suffix, or for a suffix-less cache blob from its first
bytes. Also what a damaged archive means (one actionable ArchiveError, whoever reads it) and
the inflate library in use (ISA-L's where it is installed, else zlib)."""

from __future__ import annotations

import lzma
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from bundler.errors import ArchiveError

deflate: ModuleType = zlib  # zlib's interface: decompressobj, crc32, error
try:  # ISA-L's inflate: ~2x zlib's speed on the pinned wheels (benchmarks/README.md, P4)
    from isal import isal_zlib

    deflate = isal_zlib
except ImportError:  # a platform without an isal wheel: zlib, the same checks
    pass

FORMATS = (".zip", ".whl", ".7z")

# No file in any release we pin comes near this (the largest DLLs are ~1 GiB, a PE image cannot
# exceed 4 GiB); a member declaring more is a lie or a bomb, and refused before any writing.
MAX_MEMBER_BYTES = 16 << 30

# Deflate cannot expand more than 1032:1 (a 258-byte match in 2 bits), so a deflated member
# declaring more than that is a lying header.
DEFLATE_MAX_RATIO = 1032

LOCAL_SIGNATURE = b"PK\x03\x04"
_SEVENZIP_MAGIC = b"7z\xbc\xaf\x27\x1c"
_MAGIC = {LOCAL_SIGNATURE: ".zip", b"PK\x05\x06": ".zip", _SEVENZIP_MAGIC: ".7z"}
_DRIVE = re.compile(r"[A-Za-z]:")
_REPARSE_POINT = 0x400  # stat.FILE_ATTRIBUTE_REPARSE_POINT, which typeshed has on Windows only


@dataclass(frozen=True)
class Member:
    """An archive entry: how the archive names it and where it goes in the tree."""

    name: str  # as the archive spells it: 7z targets and messages use it
    path: str  # relative posix path in the tree, backslashes turned to slashes, "." dropped
    size: int  # declared uncompressed size
    info: zipfile.ZipInfo | None = None  # zip entries only


_CORRUPT: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zlib.error,
    deflate.error,
    lzma.LZMAError,
    EOFError,
    UnicodeDecodeError,
)


def unsafe_member(archive: Path, member: str, reason: str) -> ArchiveError:
    return ArchiveError(
        f"{archive}: unsafe member {member!r} ({reason}); nothing was extracted. "
        "Delete the archive from the cache and check where it came from."
    )


def corrupt_archive(archive: Path, member: str | None, detail: object) -> ArchiveError:
    if type(detail).__name__ == "CrcError" and isinstance(detail, Exception):
        # py7zr's CrcError carries (expected, actual, member name) and no words
        member = str(detail.args[-1]) if detail.args else member
        detail = "CRC-32 mismatch: the bytes are damaged"
    where = f" (member {member!r})" if member is not None else ""
    line = " ".join(str(detail).split()) or type(detail).__name__
    return ArchiveError(
        f"{archive}: corrupt archive{where}: {line}; "
        "delete it from the cache and download it again."
    )


@contextmanager
def corruption_is_archive_error(
    archive: Path, member: str | None = None, also: tuple[type[Exception], ...] = ()
) -> Iterator[None]:
    """Turn what zipfile, zlib and py7zr raise on damaged bytes into one actionable error."""
    try:
        yield
    except (*_CORRUPT, *also) as exc:
        raise corrupt_archive(archive, member, exc) from exc


def py7zr_module() -> Any:
    import py7zr  # ~50 ms: only for a .7z

    return py7zr


def py7zr_errors() -> tuple[type[Exception], ...]:
    import py7zr.exceptions

    return (py7zr.exceptions.ArchiveError,)


def archive_format(archive: Path) -> str:
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


def zip_entries(archive: Path) -> list[Member]:
    """All file entries of a zip or wheel; raises on the first unsafe one."""
    with corruption_is_archive_error(archive), zipfile.ZipFile(archive) as handle:
        infos = handle.infolist()
    for info in infos:
        problem = _path_problem(info.filename)
        if problem is None and stat.S_ISLNK(info.external_attr >> 16):
            problem = "symbolic link"
        problem = problem or _zip_size_problem(info)
        if problem is not None:
            raise unsafe_member(archive, info.filename, problem)
    return [
        Member(info.filename, _tree_path(info.filename), info.file_size, info)
        for info in infos
        if not info.is_dir()
    ]


def sevenzip_entries(archive: Path) -> list[Member]:
    """All file entries of a 7z; raises on the first unsafe one. py7zr already turned
    backslashes into slashes; its FileInfo refuses an entry that is both a folder and a link
    with ValueError, which is a damaged (or hostile) header like any other.

    A link is recorded two ways: p7zip and py7zr put S_IFLNK in the unix extension (the
    attribute word's high half), 7-Zip for Windows sets FILE_ATTRIBUTE_REPARSE_POINT. py7zr's
    is_symlink sees either, but trusts a unix extension that says "regular file" over the
    reparse bit, which 7-Zip for Windows would restore as a link: the bit alone refuses."""
    with (
        corruption_is_archive_error(archive, also=(ValueError, *py7zr_errors())),
        py7zr_module().SevenZipFile(archive, mode="r") as handle,
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
            raise unsafe_member(archive, info.filename, problem)
    return [
        Member(info.filename, _tree_path(info.filename), info.uncompressed)
        for info in infos
        if not info.is_directory
    ]
