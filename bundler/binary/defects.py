"""Read layer: the defects of a PE image that pefile reads past, found strictly.

pefile is made for looking at damaged files and reads on past damage, which would turn a
cut-off or corrupt DLL into one with fewer (or no) imports. bundler.binary.pe runs these checks
between pefile's header parse and its parse of the directories we read; each defect is an
InputFileError naming the file and the defect: headers or sections cut off, a section table
entry pefile skips, a certificate table past the end, an import or delay-import table (or a
DLL name in it) outside the file data of every section, a table without its terminating
entry, a name that runs off its section.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import pefile

from bundler.errors import InputFileError

_DIR = pefile.DIRECTORY_ENTRY
_MACHINE_I386 = 0x014C
_NT_SIGNATURE_AND_FILE_HEADER = 4 + 20  # the "PE" signature, IMAGE_FILE_HEADER
# IMAGE_SECTION_HEADER: Name, then (skipped) VirtualSize and VirtualAddress, SizeOfRawData,
# PointerToRawData, and 16 bytes we do not read
_SECTION_HEADER = struct.Struct("<8s8xII16x")
_MAX_SECTIONS = 96  # the Windows loader's limit (PE format specification, COFF header)
_MAX_DESCRIPTORS = 4096  # far more DLLs than any real image imports
_MAX_DLL_NAME = 255  # a file name component on NTFS
AGAIN = "copy, download or build the file again"  # the fix every defect message ends with


def corrupt(path: Path, what: str) -> InputFileError:
    return InputFileError(f"{path}: corrupt PE file ({_printable(what)}); {AGAIN}.")


def check_headers(path: Path, image: pefile.PE, size: int) -> None:
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
        raise corrupt(
            path, f"{declared} sections in the section table, Windows allows {_MAX_SECTIONS}"
        )


def check_not_truncated(path: Path, image: pefile.PE, size: int) -> None:
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
    if has_directory(image, "IMAGE_DIRECTORY_ENTRY_SECURITY"):
        security = image.OPTIONAL_HEADER.DATA_DIRECTORY[_DIR["IMAGE_DIRECTORY_ENTRY_SECURITY"]]
        end = security.VirtualAddress + security.Size  # a file offset, not an RVA
        if end > size:
            raise InputFileError(
                f"{path}: truncated PE file (the certificate table ends at byte {end:,}, "
                f"file has {size:,} bytes); copy or download it again."
            )


def check_sections_read(path: Path, image: pefile.PE) -> None:
    """Every section pefile left out would make addresses in it unreadable (or read from the
    wrong place); its warning says why it left it out."""
    declared = image.FILE_HEADER.NumberOfSections
    kept = len(image.sections)
    if kept == declared:
        return
    about = f"section {kept}"
    reasons = [w for w in image.get_warnings() if about in w and "Suspicious" not in w]
    reason = reasons[0].rstrip(". ") if reasons else "pefile cannot read it"
    raise corrupt(path, f"section header {kept + 1} of {declared} is damaged: {reason}")


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


TABLES = (
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


def walk_table(path: Path, image: pefile.PE, table: _Table) -> tuple[str, ...]:
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
            raise corrupt(
                path,
                f"the {table.title} has no terminating entry: it runs off the end of {region}",
            )
        fields = table.descriptor.unpack_from(data, offset)
        if not any(fields):
            return tuple(names)
        names.append(_dll_name(path, image, table, fields, number + 1))
        offset += table.descriptor.size
    raise corrupt(path, f"the {table.title} has no terminating entry in {_MAX_DESCRIPTORS:,}")


def _dll_name(
    path: Path, image: pefile.PE, table: _Table, fields: tuple[int, ...], number: int
) -> str:
    what = f"the DLL name of entry {number} of the {table.title}"
    rva = fields[table.name_field]
    if table.delay and fields[0] == 0 and image.FILE_HEADER.Machine == _MACHINE_I386:
        rva = image.normalize_import_va(rva)  # pre-VC6 descriptors hold VAs (as pefile reads)
    if rva == 0:
        raise corrupt(path, f"entry {number} of the {table.title} names no DLL")
    offset, end, region = _backing(path, image, rva, f"{what} (RVA 0x{rva:x})")
    data = image.__data__
    nul = data.find(b"\0", offset, min(end, offset + _MAX_DLL_NAME + 1))
    if nul < 0:
        problem = "is too long" if end - offset > _MAX_DLL_NAME else f"runs off the end of {region}"
        raise corrupt(path, f"{what} {problem}")
    raw = bytes(data[offset:nul])
    if not raw:
        raise corrupt(path, f"{what} is empty")
    if not pefile.is_valid_dos_filename(raw):
        raise corrupt(path, f"{what} is not a file name ({raw[:40]!r})")
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
        raise corrupt(path, f"{what} points outside every section")
    start = section.get_VirtualAddress_adj()
    raw_start = section.get_PointerToRawData_adj()
    length = section.SizeOfRawData
    if section.Misc_VirtualSize:
        length = min(length, section.Misc_VirtualSize)
    name = f"section {_section_name(section.Name)}"
    if rva - start >= length:
        raise corrupt(path, f"{what} points past the data of {name} in the file")
    return raw_start + rva - start, min(raw_start + length, len(image.__data__)), name


def has_directory(image: pefile.PE, name: str) -> bool:
    directories = image.OPTIONAL_HEADER.DATA_DIRECTORY
    index = _DIR[name]
    return index < len(directories) and bool(
        directories[index].VirtualAddress and directories[index].Size
    )
