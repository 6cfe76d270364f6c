"""Read layer: which GPU code a Windows DLL carries, read from the CUDA fat binaries in it.

A CUDA DLL keeps its device code in the PE section `.nv_fatb` (`.nv_fatbin` cut to eight
characters): one or more fatbin blobs back to back, each starting on a 16-byte boundary. The
blob and entry headers say, for every entry, whether it is SASS (a cubin ELF for one GPU
architecture) or PTX, its architecture number and its flags; the `a` (architecture-specific)
and `f` (family-specific) variants are flag bits, not part of the number. `.nvFatBi`
(`.nvFatBinSegment`) holds the runtime's 24-byte registration records, one per blob, pointing
into `.nv_fatb`; it holds no code of its own. Should a toolchain put blobs there, they are
walked too. The layout was read from the DLLs and checked entry by entry against `cuobjdump`
(docs/field-notes.md#fatbin).

Only headers are read: a few bytes per blob and per entry, by seek and read, never a payload and
never the whole file (cublasLt is 500 MB, ORT's CUDA provider up to 750 MB). Damage is an
InputFileError naming the file and the file offset, never a guess: a walk that reads on past a
bad header would report code that is not there.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bundler.errors import InputFileError

FATBIN_MAGIC = 0xBA55ED50
WRAPPER_MAGIC = 0x466243B1  # __fatBinC_Wrapper_t, the records in .nvFatBi
SECTIONS = (".nv_fatb", ".nvFatBi")
KIND_PTX = 1
KIND_ELF = 2
# entry flags: 0x1 64-bit, 0x40 host Windows (0x10 Linux), 0x2000 / 0x8000 payload compressed
# (CUDA <= 12.x / CUDA >= 12.8); the two below name the variant. cuobjdump -elf prints them as
# "arch = sm_90a" / "arch = sm_100f" (its --list-elf file names drop the "f").
FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a, sm_120a
FLAG_FAMILY_SPECIFIC = 0x200000  # sm_100f, sm_120f

# blob header: magic, version, header size, size of the entries after the header
_BLOB = struct.Struct("<IHHQ")
# entry header, the part we read: kind, (u16), header size, payload size, (compressed size,
# u32, code version minor and major), architecture, (object name offset and length), flags
_ENTRY = struct.Struct("<HxxIQ12xI8xQ")
_MIN_ENTRY_HEADER = 64  # every entry of the measured DLLs has 64 or more
_BLOB_ALIGN = 16
_AGAIN = "copy, download or build the file again"
_ARCH = re.compile(r"sm_(\d+)([af]?)")

# PE headers: e_lfanew; after "PE\0\0", NumberOfSections (u16 at +2) and SizeOfOptionalHeader
# (u16 at +16) of IMAGE_FILE_HEADER; IMAGE_SECTION_HEADER: Name, VirtualSize, (VirtualAddress),
# SizeOfRawData, PointerToRawData, (16 bytes)
_LFANEW = struct.Struct("<60xI")
_FILE_HEADER = struct.Struct("<4s2xH12xH2x")
_SECTION_HEADER = struct.Struct("<8sI4xII16x")
# Read buffer: one buffer holds a blob's headers, so walking them costs one read per blob.
_BUFFER = 1 << 16
_MAX_SECTIONS = 96  # the Windows loader's limit (PE format specification, COFF header)


@dataclass(frozen=True)
class GpuCode:
    """The GPU code of one DLL, over all its fatbin blobs."""

    sass: tuple[str, ...]  # sorted unique, e.g. ("sm_52", "sm_60", ..., "sm_90a")
    ptx: tuple[str, ...]  # sorted unique, PTX named by its target arch: ("sm_80",)
    blobs: int  # how many fatbin blobs were walked


@dataclass(frozen=True)
class _Section:
    name: str
    start: int  # file offset
    size: int  # bytes of data in the file: min(VirtualSize, SizeOfRawData)


def read_gpu_code(path: Path) -> GpuCode | None:
    """The SASS and PTX architectures in `path`'s fat binaries; None when it has no section
    `.nv_fatb` or `.nvFatBi` (no CUDA device code at all)."""
    try:
        with open(path, "rb", buffering=_BUFFER) as fd:
            file_size = os.fstat(fd.fileno()).st_size
            sections = [s for s in _sections(path, fd, file_size) if s.name in SECTIONS]
            if not sections:
                return None
            sass: set[str] = set()
            ptx: set[str] = set()
            blobs = 0
            for section in sections:
                blobs += _walk_section(path, fd, section, sass, ptx)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}.") from None
    return GpuCode(sass=sort_archs(sass), ptx=sort_archs(ptx), blobs=blobs)


def arch_name(arch: int, flags: int) -> str:
    """`sm_90`, `sm_90a` or `sm_100f`: the number from the entry header, the suffix from its
    flags."""
    if flags & FLAG_ARCH_SPECIFIC:
        return f"sm_{arch}a"
    if flags & FLAG_FAMILY_SPECIFIC:
        return f"sm_{arch}f"
    return f"sm_{arch}"


def arch_key(name: str) -> tuple[int, str]:
    """Numeric order, then the suffix: sm_90 < sm_90a < sm_100 < sm_100f < sm_120a."""
    match = _ARCH.fullmatch(name)
    if match is None:
        raise ValueError(f"not a GPU architecture name: {name!r}")
    return int(match.group(1)), match.group(2)


def sort_archs(names: set[str] | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(set(names), key=arch_key))


def serves(code: GpuCode, capability: tuple[int, int]) -> str:
    """How a device of compute capability `capability` (major, minor) can run this code:
    "native" (a cubin it can load), "jit" (only PTX the driver compiles at load time, slow the
    first time) or "none". Native beats jit beats none.

    NVIDIA's rules (CUDA C++ Programming Guide, "Binary Compatibility", "PTX Compatibility",
    "Application Compatibility"; nvcc documentation, "GPU Feature List" for the variants); an
    architecture number XY is compute capability X.Y (sm_120 is 12.0):
    - SASS sm_XY runs on X.Z for Z >= Y, same major only (sm_80 runs on 8.6, not on 9.0);
    - SASS sm_XYa (architecture-specific) runs only on exactly X.Y;
    - SASS sm_XYf (family-specific) runs on the family: same major, minor >= Y;
    - PTX sm_XY is JIT-compiled for any capability >= X.Y, newer majors too;
    - PTX sm_XYa only for exactly X.Y; PTX sm_XYf for the family, as its SASS.
    """
    if any(_runs(name, capability, jit=False) for name in code.sass):
        return "native"
    if any(_runs(name, capability, jit=True) for name in code.ptx):
        return "jit"
    return "none"


def _runs(name: str, capability: tuple[int, int], *, jit: bool) -> bool:
    number, suffix = arch_key(name)
    target = (number // 10, number % 10)
    if suffix == "a":
        return capability == target
    if suffix == "f" or not jit:
        return capability[0] == target[0] and capability[1] >= target[1]
    return capability >= target


# --- the PE section table ---------------------------------------------------------------------


def _sections(path: Path, fd: BinaryIO, file_size: int) -> list[_Section]:
    """The section table, read with two small reads: only names and file ranges matter here.
    pe.read_pe checks the rest of the image; this module must not load a 700 MB file."""
    head = _read_at(fd, 0, _LFANEW.size)
    if len(head) < _LFANEW.size or head[:2] != b"MZ":
        raise _not_pe(path, "no MZ header")
    (nt,) = _LFANEW.unpack(head)
    file_header = _read_at(fd, nt, _FILE_HEADER.size)
    if len(file_header) < _FILE_HEADER.size:
        raise _not_pe(path, "headers cut off")
    signature, count, optional_size = _FILE_HEADER.unpack(file_header)
    if signature != b"PE\0\0" or count > _MAX_SECTIONS:
        raise _not_pe(path, "no PE signature" if signature != b"PE\0\0" else "too many sections")
    table_at = nt + _FILE_HEADER.size + optional_size
    table = _read_at(fd, table_at, _SECTION_HEADER.size * count)
    if len(table) < _SECTION_HEADER.size * count:
        raise _not_pe(path, "section table cut off")
    sections = []
    for number in range(count):
        raw_name, virtual_size, raw_size, raw_start = _SECTION_HEADER.unpack_from(
            table, _SECTION_HEADER.size * number
        )
        name = raw_name.rstrip(b"\0").decode("ascii", "replace")
        size = min(virtual_size, raw_size) if virtual_size else raw_size
        if name in SECTIONS and raw_start + size > file_size:
            raise _damaged(path, name, raw_start, "section runs past the end of the file")
        sections.append(_Section(name, raw_start, size))
    return sections


# --- blobs and entries --------------------------------------------------------------------------


def _walk_section(
    path: Path, fd: BinaryIO, section: _Section, sass: set[str], ptx: set[str]
) -> int:
    """Walk the blobs of one section; returns how many. Each blob starts right after the one
    before or at the next 16-byte boundary after it (the measured padding is 8 zero bytes)."""
    end = section.start + section.size
    if section.size == 0 or _u32(fd, section.start) == WRAPPER_MAGIC:
        return 0  # .nvFatBi: registration records, no code
    offset = section.start
    blobs = 0
    while offset < end:
        if _u32(fd, offset) != FATBIN_MAGIC:
            aligned = section.start + _align(offset - section.start, _BLOB_ALIGN)
            if aligned == offset or aligned >= end or _u32(fd, aligned) != FATBIN_MAGIC:
                raise _damaged(path, section.name, offset, "no fatbin magic where a blob starts")
            offset = aligned
        offset = _walk_blob(path, fd, section, offset, sass, ptx)
        blobs += 1
    return blobs


def _walk_blob(
    path: Path, fd: BinaryIO, section: _Section, offset: int, sass: set[str], ptx: set[str]
) -> int:
    """Read one blob's entry headers into `sass` and `ptx`; returns where the blob ends."""
    end = section.start + section.size
    header = _read(path, fd, section, offset, _BLOB.size)
    header_size: int
    entries_size: int
    _, _, header_size, entries_size = _BLOB.unpack(header)
    blob_end = offset + header_size + entries_size
    if header_size < _BLOB.size or blob_end > end:
        raise _damaged(path, section.name, offset, "blob runs past the end of its section")
    entry = offset + header_size
    while entry < blob_end:
        if entry + _MIN_ENTRY_HEADER > blob_end:
            raise _damaged(path, section.name, entry, "entry header runs past its blob")
        raw = _read(path, fd, section, entry, _ENTRY.size)
        kind, entry_header, payload, arch, flags = _ENTRY.unpack(raw)
        if entry_header < _MIN_ENTRY_HEADER or entry + entry_header + payload > blob_end:
            raise _damaged(path, section.name, entry, "entry runs past its blob")
        if kind == KIND_ELF:
            sass.add(arch_name(arch, flags))
        elif kind == KIND_PTX:
            ptx.add(arch_name(arch, flags))
        entry += entry_header + payload
    return blob_end


def _read(path: Path, fd: BinaryIO, section: _Section, offset: int, size: int) -> bytes:
    data = _read_at(fd, offset, size)
    if len(data) < size or offset + size > section.start + section.size:
        raise _damaged(path, section.name, offset, "header runs past the end of its section")
    return data


def _u32(fd: BinaryIO, offset: int) -> int:
    data = _read_at(fd, offset, 4)
    return int.from_bytes(data, "little") if len(data) == 4 else -1


def _read_at(fd: BinaryIO, offset: int, size: int) -> bytes:
    """A positional read that works on every system (os.pread is POSIX-only): a seek within
    the buffer costs no system call, and the headers read here lie close together."""
    fd.seek(offset)
    return fd.read(size)


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _damaged(path: Path, section: str, offset: int, what: str) -> InputFileError:
    return InputFileError(
        f"{path}: damaged CUDA fat binary in section {section} at file offset {offset:#x}"
        f" ({what}); {_AGAIN}."
    )


def _not_pe(path: Path, what: str) -> InputFileError:
    return InputFileError(f"{path}: not a valid PE file ({what}); {_AGAIN}.")
