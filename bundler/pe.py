"""Read layer: the facts `bundle` needs from a PE image, and nothing more.

Parsing is names-only: headers, then the import, delay-import, resource (for the version) and
the two header-only directories (CLR, certificate). pefile's full parse of a 600 MB CUDA DLL
takes orders of magnitude longer and tells us nothing we use.
"""

from __future__ import annotations

import os
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
    """Parse `path` names-only. Raises InputFileError naming the file on any defect."""
    size = _file_size(path)
    try:
        image = pefile.PE(str(path), fast_load=True)
    except pefile.PEFormatError as exc:
        raise InputFileError(f"{path}: not a valid PE file ({exc.value}).") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}.") from None
    try:
        _check_not_truncated(path, image, size)
        image.parse_data_directories(
            directories=list(_PARSED_DIRECTORIES), import_dllnames_only=True
        )
        return _info(path, size, image)
    except pefile.PEFormatError as exc:
        raise InputFileError(f"{path}: corrupt PE file ({exc.value}).") from None
    finally:
        image.close()


def _file_size(path: Path) -> int:
    try:
        if not path.is_file():
            what = "is a directory, not a file" if path.is_dir() else "does not exist"
            raise InputFileError(f"{path}: {what}.")
        return path.stat().st_size
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}.") from None


def _check_not_truncated(path: Path, image: pefile.PE, size: int) -> None:
    """A section whose raw data runs past the end of the file means a cut-off download/copy."""
    for section in image.sections:
        end = section.PointerToRawData + section.SizeOfRawData
        if section.SizeOfRawData and end > size:
            name = section.Name.rstrip(b"\0").decode("ascii", "replace")
            raise InputFileError(
                f"{path}: truncated PE file (section {name} ends at byte {end:,}, "
                f"file has {size:,} bytes); copy or download it again."
            )


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
