"""Act layer: pack a built bundle's payload into a portable, reproducible .zip or .7z.

The payload is what the lock file says ships (`Lock.payload()`): nothing else lying in the
bundle folder (an installer script, an earlier archive, the archive being written) gets in.
Members sit under one top folder named after the archive (`hello-1.2.0.zip` holds
`hello-1.2.0/hello.exe`, ...), in sorted order.

Reproducible: the same payload gives the same bytes on every run, whatever the files' times,
owners and modes on disk. Every member gets a fixed time (1980-01-01 00:00:00, the earliest a
zip can hold; the same instant in UTC for 7z) and mode 0o644, and nothing else that varies (no
owner, no extended times, no extra fields); the compression settings are fixed. The bytes are
the same wherever the same deflate (zlib) / LZMA (liblzma) implementation runs; another
implementation of the same format (zlib-ng) may encode the same input differently.

Safe to interrupt: the archive is written under a temporary name beside the target, read back
(bundler.ship.readback) and checked member by member against the lock's SHA-256 (or the hash
taken while packing, for files the lock holds no hash for), and only then renamed into place.
Files are streamed in CHUNK-sized pieces, so memory does not grow with the size of a DLL.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import zipfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, BinaryIO

from bundler.closure.lock import LOCK_NAME, Lock, is_inside
from bundler.disk import files
from bundler.disk.digest import file_sha256
from bundler.errors import (
    ArchiveError,
    ConfigError,
    InputFileError,
    OutputError,
    PlanFormatError,
)
from bundler.progress_meter import ProgressCallback
from bundler.ship import sevenzip
from bundler.ship.deploy import TEMP_SUFFIX
from bundler.ship.readback import CHUNK, verify_archive

FORMATS = (".zip", ".7z")
FILE_MODE = 0o644
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the DOS epoch: the earliest time a zip entry can carry
# The same instant for 7z, as a FILETIME: 100 ns ticks since 1601-01-01 UTC.
SEVENZIP_TIME = (315_532_800 + 11_644_473_600) * 10_000_000
_UNIX_FILE = stat.S_IFREG | FILE_MODE
# 7z attributes as 7-Zip itself writes them for a regular file: FILE_ATTRIBUTE_ARCHIVE, plus
# the "unix extension" flag (0x8000) with the st_mode in the high 16 bits.
_SEVENZIP_ATTRIBUTES = 0x20 | 0x8000 | (_UNIX_FILE << 16)


@dataclass(frozen=True)
class ArchiveResult:
    """The archive written: what the CLI reports and a release pipeline publishes."""

    path: Path
    members: int
    total_bytes: int  # uncompressed: the sum of the payload files' sizes
    archive_size: int  # bytes of the archive file
    sha256: str  # of the archive file


@dataclass(frozen=True)
class _Entry:
    """One payload file and its name in the archive."""

    member: str  # <archive stem>/<payload name>, posix
    source: Path
    size: int
    sha256: str | None  # the lock's hash; None where the lock holds none


# Writes the entries into the open temp file; returns (member, SHA-256) in archive order.
_Packer = Callable[[IO[bytes], Sequence[_Entry], Callable[[_Entry], None]], list[tuple[str, str]]]


def write_archive(
    folder: Path, lock: Lock, target: Path, progress: ProgressCallback | None = None
) -> ArchiveResult:
    """Pack the payload of the bundle in `folder`, as `lock` describes it, into `target`.

    `target` ends in .zip or .7z (ConfigError otherwise, before any work). Every payload file
    must exist (InputFileError). A file whose bytes differ from the lock's SHA-256, or a member
    that does not read back as packed, raises ArchiveError. Whatever fails (Ctrl-C included),
    no temporary file is left and the target is untouched; an existing target is replaced
    only by a verified archive. `progress` hears (bytes packed, bytes to pack) after each file.
    """
    kind = archive_format(target)
    entries = _entries(folder, lock, target)
    total = sum(entry.size for entry in entries)
    done = 0

    def packed(entry: _Entry) -> None:
        nonlocal done
        done += entry.size
        if progress is not None:
            progress(done, total)

    temp = target.with_name(f".{target.name}{TEMP_SUFFIX}")
    try:
        size, digest = _write_verified(temp, target, kind, entries, packed)
    except BaseException as exc:
        with suppress(OSError):  # e.g. the folder is a file: there is no temp file then
            temp.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # unreadable sources were InputFileErrors already
            raise OutputError(
                f"{target}: cannot write the archive: {exc.strerror or exc}; "
                "choose a writable place with enough free space for it."
            ) from exc
        raise
    return ArchiveResult(target, len(entries), total, size, digest)


def _write_verified(
    temp: Path, target: Path, kind: str, entries: Sequence[_Entry], packed: Callable[[_Entry], None]
) -> tuple[int, str]:
    """Pack into `temp`, read it back, and only then rename it to `target`: (size, SHA-256)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with temp.open("w+b") as raw:
        hashes = _PACKERS[kind](raw, entries, packed)
        raw.flush()
        os.fsync(raw.fileno())  # on disk before the rename makes it the archive
    verify_archive(temp, hashes, kind)
    size, digest = temp.stat().st_size, file_sha256(temp)
    files.replace(temp, target)
    return size, digest


def archive_format(target: Path) -> str:
    """The format `target` names by its suffix, .zip or .7z in any case (Windows users type
    .ZIP); the build calls this first, so a wrong name fails before minutes of work."""
    kind = target.suffix.lower()
    if kind not in FORMATS:
        raise ConfigError(
            f"{target}: unsupported archive type {target.suffix or '(no suffix)'!r}; "
            f"name the archive PATH.zip or PATH.7z."
        )
    return kind


# --- what to pack: the lock's payload, checked before any work ---------------------------------


def _entries(folder: Path, lock: Lock, target: Path) -> list[_Entry]:
    """The payload as archive entries, sorted by name. Every file must be there now: a
    missing one is found before minutes of compression, not after."""
    stem = target.name[: -len(target.suffix)]
    entries = []
    for item in lock.payload():
        _check_name(folder, item.name)
        source = folder / item.name
        if not source.is_file():
            raise InputFileError(
                f"{source}: listed in {LOCK_NAME} but missing from the bundle folder; "
                "rebuild the bundle (bundle build) before packing it."
            )
        if source.resolve() == target.resolve():
            raise ConfigError(
                f"{target}: is a file of the bundle itself; put the archive elsewhere."
            )
        entries.append(_Entry(f"{stem}/{item.name}", source, source.stat().st_size, item.sha256))
    return entries


def _check_name(folder: Path, name: str) -> None:
    """A payload name must stay inside the bundle folder: a hand-edited lock must not smuggle
    a file from elsewhere into the archive, nor a '..' member that escapes on extraction."""
    if not is_inside(name):
        raise PlanFormatError(
            f"{folder / LOCK_NAME}: file name {name!r} is not a path inside the bundle folder; "
            "rebuild the bundle to regenerate the lock file."
        )


# --- packing: one pass over each file, hashing what is packed ----------------------------------


class _HashingReader(io.BufferedIOBase):
    """A source file that hashes the bytes it hands out, so each file is read once for both
    packing and hashing (the zip writer; the 7z writer hashes what it reads itself)."""

    def __init__(self, handle: BinaryIO) -> None:
        super().__init__()
        self._handle = handle
        self._digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1, /) -> bytes:
        chunk = self._handle.read(-1 if size is None else size)
        self._digest.update(chunk)
        return chunk

    def seek(self, offset: int, whence: int = os.SEEK_SET, /) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def _open_source(entry: _Entry) -> BinaryIO:
    try:
        return entry.source.open("rb")
    except OSError as exc:
        raise InputFileError(
            f"{entry.source}: cannot read it ({exc.strerror}); check its permissions."
        ) from exc


def _checked_hash(entry: _Entry, digest: str) -> tuple[str, str]:
    """What the member must read back as: the lock's hash, or for a file the lock holds no
    hash for, the hash of what was packed. A file that changed since the build (or a lock
    edited by hand) is stopped here, before the rest is compressed for nothing; the read-back
    check would stop it too."""
    if entry.sha256 is None:
        return entry.member, digest
    if digest != entry.sha256.lower():
        raise ArchiveError(
            f"{entry.source}: SHA-256 {digest} differs from {entry.sha256} in {LOCK_NAME} "
            f"(member {entry.member!r}); nothing was archived. Rebuild the bundle."
        )
    return entry.member, entry.sha256.lower()


def _pack_zip(
    raw: IO[bytes], entries: Sequence[_Entry], packed: Callable[[_Entry], None]
) -> list[tuple[str, str]]:
    """Deflate every entry. Zip64 records appear only where sizes need them, decided from
    the sizes alone, so they are as reproducible as the rest."""
    hashes = []
    with zipfile.ZipFile(raw, "w", allowZip64=True) as archive:
        for entry in entries:
            with _open_source(entry) as handle, archive.open(_zip_info(entry), "w") as sink:
                reader = _HashingReader(handle)
                _copy(reader, sink)
            hashes.append(_checked_hash(entry, reader.hexdigest()))
            packed(entry)
    return hashes


def _zip_info(entry: _Entry) -> zipfile.ZipInfo:
    """Everything fixed but name and size: time, Unix as the creating system (the default
    depends on the packing OS), mode 0o644, no extra fields. zlib's default level (6) applies,
    as ZipFile.open offers no public level setting before Python 3.13."""
    info = zipfile.ZipInfo(entry.member, date_time=ZIP_TIME)
    info.create_system = 3
    info.external_attr = _UNIX_FILE << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    info.file_size = entry.size  # lets zipfile decide up front whether zip64 is needed
    return info


def _copy(reader: _HashingReader, sink: IO[bytes]) -> None:
    while chunk := reader.read(CHUNK):
        sink.write(chunk)


def _pack_sevenzip(
    raw: IO[bytes], entries: Sequence[_Entry], packed: Callable[[_Entry], None]
) -> list[tuple[str, str]]:
    """One solid BCJ + LZMA2 folder, compressed on every core (bundler/ship/sevenzip.py); each
    member's hash is checked against the lock as soon as it has been read, so a changed file
    stops the run before the rest is compressed for nothing."""
    members = [
        sevenzip.Member(entry.member, partial(_open_source, entry), entry.size) for entry in entries
    ]
    hashes = []

    def read(index: int, item: sevenzip.Packed) -> None:
        hashes.append(_checked_hash(entries[index], item.sha256))
        packed(entries[index])

    sevenzip.write_7z(raw, members, SEVENZIP_TIME, _SEVENZIP_ATTRIBUTES, read)
    return hashes


_PACKERS: dict[str, _Packer] = {".zip": _pack_zip, ".7z": _pack_sevenzip}
