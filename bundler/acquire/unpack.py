"""Act layer: writing the members of one archive to disk, each checked as it is written: never
more bytes than its header declares, then exact size and CRC (zip, inflated with ISA-L where it
is installed, else zlib), or py7zr's own pass over a 7z; member times kept. `write_members`
writes what extract() selected; `unpack_all` every member, for the audit."""

from __future__ import annotations

import calendar
import collections
import os
import struct
import threading
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from bundler.acquire.archive_entries import (
    LOCAL_SIGNATURE,
    Member,
    archive_format,
    corrupt_archive,
    corruption_is_archive_error,
    deflate,
    py7zr_errors,
    py7zr_module,
    sevenzip_entries,
    unsafe_member,
    zip_entries,
)
from bundler.errors import ArchiveError
from bundler.progress_meter import ProgressCallback, ProgressMeter

FILE_MODE = 0o644

CHUNK = 1 << 20  # bytes per read and per inflate call: bounds memory whatever the member size

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # zip local file header (APPNOTE 4.3.7), 30 bytes

# One pool for all archives of a command: inflating is CPU-bound and releases the GIL, so one
# thread per core keeps every core busy; more only adds switching.
WORKERS = max(2, min(8, os.cpu_count() or 2))


@dataclass(frozen=True)
class Unpacking:
    """One archive's checked members and the tree they are written to."""

    archive: Path
    tree: Path
    members: list[Member]
    sevenzip: bool


def _unpack_sevenzip(archive: Path, members: list[Member], tree: Path) -> None:
    """One py7zr pass: a solid 7z block must be decompressed in order anyway. py7zr applies
    the archive's modes, so every file is reset to FILE_MODE afterwards."""
    if members:
        py7zr = py7zr_module()
        with (
            corruption_is_archive_error(archive, also=py7zr_errors()),
            py7zr.SevenZipFile(archive, mode="r") as handle,
        ):
            handle.extract(path=tree, targets=[member.name for member in members])
    for member in members:
        written = tree / member.path
        if written.is_symlink() or not written.is_file():
            raise corrupt_archive(archive, member.name, "py7zr did not extract it")
        if written.stat().st_size != member.size:
            raise corrupt_archive(
                archive, member.name, f"size differs from the declared {member.size}"
            )
        os.chmod(written, FILE_MODE)


def _inflate_zip(archive: Path, members: list[Member], tree: Path, workers: int) -> None:
    """Inflate one zip's members into `tree` on `workers` threads, largest first."""
    write_members([Unpacking(archive, tree, members, sevenzip=False)], workers, None)


def write_members(
    jobs: Sequence[Unpacking], workers: int, progress: ProgressCallback | None
) -> None:
    """Every member of every job on one pool, largest first (a 7z is one task: py7zr unpacks it
    in one pass). Each thread opens each archive itself, so seeks never interleave. After one
    failure the others stop at their next task, and the first error is raised."""
    tasks = [(job, member) for job in jobs if not job.sevenzip for member in job.members]
    tasks.sort(key=lambda task: task[1].size, reverse=True)
    whole = [job for job in jobs if job.sevenzip]
    total = sum(member.size for job in jobs for member in job.members)
    pending: collections.deque[Unpacking | tuple[Unpacking, Member]] = collections.deque(
        [*whole, *tasks]
    )
    failed = threading.Event()
    meter = ProgressMeter(total, progress)

    def drain() -> None:
        with ExitStack() as handles:
            opened: dict[Path, BinaryIO] = {}
            while not failed.is_set():
                try:
                    task = pending.popleft()
                except IndexError:
                    return
                try:
                    if isinstance(task, Unpacking):
                        _unpack_sevenzip(task.archive, task.members, task.tree)
                        meter.add(sum(member.size for member in task.members))
                        continue
                    owner, member = task
                    if owner.archive not in opened:
                        opened[owner.archive] = handles.enter_context(owner.archive.open("rb"))
                    _inflate_member(owner.archive, opened[owner.archive], member, owner.tree, meter)
                except BaseException:
                    failed.set()
                    raise

    count = max(1, min(workers, len(pending)))
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="bundle-extract") as pool:
        futures = [pool.submit(drain) for _ in range(count)]
        try:
            wait(futures)
        except BaseException:  # Ctrl-C: the threads stop after their current member
            failed.set()
            raise
    for future in futures:
        future.result()


def _inflate_member(
    archive: Path, source: BinaryIO, member: Member, tree: Path, meter: ProgressMeter
) -> None:
    """Stream one member to disk, checking the bytes against the central directory: never
    more than the declared size (stopped at the first extra byte), then exact size and CRC."""
    info = member.info
    assert info is not None
    _check_supported(archive, member, info)
    written_path = tree / member.path
    written_path.parent.mkdir(parents=True, exist_ok=True)
    written, crc = 0, 0
    with (
        corruption_is_archive_error(archive, member.name),
        written_path.open("xb") as sink,
    ):
        for chunk in _inflate(source, info):
            written += len(chunk)
            if written > info.file_size:
                raise unsafe_member(
                    archive,
                    member.name,
                    f"inflates to more than the {info.file_size} bytes its header declares: "
                    "a zip bomb or a lying header",
                )
            crc = deflate.crc32(chunk, crc)
            sink.write(chunk)
            meter.add(len(chunk))
    if written != info.file_size:
        raise corrupt_archive(
            archive, member.name, f"{written} bytes, header declares {info.file_size}"
        )
    if crc != info.CRC:
        raise corrupt_archive(archive, member.name, "CRC-32 mismatch")
    os.chmod(written_path, FILE_MODE)
    _keep_member_time(written_path, info)


def _keep_member_time(path: Path, info: zipfile.ZipInfo) -> None:
    """The member's time from the archive (read as UTC, whatever the zone here), so that two
    extractions of one archive give the same times, and the lock file that records them is
    the same on every machine. A member without a valid time keeps the extraction time."""
    try:
        stamp = calendar.timegm((*info.date_time, 0, 0, 0))
        os.utime(path, (stamp, stamp))
    except (ValueError, OverflowError, OSError):
        pass


def _check_supported(archive: Path, member: Member, info: zipfile.ZipInfo) -> None:
    if info.flag_bits & 0x1:
        raise ArchiveError(f"{archive}: member {member.name!r} is encrypted; bundle cannot use it.")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ArchiveError(
            f"{archive}: member {member.name!r} uses zip compression method "
            f"{info.compress_type}; bundle extracts stored and deflated members only."
        )


def _inflate(source: BinaryIO, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's bytes, inflated in chunks of at most CHUNK: a 1 MiB deflated block of a
    zip bomb can hold 1 GiB, so output is bounded per call, not per input block."""
    source.seek(_data_offset(source, info))
    inflater = deflate.decompressobj(-zlib.MAX_WBITS)
    deflated = info.compress_type == zipfile.ZIP_DEFLATED
    left = info.compress_size
    while left > 0:
        block = source.read(min(CHUNK, left))
        if not block:
            raise EOFError("the archive ends inside this member")
        left -= len(block)
        if deflated:
            yield from _drain(inflater, block)
        else:
            yield block
    if deflated and not inflater.eof:
        raise zlib.error("the deflate stream ends early")


class _Inflater(Protocol):
    """What zlib's and ISA-L's decompress objects share, as _drain uses it."""

    @property
    def unconsumed_tail(self) -> bytes: ...

    @property
    def eof(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


def _drain(inflater: _Inflater, data: bytes) -> Iterator[bytes]:
    """Everything one input block inflates to, CHUNK bytes at a time. A full chunk may leave
    output pending inside zlib even with no input left, hence the extra empty calls."""
    while True:
        out = inflater.decompress(data, CHUNK)
        if out:
            yield out
        data = inflater.unconsumed_tail
        if not data and len(out) < CHUNK:
            return


def _data_offset(source: BinaryIO, info: zipfile.ZipInfo) -> int:
    """Where the member's data starts: after its local header, whose name and extra field
    lengths may differ from the central directory's."""
    source.seek(info.header_offset)
    header = source.read(_LOCAL_HEADER.size)
    if len(header) < _LOCAL_HEADER.size:
        raise zipfile.BadZipFile("truncated local file header")
    fields = _LOCAL_HEADER.unpack(header)
    if fields[0] != LOCAL_SIGNATURE:
        raise zipfile.BadZipFile("bad local file header signature")
    name_length, extra_length = fields[-2], fields[-1]
    return int(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)


def unpack_all(archive: Path, tree: Path, workers: int = 4) -> tuple[str, ...]:
    """Every file of `archive` into the existing folder `tree`, with extract()'s safety checks
    (no absolute, "..", link or size-lying member) but no selection: `bundle audit` judges an
    archive exactly as shipped, odd files included. Returns the members' tree paths, sorted."""
    sevenzip = archive_format(archive) == ".7z"
    members = sevenzip_entries(archive) if sevenzip else zip_entries(archive)
    try:
        if sevenzip:
            _unpack_sevenzip(archive, members, tree)
        else:
            _inflate_zip(archive, members, tree, workers)
    except OSError as exc:  # e.g. a member that is also another member's folder
        raise corrupt_archive(archive, None, exc) from None
    return tuple(sorted(member.path for member in members))
