"""Read layer: a written .zip or .7z read back, member by member, against what was packed.

bundler.ship.archive writes under a temporary name and renames only what this module has read
back: every member hashed as it is decompressed (never held whole in memory), the names exactly
the payload's, in order. Any difference, and anything the readers refuse (a CRC-32 that does
not match, a stream cut short), is an ArchiveError naming the archive and the member.
"""

from __future__ import annotations

import hashlib
import lzma
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import py7zr
import py7zr.exceptions

from bundler.errors import ArchiveError

CHUNK = 1 << 20  # bytes per read: bounds memory whatever the file size
_SIGNATURE_HEADER_SIZE = 32  # a 7z file starts with it; the packed streams follow
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
    memory on a well-compressible DLL. The decoding assumes the layout bundler.ship.archive
    writes (one solid BCJ + LZMA2 block right after the signature header); if that ever
    differs, the decoded bytes cannot match the header's CRC-32s, so a wrong assumption fails
    loudly and never passes a damaged archive.
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
