"""Act layer: the .7z writer: one solid BCJ + LZMA2 folder, compressed on every core.

The members, one after another, are one stream. It is cut into blocks of about BLOCK bytes,
each compressed on its own by a thread (the lzma module releases the GIL) with liblzma's raw
x86 branch filter, started at the block's offset in the stream, and LZMA2. LZMA2 lets a stream
reset its dictionary at any chunk, so the blocks' outputs, each but the last without its end
marker, concatenated, are one valid LZMA2 stream: any 7z reader decodes the folder as if one
encoder had written it. The branch filter carries state across a cut only near an E8/E9 byte
(x86 CALL/JMP), so a block ends only where the CUT_GAP bytes before the cut hold neither; then
the filter run on the whole stream and the filters run block by block give the same bytes.

The header (7-Zip's 7zFormat.txt) holds what bundle's archives hold: one pack stream, one
folder of two coders, each member's size and CRC-32, and its name, fixed time and attributes.
Peak memory is about THREADS x (94 MiB for the encoder + 2 x BLOCK).
"""

from __future__ import annotations

import hashlib
import lzma
import os
import struct
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, BinaryIO

BLOCK = 32 << 20  # uncompressed bytes per block: 4 dictionaries, so the ratio barely drops
CUT_GAP = 8  # bytes before a cut that must hold no E8/E9 (the x86 filter looks 5 back)
THREADS = max(1, min(os.cpu_count() or 1, 4))
PRESET = 6  # xz's default: an 8 MiB dictionary (docs: ship/archive.py)
SIGNATURE = b"7z\xbc\xaf\x27\x1c\x00\x04"
SIGNATURE_HEADER_SIZE = 32
_BCJ_ID = b"\x03\x03\x01\x03"
_LZMA2_ID = b"\x21"
_LZMA2_DICT_8_MIB = b"\x16"  # 2 << (22 / 2 + 11) = 8 MiB
(_END, _HEADER, _PACK_INFO, _UNPACK_INFO, _SUBSTREAMS, _SIZE, _CRC, _FOLDER) = (
    0x00, 0x01, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B
)  # fmt: skip
(_MAIN_STREAMS, _FILES_INFO, _UNPACK_SIZE, _NUM_STREAMS, _EMPTY_STREAM, _EMPTY_FILE) = (
    0x04, 0x05, 0x0C, 0x0D, 0x0E, 0x0F
)  # fmt: skip
(_NAME, _MTIME, _ATTRIBUTES) = (0x11, 0x14, 0x15)


@dataclass(frozen=True)
class Member:
    """One file to pack: its name in the archive, how to open it, its size."""

    name: str
    open: Callable[[], BinaryIO]
    size: int


@dataclass(frozen=True)
class Packed:
    """What was packed of a member: its SHA-256 and CRC-32 as read."""

    name: str
    sha256: str
    crc32: int


def write_7z(
    raw: IO[bytes],
    members: Sequence[Member],
    mtime: int,
    attributes: int,
    done: Callable[[int, Packed], None],
) -> list[Packed]:
    """Write the archive into `raw` (empty, seekable); `done(i, packed)` once member i has been
    read (an exception it raises stops the run)."""
    raw.write(b"\0" * SIGNATURE_HEADER_SIZE)
    packed: list[Packed] = []
    blocks = _blocks(members, packed, done)
    pack_size = _compress(blocks, raw)
    header = _header(members, packed, pack_size, mtime, attributes)
    raw.write(header)
    raw.seek(0)
    raw.write(_signature_header(pack_size, header))
    raw.seek(0, os.SEEK_END)
    return packed


def _blocks(
    members: Sequence[Member], packed: list[Packed], done: Callable[[int, Packed], None]
) -> Iterator[tuple[int, bytes]]:
    """(offset in the stream, bytes) of each block, cut where the x86 filter keeps no state."""
    pending, offset = bytearray(), 0
    for index, member in enumerate(members):
        digest, crc = hashlib.sha256(), 0
        with member.open() as source:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
                crc = zlib.crc32(chunk, crc)
                pending += chunk
                while len(pending) >= BLOCK + CUT_GAP and (cut := _cut(pending, BLOCK)):
                    block = bytes(pending[:cut])
                    del pending[:cut]  # before the yield: the block is not held twice
                    yield offset, block
                    offset += cut
        packed.append(Packed(member.name, digest.hexdigest(), crc))
        done(index, packed[-1])
    if pending or offset == 0:
        yield offset, bytes(pending)


def _cut(data: bytearray, target: int) -> int:
    """The first position from `target` on whose CUT_GAP bytes before hold no E8/E9; 0 when
    there is none yet (the block then grows until there is)."""
    for cut in range(max(target, CUT_GAP), len(data) + 1):
        window = data[cut - CUT_GAP : cut]
        if 0xE8 not in window and 0xE9 not in window:
            return cut
    return 0


def _compress_block(offset: int, data: bytes) -> bytes:
    filters = [
        {"id": lzma.FILTER_X86, "start_offset": offset},
        {"id": lzma.FILTER_LZMA2, "preset": PRESET},
    ]
    return lzma.compress(data, format=lzma.FORMAT_RAW, filters=filters)


def _compress(blocks: Iterator[tuple[int, bytes]], raw: IO[bytes]) -> int:
    """Compress the blocks, at most THREADS at a time (the next block is read only once one
    is written), writing them in order as one LZMA2 stream with one end marker."""
    written = 0
    window: deque[Future[bytes]] = deque()
    with ThreadPoolExecutor(THREADS) as pool:
        for offset, data in blocks:
            window.append(pool.submit(_compress_block, offset, data))
            if len(window) >= THREADS:
                written += _write_block(raw, window.popleft().result())
        while window:
            written += _write_block(raw, window.popleft().result())
    raw.write(b"\0")  # the end marker of the whole stream
    return written + 1


def _write_block(raw: IO[bytes], stream: bytes) -> int:
    """A block's LZMA2 stream without its end marker (a 0 control byte)."""
    if stream[-1:] != b"\0":
        raise RuntimeError("liblzma's raw LZMA2 stream does not end with its end marker")
    raw.write(memoryview(stream)[:-1])
    return len(stream) - 1


# --- the header (7zFormat.txt) ------------------------------------------------------------------


def _number(value: int) -> bytes:
    """7z's variable-length UINT64: the first byte's leading ones count the bytes after it."""
    for extra in range(8):
        if value < 1 << (7 * (extra + 1)):
            high = value >> (8 * extra)
            first = (0xFF << (8 - extra)) & 0xFF | high
            return bytes([first]) + value.to_bytes(8, "little")[:extra]
    return b"\xff" + value.to_bytes(8, "little")


def _bits(flags: Sequence[bool]) -> bytes:
    out = bytearray((len(flags) + 7) // 8)
    for index, flag in enumerate(flags):
        if flag:
            out[index // 8] |= 0x80 >> (index % 8)
    return bytes(out)


def _header(
    members: Sequence[Member], packed: Sequence[Packed], pack_size: int, mtime: int, attrs: int
) -> bytes:
    full = [(m, p) for m, p in zip(members, packed, strict=True) if m.size]
    total = sum(m.size for m, _ in full)
    streams = bytes([_MAIN_STREAMS]) + _pack_info(pack_size) + _folder_info(total)
    streams += _substreams([m.size for m, _ in full], [p.crc32 for _, p in full]) + bytes([_END])
    files = _files_info(members, mtime, attrs)
    return bytes([_HEADER]) + streams + files + bytes([_END])


def _pack_info(pack_size: int) -> bytes:
    sizes = bytes([_SIZE]) + _number(pack_size)
    return bytes([_PACK_INFO]) + _number(0) + _number(1) + sizes + bytes([_END])


def _folder_info(total: int) -> bytes:
    """One folder as 7-Zip writes it: coder 0 LZMA2 (reads the pack stream), coder 1 BCJ, whose
    input (in stream 1) is LZMA2's output (out stream 0); BCJ's output is the members."""
    lzma2 = bytes([0x20 | len(_LZMA2_ID)]) + _LZMA2_ID + _number(1) + _LZMA2_DICT_8_MIB
    bcj = bytes([len(_BCJ_ID)]) + _BCJ_ID
    folder = _number(2) + lzma2 + bcj + _number(1) + _number(0)  # bind pair: in 1 <- out 0
    sizes = bytes([_UNPACK_SIZE]) + _number(total) + _number(total)
    return bytes([_UNPACK_INFO, _FOLDER]) + _number(1) + b"\0" + folder + sizes + bytes([_END])


def _substreams(sizes: Sequence[int], crcs: Sequence[int]) -> bytes:
    out = bytes([_SUBSTREAMS, _NUM_STREAMS]) + _number(len(sizes))
    if len(sizes) > 1:
        out += bytes([_SIZE]) + b"".join(_number(size) for size in sizes[:-1])
    out += bytes([_CRC, 1]) + b"".join(struct.pack("<I", crc) for crc in crcs)
    return out + bytes([_END])


def _files_info(members: Sequence[Member], mtime: int, attrs: int) -> bytes:
    count = len(members)
    props = b""
    empty = [m.size == 0 for m in members]
    if any(empty):
        props += _property(_EMPTY_STREAM, _bits(empty))
        props += _property(_EMPTY_FILE, _bits([True] * sum(empty)))
    names = b"".join(m.name.encode("utf-16-le") + b"\0\0" for m in members)
    props += _property(_NAME, b"\0" + names)
    props += _property(_MTIME, b"\1\0" + struct.pack("<Q", mtime) * count)
    props += _property(_ATTRIBUTES, b"\1\0" + struct.pack("<I", attrs) * count)
    return bytes([_FILES_INFO]) + _number(count) + props + bytes([_END])


def _property(kind: int, data: bytes) -> bytes:
    return bytes([kind]) + _number(len(data)) + data


def _signature_header(pack_size: int, header: bytes) -> bytes:
    start = struct.pack("<QQI", pack_size, len(header), zlib.crc32(header))
    return SIGNATURE + struct.pack("<I", zlib.crc32(start)) + start
