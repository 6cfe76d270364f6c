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
and checked member by member against the lock's SHA-256 (or the hash taken while packing, for
files the lock holds no hash for), and only then renamed into place. Files are streamed in
CHUNK-sized pieces, so memory does not grow with the size of a DLL.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, BinaryIO

import py7zr
import py7zr.exceptions

from bundler import files
from bundler.digest import file_sha256
from bundler.errors import (
    ArchiveError,
    ConfigError,
    InputFileError,
    OutputError,
    PlanFormatError,
)
from bundler.lock import LOCK_NAME, Lock, is_inside
from bundler.progress_meter import ProgressCallback
from bundler.ship import sevenzip
from bundler.ship.deploy import TEMP_SUFFIX

FORMATS = (".zip", ".7z")
CHUNK = 1 << 20  # bytes per read: bounds memory whatever the file size
FILE_MODE = 0o644
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the DOS epoch: the earliest time a zip entry can carry
# The same instant for 7z, as a FILETIME: 100 ns ticks since 1601-01-01 UTC.
SEVENZIP_TIME = (315_532_800 + 11_644_473_600) * 10_000_000
_UNIX_FILE = stat.S_IFREG | FILE_MODE
_SIGNATURE_HEADER_SIZE = 32  # a 7z file starts with it; the packed streams follow
# 7z attributes as 7-Zip itself writes them for a regular file: FILE_ATTRIBUTE_ARCHIVE, plus
# the "unix extension" flag (0x8000) with the st_mode in the high 16 bits.
_SEVENZIP_ATTRIBUTES = 0x20 | 0x8000 | (_UNIX_FILE << 16)
# BCJ (x86 branch conversion, which also suits x64 code) then LZMA2 at preset 6, xz's default:
# an 8 MiB dictionary, about 94 MiB for the encoder. py7zr's own default (preset 7) doubles the
# dictionary and needs about 186 MiB, past the memory budget of a build agent's step.
_SEVENZIP_FILTERS = [{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2, "preset": 6}]
_UNREADABLE: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    UnicodeDecodeError,
    py7zr.exceptions.ArchiveError,
)


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


def verify_archive(archive: Path, expected: Sequence[tuple[str, str]], kind: str) -> None:
    """Read `archive` back: its members must be exactly `expected` (name, SHA-256), in order.

    Each member is hashed as it is decompressed, never held whole in memory. Raises
    ArchiveError naming the first member that is missing, extra, or has other bytes.
    """
    reader = _zip_member_hashes if kind == ".zip" else _sevenzip_member_hashes
    with _unreadable_is_archive_error(archive):
        found = reader(archive)
    _compare_names(archive, [name for name, _ in expected], [name for name, _ in found])
    for (name, want), (_, got) in zip(expected, found, strict=True):
        if got != want:
            raise ArchiveError(
                f"{archive}: member {name!r} reads back with SHA-256 {got}, not {want}; "
                "the archive is damaged (a disk or memory fault?): check the disk, pack again."
            )


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


# --- reading back -------------------------------------------------------------------------------


@contextmanager
def _unreadable_is_archive_error(archive: Path) -> Iterator[None]:
    try:
        yield
    except _UNREADABLE as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ArchiveError(
            f"{archive}: the archive cannot be read back ({detail}); "
            "it is damaged (a disk fault?): check the disk, pack again."
        ) from exc


def _compare_names(archive: Path, expected: list[str], found: list[str]) -> None:
    if found == expected:
        return
    missing = [name for name in expected if name not in found]
    extra = [name for name in found if name not in expected]
    what = (
        f"member {missing[0]!r} is missing"
        if missing
        else f"member {extra[0]!r} is not in the payload"
        if extra
        else "members are out of order"
    )
    raise ArchiveError(f"{archive}: {what}; the archive does not match the bundle: pack again.")


def _zip_member_hashes(archive: Path) -> list[tuple[str, str]]:
    """zipfile checks each member's CRC-32 when it reaches its end."""
    hashes = []
    with zipfile.ZipFile(archive) as handle:
        for info in handle.infolist():
            with handle.open(info) as member:
                digest = hashlib.sha256()
                while chunk := member.read(CHUNK):
                    digest.update(chunk)
            hashes.append((info.filename, digest.hexdigest()))
    return hashes


def _sevenzip_member_hashes(archive: Path) -> list[tuple[str, str]]:
    """Names, sizes and CRC-32s from the header (py7zr reads it); the bytes from our own
    bounded decoding of the one packed stream, split at the header's sizes.

    Not py7zr's extraction: it inflates up to 128 MB per call, several hundred MB of peak
    memory on a well-compressible DLL. The decoding assumes the layout _pack_sevenzip writes
    (one solid BCJ + LZMA2 block right after the signature header); if that ever differs, the
    decoded bytes cannot match the header's CRC-32s, so a wrong assumption fails loudly and
    never passes a damaged archive.
    """
    with py7zr.SevenZipFile(archive, mode="r") as handle:
        layout = handle.archiveinfo()
        members = [(info.filename, info.uncompressed, info.crc32) for info in handle.list()]
    if layout.blocks != 1 or sorted(layout.method_names) != ["BCJ", "LZMA2"]:
        raise py7zr.exceptions.Bad7zFile(
            f"{layout.blocks} block(s) of {'+'.join(layout.method_names)}, "
            "not the one BCJ + LZMA2 block bundle writes"
        )
    with archive.open("rb") as raw:
        raw.seek(_SIGNATURE_HEADER_SIZE)
        stream = _MemberStream(_decoded(raw))
        hashes = [(name, stream.take(name, size, crc)) for name, size, crc in members]
        stream.finish()
    return hashes


def _decoded(raw: BinaryIO) -> Iterator[bytes]:
    """The packed stream decoded, at most CHUNK bytes at a time, up to its end marker."""
    decoder = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=_SEVENZIP_FILTERS)
    while not decoder.eof:
        block = raw.read(CHUNK) if decoder.needs_input else b""
        if decoder.needs_input and not block:
            raise EOFError("the archive ends inside its packed stream")
        out = decoder.decompress(block, CHUNK)
        if out:
            yield out


class _MemberStream:
    """Cuts the decoded stream into members by their sizes, hashing each piece."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = memoryview(b"")

    def take(self, name: str, size: int, crc: int | None) -> str:
        digest, crc_found, left = hashlib.sha256(), 0, size
        while left:
            if not self._pending:
                chunk = next(self._chunks, b"")
                if not chunk:
                    raise EOFError(f"the packed stream ends inside {name!r}")
                self._pending = memoryview(chunk)
            piece, self._pending = self._pending[:left], self._pending[left:]
            digest.update(piece)
            crc_found = zlib.crc32(piece, crc_found)
            left -= len(piece)
        if crc is not None and crc_found != crc:
            raise py7zr.exceptions.Bad7zFile(
                f"member {name!r} has CRC-32 {crc_found:08x}, its header entry {crc:08x}"
            )
        return digest.hexdigest()

    def finish(self) -> None:
        rest = next(self._chunks, b"")
        if self._pending or rest:
            raise py7zr.exceptions.Bad7zFile("the packed stream holds more than its members")
