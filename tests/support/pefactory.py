"""Synthetic, structurally valid Windows PE images, built in memory for unit tests.

The release tool reads real DLLs with pefile; these images let its tests pin down one property
at a time (machine, exe/dll, imports, delay imports, version resource, .NET header, signature)
without shipping binaries or needing a cross compiler. Only the standard library is used.

Layout of an image (sections that would be empty are left out)::

    headers   DOS header + stub, "PE\\0\\0", COFF header, optional header, section table
    .text     a "return 1" entry point (also the target of every delay-load IAT slot)
    .data     delay-load module handles and IATs (writable, as the loader patches them),
              then `padding` zero bytes
    .rdata    .NET metadata root + IMAGE_COR20_HEADER, name strings, IATs, import lookup tables,
              import descriptors, delay-load name tables and descriptors
    .rsrc     RT_VERSION -> 1 -> 0x409 -> VS_VERSIONINFO
    overlay   WIN_CERTIFICATE (when signed), addressed by file offset

Known simplifications: no base relocations (so DYNAMIC_BASE is not claimed), no exports, no
Rich header, and the delay-load IATs point at the entry point rather than at real helper
thunks. These images are meant to be parsed, never loaded.

`PEPatch` damages one structure of an image (ours, or a real one built by mingw) for the tests
of the reader's strictness: it locates the headers, sections and directories the way the
loader does, and writes single fields.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_ALIGNMENT = 0x200
SECTION_ALIGNMENT = 0x1000
E_LFANEW = 0x80  # DOS header (64 bytes) + the classic 64-byte DOS stub

# IMAGE_FILE_* characteristics (COFF header).
IMAGE_FILE_EXECUTABLE_IMAGE = 0x0002
IMAGE_FILE_LARGE_ADDRESS_AWARE = 0x0020
IMAGE_FILE_32BIT_MACHINE = 0x0100
IMAGE_FILE_DLL = 0x2000

# IMAGE_SCN_* section characteristics.
_SCN_CODE = 0x60000020  # CNT_CODE | MEM_EXECUTE | MEM_READ
_SCN_RDATA = 0x40000040  # CNT_INITIALIZED_DATA | MEM_READ
_SCN_DATA = 0xC0000040  # CNT_INITIALIZED_DATA | MEM_READ | MEM_WRITE

# Data directory indices (IMAGE_DIRECTORY_ENTRY_*).
DIR_IMPORT = 1
DIR_RESOURCE = 2
DIR_SECURITY = 4
DIR_IAT = 12
DIR_DELAY_IMPORT = 13
DIR_COM_DESCRIPTOR = 14
_NUM_DIRECTORIES = 16

RT_VERSION = 16
LANG_EN_US = 0x0409
CODEPAGE_UNICODE = 0x04B0
VS_FFI_SIGNATURE = 0xFEEF04BD
COR20_HEADER_SIZE = 72
WIN_CERT_REVISION_2_0 = 0x0200
WIN_CERT_TYPE_PKCS_SIGNED_DATA = 0x0002

_DOS_STUB = (
    bytes.fromhex("0e1fba0e00b409cd21b8014ccd21")  # print the message below, exit(1)
    + b"This program cannot be run in DOS mode.\r\r\n$"
).ljust(64, b"\0")


@dataclass(frozen=True)
class _Arch:
    """What differs between the supported machines."""

    machine: int
    pe32_plus: bool
    exe_base: int
    dll_base: int

    @property
    def pointer_size(self) -> int:
        """Size of a thunk / IAT slot: 8 bytes for PE32+, 4 for PE32."""
        return 8 if self.pe32_plus else 4


_ARCHES = {
    "x86": _Arch(0x014C, pe32_plus=False, exe_base=0x00400000, dll_base=0x10000000),
    "x64": _Arch(0x8664, pe32_plus=True, exe_base=0x140000000, dll_base=0x180000000),
    "arm64": _Arch(0xAA64, pe32_plus=True, exe_base=0x140000000, dll_base=0x180000000),
}


@dataclass(frozen=True)
class PESpec:
    """What the synthetic image should contain; every field maps to one PE structure."""

    machine: str = "x64"
    dll: bool = True
    imports: tuple[str, ...] = ()
    delay_imports: tuple[str, ...] = ()
    linker_version: tuple[int, int] = (14, 40)
    file_version: tuple[int, int, int, int] | None = None
    product_name: str | None = None  # a ProductName string in the version resource
    managed: bool = False
    signed: bool = False
    padding: int = 0


def build_pe(spec: PESpec) -> bytes:
    """Return the bytes of a PE image described by `spec`."""
    _validate(spec)
    return _ImageBuilder(spec).build()


def write_pe(path: Path, spec: PESpec | None = None, **fields: Any) -> Path:
    """Write `spec` (or `PESpec(**fields)`) to `path` and return `path`."""
    if spec is not None and fields:
        raise TypeError("pass either a PESpec or PESpec fields, not both")
    if spec is None:
        spec = PESpec(**fields)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(build_pe(spec))
    return path


def _validate(spec: PESpec) -> None:
    """Reject specs that would silently produce a malformed image."""
    if spec.machine not in _ARCHES:
        raise ValueError(f"unknown machine {spec.machine!r}; expected one of {sorted(_ARCHES)}")
    for name in (*spec.imports, *spec.delay_imports):
        if not name or not name.isascii() or "\0" in name:
            raise ValueError(f"DLL names must be non-empty ASCII: {name!r}")
    if not all(0 <= part <= 0xFF for part in spec.linker_version):
        raise ValueError(f"linker version parts must fit in a byte: {spec.linker_version}")
    if spec.file_version is not None and not all(0 <= p <= 0xFFFF for p in spec.file_version):
        raise ValueError(f"file version parts must fit in 16 bits: {spec.file_version}")
    if spec.padding < 0:
        raise ValueError(f"padding must be >= 0: {spec.padding}")


# --- small byte helpers ----------------------------------------------------------------------


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def _pad_to(buffer: bytearray, alignment: int) -> None:
    buffer.extend(b"\0" * (-len(buffer) % alignment))


def _ascii_z(text: str) -> bytes:
    return text.encode("ascii") + b"\0"


def _utf16_z(text: str) -> bytes:
    return text.encode("utf-16-le") + b"\0\0"


def _slack(size: int) -> bytes:
    """Filler for alignment gaps (header tail, raw data past VirtualSize).

    The loader never maps these bytes, so their value is free. They are not zero because
    pefile's full parse warns when 0x00 is over half of a file (or any other byte over 15%),
    and a tiny image padded to 0x200-byte file alignment is mostly gap.
    """
    return bytes(1 + i % 251 for i in range(size))


# --- sections --------------------------------------------------------------------------------


@dataclass
class _Section:
    """A section being filled; `add` hands back the RVA of what it appended."""

    name: bytes
    rva: int
    characteristics: int
    data: bytearray = field(default_factory=bytearray)

    def add(self, blob: bytes, align: int = 4) -> int:
        _pad_to(self.data, align)
        rva = self.rva + len(self.data)
        self.data.extend(blob)
        return rva

    @property
    def raw_size(self) -> int:
        return _align(len(self.data), FILE_ALIGNMENT)

    @property
    def is_code(self) -> bool:
        return self.characteristics == _SCN_CODE


def _entry_code(machine: str, dll: bool) -> bytes:
    """Machine code that returns 1 (a DllMain that succeeds, or an exe that exits 1)."""
    if machine == "arm64":
        return bytes.fromhex("20008052c0035fd6")  # mov w0, #1 ; ret
    if machine == "x86" and dll:
        return bytes.fromhex("b801000000c20c00")  # mov eax, 1 ; ret 12 (stdcall, 3 args)
    return bytes.fromhex("b801000000c3")  # mov eax, 1 ; ret


# --- image assembly --------------------------------------------------------------------------


class _ImageBuilder:
    """Fills sections in dependency order (so every reference points backwards), then
    writes the headers around them."""

    def __init__(self, spec: PESpec) -> None:
        self.spec = spec
        self.arch = _ARCHES[spec.machine]
        self.image_base = self.arch.dll_base if spec.dll else self.arch.exe_base
        self.sections: list[_Section] = []
        self.directories = [(0, 0)] * _NUM_DIRECTORIES

    def build(self) -> bytes:
        text = self._open(b".text", _SCN_CODE)
        entry_rva = text.add(_entry_code(self.spec.machine, self.spec.dll))
        self._keep(text)

        data = self._open(b".data", _SCN_DATA)
        delay_slots = self._add_delay_slots(data, stub_va=self.image_base + entry_rva)
        data.add(bytes(self.spec.padding), align=1)
        self._keep(data)

        rdata = self._open(b".rdata", _SCN_RDATA)
        if self.spec.managed:
            self._add_cor20_header(rdata)
        self._add_imports(rdata)
        self._add_delay_imports(rdata, delay_slots)
        self._keep(rdata)

        if self.spec.file_version is not None:
            rsrc = self._open(b".rsrc", _SCN_RDATA)
            blob = _resource_tree(
                rsrc.rva,
                _version_info(self.spec.file_version, self.spec.dll, self.spec.product_name),
            )
            self.directories[DIR_RESOURCE] = (rsrc.add(blob), len(blob))
            self._keep(rsrc)

        return self._assemble(entry_rva)

    # sections

    def _open(self, name: bytes, characteristics: int) -> _Section:
        """Start a section right after the last kept one."""
        rva = SECTION_ALIGNMENT
        if self.sections:
            last = self.sections[-1]
            rva = _align(last.rva + len(last.data), SECTION_ALIGNMENT)
        return _Section(name, rva, characteristics)

    def _keep(self, section: _Section) -> None:
        """Add a section to the image unless it stayed empty."""
        if section.data:
            self.sections.append(section)

    # content

    def _thunks(self, *values: int) -> bytes:
        """A null-terminated thunk array (IMAGE_THUNK_DATA32/64)."""
        fmt = "<Q" if self.arch.pe32_plus else "<I"
        return b"".join(struct.pack(fmt, value) for value in (*values, 0))

    def _add_names(self, section: _Section, dll: str, function: str) -> tuple[int, int]:
        """The DLL name and an IMAGE_IMPORT_BY_NAME (hint 0); returns both RVAs."""
        name_rva = section.add(_ascii_z(dll), align=1)
        hint_name_rva = section.add(struct.pack("<H", 0) + _ascii_z(function), align=2)
        return name_rva, hint_name_rva

    def _add_imports(self, section: _Section) -> None:
        """Import directory: every DLL imports one function by name, f0, f1, ... in order.

        The ILT and the IAT both hold the hint/name RVA, as in an unbound image on disk. The
        IATs are contiguous so the IAT data directory can cover all of them.
        """
        if not self.spec.imports:
            return
        names = [
            self._add_names(section, dll, f"f{index}")
            for index, dll in enumerate(self.spec.imports)
        ]
        pointer = self.arch.pointer_size
        iats = [section.add(self._thunks(hint_name), pointer) for _, hint_name in names]
        self.directories[DIR_IAT] = (iats[0], len(iats) * 2 * pointer)
        ilts = [section.add(self._thunks(hint_name), pointer) for _, hint_name in names]
        descriptors = b"".join(
            # OriginalFirstThunk, TimeDateStamp, ForwarderChain, Name, FirstThunk
            struct.pack("<IIIII", ilt, 0, 0, name, iat)
            for (name, _), ilt, iat in zip(names, ilts, iats, strict=True)
        ) + bytes(20)
        self.directories[DIR_IMPORT] = (section.add(descriptors), len(descriptors))

    def _add_delay_slots(self, section: _Section, stub_va: int) -> list[tuple[int, int]]:
        """Per delay-loaded DLL: its HMODULE slot and its IAT, both written by the loader
        helper at run time. The IAT starts out pointing at code (a VA), as linkers emit it."""
        pointer = self.arch.pointer_size
        slots = []
        for _ in self.spec.delay_imports:
            hmod = section.add(bytes(pointer), pointer)
            iat = section.add(self._thunks(stub_va), pointer)
            slots.append((hmod, iat))
        return slots

    def _add_delay_imports(self, section: _Section, slots: list[tuple[int, int]]) -> None:
        """Delay-load directory: RVA-based ImgDelayDescr entries (grAttrs = 1)."""
        if not self.spec.delay_imports:
            return
        names = [
            self._add_names(section, dll, f"f{index}")
            for index, dll in enumerate(self.spec.delay_imports)
        ]
        pointer = self.arch.pointer_size
        ints = [section.add(self._thunks(hint_name), pointer) for _, hint_name in names]
        descriptors = b"".join(
            # grAttrs, rvaDLLName, rvaHmod, rvaIAT, rvaINT, rvaBoundIAT, rvaUnloadIAT, dwTimeStamp
            struct.pack("<8I", 1, name, hmod, iat, int_rva, 0, 0, 0)
            for (name, _), (hmod, iat), int_rva in zip(names, slots, ints, strict=True)
        ) + bytes(32)
        self.directories[DIR_DELAY_IMPORT] = (section.add(descriptors), len(descriptors))

    def _add_cor20_header(self, section: _Section) -> None:
        """IMAGE_COR20_HEADER (runtime 2.5, ILONLY) pointing at an empty metadata root."""
        metadata = _metadata_root()
        metadata_rva = section.add(metadata)
        header = struct.pack(
            "<IHHIIII",
            COR20_HEADER_SIZE,  # cb
            2,  # MajorRuntimeVersion
            5,  # MinorRuntimeVersion
            metadata_rva,
            len(metadata),
            1,  # Flags: COMIMAGE_FLAGS_ILONLY
            0,  # EntryPointToken
        ).ljust(COR20_HEADER_SIZE, b"\0")  # Resources .. ManagedNativeHeader: all empty
        header_rva = section.add(header)
        self.directories[DIR_COM_DESCRIPTOR] = (header_rva, COR20_HEADER_SIZE)

    # headers

    def _assemble(self, entry_rva: int) -> bytes:
        """Lay the sections out in the file and prepend the headers."""
        optional_size = (112 if self.arch.pe32_plus else 96) + 8 * _NUM_DIRECTORIES
        headers_end = E_LFANEW + 4 + 20 + optional_size + 40 * len(self.sections)
        size_of_headers = _align(headers_end, FILE_ALIGNMENT)

        offsets = []
        offset = size_of_headers
        for section in self.sections:
            offsets.append(offset)
            offset += section.raw_size
        certificate = _win_certificate() if self.spec.signed else b""
        if certificate:
            # The one data directory that holds a file offset, not an RVA.
            self.directories[DIR_SECURITY] = (_align(offset, 8), len(certificate))

        image = bytearray(_dos_header())
        image += b"PE\0\0"
        image += self._coff_header(optional_size)
        checksum_offset = len(image) + 64  # same place in PE32 and PE32+
        image += self._optional_header(entry_rva, size_of_headers)
        for section, raw_offset in zip(self.sections, offsets, strict=True):
            image += _section_header(section, raw_offset)
        image += _slack(size_of_headers - len(image))
        for section in self.sections:
            image += section.data + _slack(section.raw_size - len(section.data))
        if certificate:
            _pad_to(image, 8)
            image += certificate
        struct.pack_into("<I", image, checksum_offset, _pe_checksum(image))
        return bytes(image)

    def _coff_header(self, optional_size: int) -> bytes:
        characteristics = IMAGE_FILE_EXECUTABLE_IMAGE
        if self.arch.pe32_plus:
            characteristics |= IMAGE_FILE_LARGE_ADDRESS_AWARE
        else:
            characteristics |= IMAGE_FILE_32BIT_MACHINE
        if self.spec.dll:
            characteristics |= IMAGE_FILE_DLL
        # Machine, NumberOfSections, TimeDateStamp (0: reproducible), symbol table (none),
        # SizeOfOptionalHeader, Characteristics
        return struct.pack(
            "<HHIIIHH",
            self.arch.machine,
            len(self.sections),
            0,
            0,
            0,
            optional_size,
            characteristics,
        )

    def _optional_header(self, entry_rva: int, size_of_headers: int) -> bytes:
        """IMAGE_OPTIONAL_HEADER32 (with BaseOfData) or IMAGE_OPTIONAL_HEADER64, CheckSum 0."""
        code = [s for s in self.sections if s.is_code]
        initialized = [s for s in self.sections if not s.is_code]
        last = self.sections[-1]
        size_of_image = _align(last.rva + len(last.data), SECTION_ALIGNMENT)
        major_linker, minor_linker = self.spec.linker_version
        head = [
            0x20B if self.arch.pe32_plus else 0x10B,  # Magic
            major_linker,
            minor_linker,
            sum(s.raw_size for s in code),  # SizeOfCode
            sum(s.raw_size for s in initialized),  # SizeOfInitializedData
            0,  # SizeOfUninitializedData
            entry_rva,  # AddressOfEntryPoint
            code[0].rva,  # BaseOfCode
        ]
        if not self.arch.pe32_plus:
            head.append(initialized[0].rva if initialized else 0)  # BaseOfData
        pointer = "Q" if self.arch.pe32_plus else "I"
        header = struct.pack(f"<HBBIIIII{'' if self.arch.pe32_plus else 'I'}", *head)
        header += struct.pack(
            f"<{pointer}IIHHHHHHIIIIHH{pointer * 4}II",
            self.image_base,
            SECTION_ALIGNMENT,
            FILE_ALIGNMENT,
            6,  # MajorOperatingSystemVersion
            0,
            0,  # MajorImageVersion
            0,
            6,  # MajorSubsystemVersion (Vista)
            0,
            0,  # Win32VersionValue
            size_of_image,
            size_of_headers,
            0,  # CheckSum, filled in last
            3,  # Subsystem: IMAGE_SUBSYSTEM_WINDOWS_CUI
            0x0100,  # DllCharacteristics: NX_COMPAT (no relocations, so no DYNAMIC_BASE)
            0x100000,  # SizeOfStackReserve
            0x1000,  # SizeOfStackCommit
            0x100000,  # SizeOfHeapReserve
            0x1000,  # SizeOfHeapCommit
            0,  # LoaderFlags
            _NUM_DIRECTORIES,
        )
        return header + b"".join(struct.pack("<II", *entry) for entry in self.directories)


def _dos_header() -> bytes:
    """IMAGE_DOS_HEADER with the usual linker values, then the DOS stub, up to e_lfanew."""
    header = struct.pack(
        "<2s13H8x2H20xI",
        b"MZ",
        0x90,  # e_cblp
        3,  # e_cp
        0,  # e_crlc
        4,  # e_cparhdr
        0,  # e_minalloc
        0xFFFF,  # e_maxalloc
        0,  # e_ss
        0xB8,  # e_sp
        0,  # e_csum
        0,  # e_ip
        0,  # e_cs
        0x40,  # e_lfarlc
        0,  # e_ovno
        0,  # e_oemid
        0,  # e_oeminfo
        E_LFANEW,
    )
    return header + _DOS_STUB


def _section_header(section: _Section, raw_offset: int) -> bytes:
    """IMAGE_SECTION_HEADER; VirtualSize is the exact content size, raw size is aligned."""
    return struct.pack(
        "<8sIIIIIIHHI",
        section.name,
        len(section.data),
        section.rva,
        section.raw_size,
        raw_offset,
        0,
        0,
        0,
        0,
        section.characteristics,
    )


def _pe_checksum(image: bytes | bytearray) -> int:
    """The optional header CheckSum (as CheckSumMappedFile computes it): the 16-bit
    one's-complement sum of the file, with the CheckSum field itself still zero, plus the
    file length. Covers the certificate too."""
    data = bytes(image) + b"\0" * (len(image) % 2)
    total = 0
    for start in range(0, len(data), 0x10000):  # in chunks: padding can make files large
        chunk = data[start : start + 0x10000]
        total += sum(struct.unpack(f"<{len(chunk) // 2}H", chunk))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total + len(image)


def _metadata_root() -> bytes:
    """A .NET metadata root ("BSJB", version string v4.0.30319) that declares no streams."""
    version = b"v4.0.30319".ljust(12, b"\0")
    return struct.pack("<IHHII", 0x424A5342, 1, 1, 0, len(version)) + version + bytes(4)


def _win_certificate() -> bytes:
    """A WIN_CERTIFICATE (PKCS#7 type) with placeholder content, padded to 8 bytes. It is no
    real signature: only its placement and header are meant to be checked."""
    content = b"synthetic PKCS#7 SignedData placeholder"
    header = struct.pack(
        "<IHH", 8 + len(content), WIN_CERT_REVISION_2_0, WIN_CERT_TYPE_PKCS_SIGNED_DATA
    )
    blob = bytearray(header + content)
    _pad_to(blob, 8)
    return bytes(blob)


# --- resources -------------------------------------------------------------------------------


def _resource_directory(entry_id: int, target: int, *, subdirectory: bool) -> bytes:
    """IMAGE_RESOURCE_DIRECTORY with a single ID entry.

    `target` is an offset from the start of the resource section; the high bit marks it as
    another directory rather than a data entry.
    """
    directory = struct.pack("<IIHHHH", 0, 0, 0, 0, 0, 1)  # no named entries, one ID entry
    return directory + struct.pack("<II", entry_id, target | (0x80000000 if subdirectory else 0))


def _resource_tree(section_rva: int, version_info: bytes) -> bytes:
    """type RT_VERSION -> name 1 -> language en-US -> data entry -> VS_VERSIONINFO."""
    level = 24  # each single-entry directory: 16-byte header + one 8-byte entry
    data_entry_offset = 3 * level
    payload_offset = data_entry_offset + 16
    return (
        _resource_directory(RT_VERSION, level, subdirectory=True)
        + _resource_directory(1, 2 * level, subdirectory=True)
        + _resource_directory(LANG_EN_US, data_entry_offset, subdirectory=False)
        # IMAGE_RESOURCE_DATA_ENTRY: OffsetToData (an RVA), Size, CodePage, Reserved
        + struct.pack("<IIII", section_rva + payload_offset, len(version_info), 0, 0)
        + version_info
    )


def _version_node(
    key: str,
    value: bytes = b"",
    value_length: int = 0,
    text: bool = False,
    children: Sequence[bytes] = (),
) -> bytes:
    """One version-info block: wLength, wValueLength, wType, szKey, Padding, Value, Children.

    Key, value and every child start on a 32-bit boundary (relative to the block, which is
    itself 32-bit aligned). wLength excludes the padding after the last child.
    """
    block = bytearray(struct.pack("<HHH", 0, value_length, 1 if text else 0))
    block += _utf16_z(key)
    _pad_to(block, 4)
    block += value
    for child in children:
        _pad_to(block, 4)
        block += child
    struct.pack_into("<H", block, 0, len(block))
    return bytes(block)


def _version_string(key: str, value: str) -> bytes:
    """A String block; its wValueLength counts UTF-16 code units, terminator included."""
    encoded = _utf16_z(value)
    return _version_node(key, encoded, value_length=len(encoded) // 2, text=True)


def _version_info(
    version: tuple[int, int, int, int], dll: bool, product_name: str | None = None
) -> bytes:
    """VS_VERSIONINFO: VS_FIXEDFILEINFO, StringFileInfo 040904b0 and VarFileInfo."""
    major, minor, build, revision = version
    version_ms = (major << 16) | minor
    version_ls = (build << 16) | revision
    fixed = struct.pack(
        "<13I",
        VS_FFI_SIGNATURE,
        0x00010000,  # dwStrucVersion
        version_ms,  # dwFileVersionMS
        version_ls,  # dwFileVersionLS
        version_ms,  # dwProductVersionMS
        version_ls,  # dwProductVersionLS
        0x3F,  # dwFileFlagsMask: VS_FFI_FILEFLAGSMASK
        0,  # dwFileFlags
        0x00040004,  # dwFileOS: VOS_NT_WINDOWS32
        2 if dll else 1,  # dwFileType: VFT_DLL or VFT_APP
        0,  # dwFileSubtype
        0,  # dwFileDateMS
        0,  # dwFileDateLS
    )
    dotted = ".".join(str(part) for part in version)
    table = _version_node(
        f"{LANG_EN_US:04x}{CODEPAGE_UNICODE:04x}",
        text=True,
        children=[
            _version_string("FileVersion", dotted),
            _version_string("ProductVersion", dotted),
            *([_version_string("ProductName", product_name)] if product_name else []),
        ],
    )
    translation = _version_node(
        "Translation", struct.pack("<HH", LANG_EN_US, CODEPAGE_UNICODE), value_length=4
    )
    return _version_node(
        "VS_VERSION_INFO",
        fixed,
        value_length=len(fixed),
        children=[
            _version_node("StringFileInfo", text=True, children=[table]),
            _version_node("VarFileInfo", text=True, children=[translation]),
        ],
    )


# --- damaging an image -----------------------------------------------------------------------


IMPORT_DESCRIPTOR_SIZE = 20  # IMAGE_IMPORT_DESCRIPTOR; the DLL name's RVA is at +12
DELAY_DESCRIPTOR_SIZE = 32  # ImgDelayDescr; the DLL name's RVA is at +4, the INT's at +16


@dataclass(frozen=True)
class SectionHeader:
    """One IMAGE_SECTION_HEADER, and where it sits in the file."""

    name: str
    virtual_size: int
    rva: int
    raw_size: int
    raw_offset: int
    header_offset: int

    @property
    def data_end_rva(self) -> int:
        """The first RVA past the file data the loader maps for this section."""
        return self.rva + min(self.virtual_size or self.raw_size, self.raw_size)


class PEPatch:
    """A PE image as a mutable byte array, with its headers located (PE32 and PE32+)."""

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)
        (pe_offset,) = struct.unpack_from("<I", self.data, 0x3C)
        if self.data[pe_offset : pe_offset + 4] != b"PE\0\0":
            raise ValueError("not a PE image")
        count, optional_size = struct.unpack_from("<H12xH", self.data, pe_offset + 6)
        optional = pe_offset + 24
        (magic,) = struct.unpack_from("<H", self.data, optional)
        self.directories_offset = optional + (112 if magic == 0x20B else 96)
        table = optional + optional_size
        self.sections = [self._section(table + 40 * index) for index in range(count)]

    def _section(self, offset: int) -> SectionHeader:
        name, vsize, rva, raw_size, raw_offset = struct.unpack_from("<8sIIII", self.data, offset)
        return SectionHeader(
            name.rstrip(b"\0").decode("ascii"), vsize, rva, raw_size, raw_offset, offset
        )

    def section(self, name: str) -> SectionHeader:
        return next(section for section in self.sections if section.name == name)

    def section_of(self, rva: int) -> SectionHeader:
        return next(s for s in self.sections if s.rva <= rva < s.rva + max(s.virtual_size, 1))

    def set_section(self, name: str, *, virtual_size: int) -> None:
        struct.pack_into("<I", self.data, self.section(name).header_offset + 8, virtual_size)
        self.sections = [self._section(section.header_offset) for section in self.sections]

    def directory(self, index: int) -> tuple[int, int]:
        rva, size = struct.unpack_from("<II", self.data, self.directories_offset + 8 * index)
        return rva, size

    def set_directory(self, index: int, rva: int, size: int | None = None) -> None:
        size = self.directory(index)[1] if size is None else size
        struct.pack_into("<II", self.data, self.directories_offset + 8 * index, rva, size)

    def offset(self, rva: int) -> int:
        section = self.section_of(rva)
        return section.raw_offset + rva - section.rva

    def read(self, rva: int, size: int) -> bytes:
        return bytes(self.data[self.offset(rva) : self.offset(rva) + size])

    def u32(self, rva: int) -> int:
        (value,) = struct.unpack_from("<I", self.data, self.offset(rva))
        return int(value)

    def write(self, rva: int, blob: bytes) -> None:
        start = self.offset(rva)
        self.data[start : start + len(blob)] = blob

    def write_u32(self, rva: int, value: int) -> None:
        self.write(rva, struct.pack("<I", value))

    def descriptors(self, directory: int) -> list[int]:
        """RVAs of a (delay-)import directory's descriptors, its all-zero terminator last."""
        size = DELAY_DESCRIPTOR_SIZE if directory == DIR_DELAY_IMPORT else IMPORT_DESCRIPTOR_SIZE
        rva = self.directory(directory)[0]
        found = [rva]
        while any(self.read(found[-1], size)):
            found.append(found[-1] + size)
        return found

    def to_bytes(self) -> bytes:
        return bytes(self.data)
