"""Read layer: the facts `bundle` needs from a PE image, and nothing more.

Parsing is names-only: headers, then the import, delay-import, resource (for the version) and
the two header-only directories (CLR, certificate). pefile's full parse of a 600 MB CUDA DLL
takes orders of magnitude longer and tells us nothing we use.

Strict: pefile is made for looking at damaged files and reads on past damage, which would turn
a cut-off or corrupt DLL into one with fewer (or no) imports. So every defect in what we read is
an InputFileError naming the file and the defect: headers or sections cut off, a section table
entry pefile skips, a certificate table past the end, an import or delay-import table (or a DLL
name in it) outside the file data of every section, a table without its terminating entry, a
name that runs off its section, and any warning pefile records while parsing the directories we
read. Only pefile's warnings about the headers do not count: real CUDA DLLs have sections
beyond 256 MiB that pefile calls suspicious.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import pefile

from bundler.errors import InputFileError

MACHINES: dict[int, str] = {0x014C: "x86", 0x8664: "x64", 0xAA64: "arm64"}
IMAGE_FILE_DLL = 0x2000
# IMAGE_COR20_HEADER.Flags (ECMA-335 II.25.3.3.1; corhdr.h). "Prefer 32-bit" sets both
# 32BITREQUIRED and 32BITPREFERRED, so 32BITREQUIRED alone decides that the exe runs as x86.
COMIMAGE_FLAGS_ILONLY = 0x1
COMIMAGE_FLAGS_32BITREQUIRED = 0x2
_COR20_FLAGS_OFFSET = 16  # cb, runtime version (2 x u16), MetaData directory (2 x u32), Flags

_DIR = pefile.DIRECTORY_ENTRY
_MACHINE_I386 = 0x014C
_NT_SIGNATURE_AND_FILE_HEADER = 4 + 20  # the "PE" signature, IMAGE_FILE_HEADER
# IMAGE_SECTION_HEADER: Name, then (skipped) VirtualSize and VirtualAddress, SizeOfRawData,
# PointerToRawData, and 16 bytes we do not read
_SECTION_HEADER = struct.Struct("<8s8xII16x")
_MAX_SECTIONS = 96  # the Windows loader's limit (PE format specification, COFF header)
_MAX_DESCRIPTORS = 4096  # far more DLLs than any real image imports
_MAX_DLL_NAME = 255  # a file name component on NTFS
_AGAIN = "copy, download or build the file again"
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
        _check_headers(path, image, size)
        _check_not_truncated(path, image, size)
        _check_sections_read(path, image)
        walked = {table.title: _walk_table(path, image, table) for table in _TABLES}
        _parse_directories(path, image)
        info = _info(path, size, image)
        _check_same_names(path, walked, info)
        return info
    except pefile.PEFormatError as exc:
        raise _corrupt(path, str(exc.value)) from None
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
        raise InputFileError(f"{path}: not a valid PE file (the file is empty); {_AGAIN}.")
    try:
        return pefile.PE(str(path), fast_load=True)
    except pefile.PEFormatError as exc:
        reason = str(exc.value).rstrip(".")
        raise InputFileError(
            f"{path}: not a valid PE file ({reason}); is it the right file? If so, {_AGAIN}."
        ) from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}.") from None
    except _PEFILE_FAILURES as exc:
        raise _corrupt(path, f"pefile cannot read its headers: {_describe(exc)}") from None


def _parse_directories(path: Path, image: pefile.PE) -> None:
    """pefile's names-only parse of the directories we read. It carries on past damage there,
    so each warning it records on the way means a table we rely on was not read in full."""
    before = len(image.get_warnings())
    try:
        image.parse_data_directories(
            directories=list(_PARSED_DIRECTORIES), import_dllnames_only=True
        )
    except _PEFILE_FAILURES as exc:
        raise _corrupt(path, f"pefile cannot read its directories: {_describe(exc)}") from None
    warnings = image.get_warnings()[before:]
    if warnings:
        raise _corrupt(path, warnings[0].rstrip(". "))


def _corrupt(path: Path, what: str) -> InputFileError:
    return InputFileError(f"{path}: corrupt PE file ({_printable(what)}); {_AGAIN}.")


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


def _check_headers(path: Path, image: pefile.PE, size: int) -> None:
    """pefile pads headers cut short with zeros, and stops reading the section table at its
    first bad entry; the Windows loader refuses both images."""
    declared = image.FILE_HEADER.NumberOfSections
    table_end = _section_table(image) + _SECTION_HEADER.size * declared
    if table_end > size:
        raise InputFileError(
            f"{path}: truncated PE file (its headers end at byte {table_end:,}, file has "
            f"{size:,} bytes); copy or download it again."
        )
    if declared > _MAX_SECTIONS:
        raise _corrupt(
            path, f"{declared} sections in the section table, Windows allows {_MAX_SECTIONS}"
        )


def _check_not_truncated(path: Path, image: pefile.PE, size: int) -> None:
    """A section whose raw data runs past the end of the file means a cut-off download/copy.
    So does a certificate table (always last in a signed file) that ends past it. The section
    table is read here, not from pefile, which leaves out the entries it finds damaged."""
    table = _section_table(image)
    for number in range(image.FILE_HEADER.NumberOfSections):
        name, raw_size, raw_start = _SECTION_HEADER.unpack_from(
            image.__data__, table + _SECTION_HEADER.size * number
        )
        end = raw_start + raw_size
        if raw_size and end > size:
            raise InputFileError(
                f"{path}: truncated PE file (section {_section_name(name)} ends at byte "
                f"{end:,}, file has {size:,} bytes); copy or download it again."
            )
    if _has_directory(image, "IMAGE_DIRECTORY_ENTRY_SECURITY"):
        security = image.OPTIONAL_HEADER.DATA_DIRECTORY[_DIR["IMAGE_DIRECTORY_ENTRY_SECURITY"]]
        end = security.VirtualAddress + security.Size  # a file offset, not an RVA
        if end > size:
            raise InputFileError(
                f"{path}: truncated PE file (the certificate table ends at byte {end:,}, "
                f"file has {size:,} bytes); copy or download it again."
            )


def _check_sections_read(path: Path, image: pefile.PE) -> None:
    """Every section pefile left out would make addresses in it unreadable (or read from the
    wrong place); its warning says why it left it out."""
    declared = image.FILE_HEADER.NumberOfSections
    kept = len(image.sections)
    if kept == declared:
        return
    about = f"section {kept}"
    reasons = [w for w in image.get_warnings() if about in w and "Suspicious" not in w]
    reason = reasons[0].rstrip(". ") if reasons else "pefile cannot read it"
    raise _corrupt(path, f"section header {kept + 1} of {declared} is damaged: {reason}")


def _section_table(image: pefile.PE) -> int:
    """File offset of the section table, found the way the loader finds it."""
    offset: int = (
        image.DOS_HEADER.e_lfanew
        + _NT_SIGNATURE_AND_FILE_HEADER
        + image.FILE_HEADER.SizeOfOptionalHeader
    )
    return offset


def _section_name(raw: bytes) -> str:
    name = raw.rstrip(b"\0").decode("ascii", "replace")
    return _printable(name) or "(unnamed)"


def _printable(text: str) -> str:
    """Bytes from a damaged file, safe for a one-line message."""
    return "".join(char if char.isprintable() else "?" for char in text)


# --- the import and delay-import tables, walked strictly ----------------------------------------


@dataclass(frozen=True)
class _Table:
    """An import-style directory: an array of fixed-size descriptors ending in an all-zero one,
    each naming a DLL by the RVA of a NUL-terminated ASCII string."""

    title: str
    directory: int  # index in the data directory
    descriptor: struct.Struct
    name_field: int
    delay: bool


_TABLES = (
    # IMAGE_IMPORT_DESCRIPTOR: OriginalFirstThunk, TimeDateStamp, ForwarderChain, Name, FirstThunk
    _Table(
        "import directory", _DIR["IMAGE_DIRECTORY_ENTRY_IMPORT"], struct.Struct("<5I"), 3, False
    ),
    # ImgDelayDescr: grAttrs, rvaDLLName, rvaHmod, rvaIAT, rvaINT, rvaBoundIAT, rvaUnloadIAT,
    # dwTimeStamp
    _Table(
        "delay-import directory",
        _DIR["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
        struct.Struct("<8I"),
        1,
        True,
    ),
)


def _walk_table(path: Path, image: pefile.PE, table: _Table) -> tuple[str, ...]:
    """The DLL names of `table`, read from bytes the file really holds.

    pefile reads an address outside every section as a file offset, takes a short read at the
    end of a section for the terminator, and cuts a name at the end of the data: each of these
    would turn a damaged table into fewer imports. Here each is an error. The walk is bounded
    by the section holding the table, and by _MAX_DESCRIPTORS, so it cannot take long.
    """
    directories = image.OPTIONAL_HEADER.DATA_DIRECTORY
    if table.directory >= len(directories) or not directories[table.directory].VirtualAddress:
        return ()
    start = directories[table.directory].VirtualAddress
    offset, end, region = _backing(path, image, start, f"the {table.title} (RVA 0x{start:x})")
    data = image.__data__
    names: list[str] = []
    for number in range(_MAX_DESCRIPTORS):
        if offset + table.descriptor.size > end:
            raise _corrupt(
                path,
                f"the {table.title} has no terminating entry: it runs off the end of {region}",
            )
        fields = table.descriptor.unpack_from(data, offset)
        if not any(fields):
            return tuple(names)
        names.append(_dll_name(path, image, table, fields, number + 1))
        offset += table.descriptor.size
    raise _corrupt(path, f"the {table.title} has no terminating entry in {_MAX_DESCRIPTORS:,}")


def _dll_name(
    path: Path, image: pefile.PE, table: _Table, fields: tuple[int, ...], number: int
) -> str:
    what = f"the DLL name of entry {number} of the {table.title}"
    rva = fields[table.name_field]
    if table.delay and fields[0] == 0 and image.FILE_HEADER.Machine == _MACHINE_I386:
        rva = image.normalize_import_va(rva)  # pre-VC6 descriptors hold VAs (as pefile reads)
    if rva == 0:
        raise _corrupt(path, f"entry {number} of the {table.title} names no DLL")
    offset, end, region = _backing(path, image, rva, f"{what} (RVA 0x{rva:x})")
    data = image.__data__
    nul = data.find(b"\0", offset, min(end, offset + _MAX_DLL_NAME + 1))
    if nul < 0:
        problem = "is too long" if end - offset > _MAX_DLL_NAME else f"runs off the end of {region}"
        raise _corrupt(path, f"{what} {problem}")
    raw = bytes(data[offset:nul])
    if not raw:
        raise _corrupt(path, f"{what} is empty")
    if not pefile.is_valid_dos_filename(raw):
        raise _corrupt(path, f"{what} is not a file name ({raw[:40]!r})")
    return raw.decode("ascii")


def _backing(path: Path, image: pefile.PE, rva: int, what: str) -> tuple[int, int, str]:
    """File offset of `rva`, the end of the file data behind it (the section's raw data, cut
    at its virtual size; the headers) and that region's name. Data the loader would only
    zero-fill, or that lies in no section at all, has no backing: an error naming `what`."""
    section = image.get_section_by_rva(rva)
    if section is None:
        headers = min(image.OPTIONAL_HEADER.SizeOfHeaders, len(image.__data__))
        if rva < headers:
            return rva, headers, "the headers"
        raise _corrupt(path, f"{what} points outside every section")
    start = section.get_VirtualAddress_adj()
    raw_start = section.get_PointerToRawData_adj()
    length = section.SizeOfRawData
    if section.Misc_VirtualSize:
        length = min(length, section.Misc_VirtualSize)
    name = f"section {_section_name(section.Name)}"
    if rva - start >= length:
        raise _corrupt(path, f"{what} points past the data of {name} in the file")
    return raw_start + rva - start, min(raw_start + length, len(image.__data__)), name


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
            raise _corrupt(path, f"the {title} {which} is damaged: its name table cannot be read")


def _info(path: Path, size: int, image: pefile.PE) -> PEInfo:
    header = image.FILE_HEADER
    optional = image.OPTIONAL_HEADER
    managed = _has_directory(image, "IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR")
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
        signed=_has_directory(image, "IMAGE_DIRECTORY_ENTRY_SECURITY"),
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


def _has_directory(image: pefile.PE, name: str) -> bool:
    directories = image.OPTIONAL_HEADER.DATA_DIRECTORY
    index = _DIR[name]
    return index < len(directories) and bool(
        directories[index].VirtualAddress and directories[index].Size
    )


def format_version(version: tuple[int, ...] | None) -> str:
    return ".".join(str(part) for part in version) if version else "-"


def is_pe_candidate(name: str) -> bool:
    """File names the resolver may consider as DLLs in a search folder."""
    return os.path.splitext(name)[1].lower() in {".dll", ".drv", ".ocx", ".cpl", ".sys"}
