"""Read layer: the facts `bundle` needs from a PE image, and nothing more.

Parsing is names-only: headers, then the import, delay-import, resource (for the version) and
the two header-only directories (CLR, certificate). pefile's full parse of a 600 MB CUDA DLL
takes orders of magnitude longer and tells us nothing we use.

Strict: pefile is made for looking at damaged files and reads on past damage, which would turn
a cut-off or corrupt DLL into one with fewer (or no) imports. So every defect in what we read is
an InputFileError naming the file and the defect: headers or sections cut off, a section table
entry pefile skips, a certificate table past the end, an import or delay-import table (or a DLL
name in it) outside the file data of every section, a table without its terminating entry, a
name that runs off its section (those checks: bundler.binary.defects), and any warning pefile
records while parsing the directories we read. Only pefile's warnings about the headers do not
count: real CUDA DLLs have sections beyond 256 MiB that pefile calls suspicious.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import pefile

from bundler.binary.defects import (
    AGAIN,
    TABLES,
    check_headers,
    check_not_truncated,
    check_sections_read,
    corrupt,
    has_directory,
    walk_table,
)
from bundler.errors import InputFileError

MACHINES: dict[int, str] = {0x014C: "x86", 0x8664: "x64", 0xAA64: "arm64"}
IMAGE_FILE_DLL = 0x2000
# IMAGE_COR20_HEADER.Flags (ECMA-335 II.25.3.3.1; corhdr.h). "Prefer 32-bit" sets both
# 32BITREQUIRED and 32BITPREFERRED, so 32BITREQUIRED alone decides that the exe runs as x86.
COMIMAGE_FLAGS_ILONLY = 0x1
COMIMAGE_FLAGS_32BITREQUIRED = 0x2
_COR20_FLAGS_OFFSET = 16  # cb, runtime version (2 x u16), MetaData directory (2 x u32), Flags

_DIR = pefile.DIRECTORY_ENTRY
# What pefile may raise besides PEFormatError on a damaged image: caught around pefile's calls
# only, so that a bug of ours still shows as one.
_PEFILE_FAILURES = (
    struct.error,
    ValueError,  # UnicodeDecodeError too
    IndexError,
    KeyError,
    TypeError,
    AttributeError,
    OverflowError,
    RecursionError,
)
_PARSED_DIRECTORIES = [
    _DIR["IMAGE_DIRECTORY_ENTRY_IMPORT"],
    _DIR["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
    _DIR["IMAGE_DIRECTORY_ENTRY_RESOURCE"],
]


@dataclass(frozen=True)
class PEInfo:
    """What one PE file says about itself. Import names keep the spelling found in the file."""

    path: Path
    size: int
    machine: str  # "x86" | "x64" | "arm64" | "unknown(0x....)"
    is_dll: bool
    imports: tuple[str, ...]
    delay_imports: tuple[str, ...]
    linker_version: tuple[int, int]
    file_version: tuple[int, int, int, int] | None
    managed: bool
    signed: bool
    product_name: str | None = None  # VS_VERSIONINFO's ProductName string, if any
    clr_flags: int | None = None  # the CLR header's Flags, for a managed (.NET) image

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def any_cpu(self) -> bool:
        """An IL-only x86 image without 32BITREQUIRED: the CLR runs it as a native process of
        the machine it starts on (x64 on 64-bit Windows), whatever its PE header says."""
        flags = self.clr_flags or 0
        return (
            self.machine == "x86"
            and bool(flags & COMIMAGE_FLAGS_ILONLY)
            and not flags & COMIMAGE_FLAGS_32BITREQUIRED
        )

    @property
    def requires_32bit(self) -> bool:
        """A managed image marked 32BITREQUIRED (/platform:x86 or "Prefer 32-bit")."""
        return bool((self.clr_flags or 0) & COMIMAGE_FLAGS_32BITREQUIRED)

    def runs_as(self, architecture: str) -> bool:
        """Whether a process started from this image on a Windows of `architecture` is of that
        architecture (and so can load that architecture's DLLs)."""
        return self.machine == architecture or (self.any_cpu and architecture == "x64")

    @property
    def kind(self) -> str:
        return "dll" if self.is_dll else "exe"


def read_pe(path: Path) -> PEInfo:
    """Parse `path` names-only. Raises InputFileError naming the file on any defect.

    Order: pefile's header parse; then our checks of what pefile is lenient about (headers,
    section table and sections cut off, the certificate table past the end, import and
    delay-import tables that point nowhere or run off their section); then pefile's parse of
    the directories we read, whose warnings count as errors.
    """
    size = _file_size(path)
    image = _open(path, size)
    try:
        check_headers(path, image, size)
        check_not_truncated(path, image, size)
        check_sections_read(path, image)
        walked = {table.title: walk_table(path, image, table) for table in TABLES}
        _parse_directories(path, image)
        info = _info(path, size, image)
        _check_same_names(path, walked, info)
        return info
    except pefile.PEFormatError as exc:
        raise corrupt(path, str(exc.value)) from None
    finally:
        release_image(image)


def release_image(image: pefile.PE) -> None:
    """Unmap the file. pefile's own close() also runs a full garbage collection, once per
    file: 0.15-0.2 s per build or audit of the GPU set, for nothing we allocate."""
    data = image.__dict__.get("__data__")
    if isinstance(data, mmap.mmap):
        data.close()


def _open(path: Path, size: int) -> pefile.PE:
    if size == 0:
        raise InputFileError(f"{path}: not a valid PE file (the file is empty); {AGAIN}.")
    try:
        return pefile.PE(str(path), fast_load=True)
    except pefile.PEFormatError as exc:
        reason = str(exc.value).rstrip(".")
        raise InputFileError(
            f"{path}: not a valid PE file ({reason}); is it the right file? If so, {AGAIN}."
        ) from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}.") from None
    except _PEFILE_FAILURES as exc:
        raise corrupt(path, f"pefile cannot read its headers: {_describe(exc)}") from None


def _parse_directories(path: Path, image: pefile.PE) -> None:
    """pefile's names-only parse of the directories we read. It carries on past damage there,
    so each warning it records on the way means a table we rely on was not read in full."""
    before = len(image.get_warnings())
    try:
        image.parse_data_directories(
            directories=list(_PARSED_DIRECTORIES), import_dllnames_only=True
        )
    except _PEFILE_FAILURES as exc:
        raise corrupt(path, f"pefile cannot read its directories: {_describe(exc)}") from None
    warnings = image.get_warnings()[before:]
    if warnings:
        raise corrupt(path, warnings[0].rstrip(". "))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _file_size(path: Path) -> int:
    try:
        if path.is_dir():
            raise InputFileError(f"{path}: is a folder, not a file; give the path of the file.")
        if not path.exists():
            raise InputFileError(f"{path}: does not exist; check the path.")
        if not path.is_file():
            raise InputFileError(f"{path}: is not a regular file; give the path of the file.")
        return path.stat().st_size
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}.") from None


def _check_same_names(path: Path, tables: dict[str, tuple[str, ...]], info: PEInfo) -> None:
    """The strict walk and pefile's parse must agree on every DLL name. pefile drops an entry
    whose name table it cannot read, sometimes without a warning."""
    for title, parsed in (
        ("import directory", info.imports),
        ("delay-import directory", info.delay_imports),
    ):
        walked = tables[title]
        if walked != parsed:
            lost = [name for name in walked if name not in parsed]
            which = f"entry for {lost[0]}" if lost else "entries"
            raise corrupt(path, f"the {title} {which} is damaged: its name table cannot be read")


def _info(path: Path, size: int, image: pefile.PE) -> PEInfo:
    header = image.FILE_HEADER
    optional = image.OPTIONAL_HEADER
    managed = has_directory(image, "IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR")
    return PEInfo(
        path=path,
        size=size,
        machine=MACHINES.get(header.Machine, f"unknown(0x{header.Machine:04x})"),
        is_dll=bool(header.Characteristics & IMAGE_FILE_DLL),
        imports=_dll_names(getattr(image, "DIRECTORY_ENTRY_IMPORT", [])),
        delay_imports=_dll_names(getattr(image, "DIRECTORY_ENTRY_DELAY_IMPORT", [])),
        linker_version=(optional.MajorLinkerVersion, optional.MinorLinkerVersion),
        file_version=_file_version(image),
        managed=managed,
        signed=has_directory(image, "IMAGE_DIRECTORY_ENTRY_SECURITY"),
        product_name=_version_string(image, b"ProductName"),
        clr_flags=_clr_flags(image) if managed else None,
    )


def _clr_flags(image: pefile.PE) -> int:
    """The Flags of the CLR header, read directly: pefile's own .NET parse walks the metadata."""
    rva = image.OPTIONAL_HEADER.DATA_DIRECTORY[_DIR["IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR"]]
    flags = image.get_dword_at_rva(rva.VirtualAddress + _COR20_FLAGS_OFFSET)
    if flags is None:
        raise pefile.PEFormatError("the CLR header lies outside the file")
    return int(flags)


def _dll_names(entries: list[pefile.ImportDescData]) -> tuple[str, ...]:
    names = []
    for entry in entries:
        raw = entry.dll
        if raw:
            names.append(raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw))
    return tuple(names)


def _file_version(image: pefile.PE) -> tuple[int, int, int, int] | None:
    fixed = getattr(image, "VS_FIXEDFILEINFO", None)
    if not fixed:
        return None
    ms, ls = fixed[0].FileVersionMS, fixed[0].FileVersionLS
    return (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)


def _version_string(image: pefile.PE, key: bytes) -> str | None:
    """A value of the version resource's StringFileInfo (the first table that has it)."""
    for info in getattr(image, "FileInfo", None) or []:
        for entry in info:
            for table in getattr(entry, "StringTable", []):
                value = table.entries.get(key)
                if value:
                    text: str = value.decode("utf-8", "replace").strip()
                    return text or None
    return None


def format_version(version: tuple[int, ...] | None) -> str:
    return ".".join(str(part) for part in version) if version else "-"


def is_pe_candidate(name: str) -> bool:
    """File names the resolver may consider as DLLs in a search folder."""
    return os.path.splitext(name)[1].lower() in {".dll", ".drv", ".ocx", ".cpl", ".sys"}
