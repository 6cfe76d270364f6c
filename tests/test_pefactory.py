"""Checks that tests/support/pefactory.py builds the PE images it promises.

Expected values are written out literally (machine codes, characteristics, offsets, version
numbers) so a factory bug cannot be hidden by comparing the factory with itself. pefile does a
full parse with its warnings checked; objdump and llvm-readobj are independent second opinions.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pefile
import pytest

from tests.support.pefactory import PESpec, build_pe, write_pe
from tests.support.skips import require

MACHINES = ("x86", "x64", "arm64")
MACHINE_CODE = {"x86": 0x014C, "x64": 0x8664, "arm64": 0xAA64}
MAGIC = {"x86": 0x10B, "x64": 0x20B, "arm64": 0x20B}
THUNK_SIZE = {"x86": 4, "x64": 8, "arm64": 8}
IMAGE_BASE = {
    ("x86", False): 0x00400000,
    ("x86", True): 0x10000000,
    ("x64", False): 0x140000000,
    ("x64", True): 0x180000000,
    ("arm64", False): 0x140000000,
    ("arm64", True): 0x180000000,
}
# EXECUTABLE_IMAGE 0x0002, LARGE_ADDRESS_AWARE 0x0020, 32BIT_MACHINE 0x0100, DLL 0x2000
CHARACTERISTICS = {
    ("x86", False): 0x0102,
    ("x86", True): 0x2102,
    ("x64", False): 0x0022,
    ("x64", True): 0x2022,
    ("arm64", False): 0x0022,
    ("arm64", True): 0x2022,
}
ENTRY_CODE = {
    ("x86", False): bytes.fromhex("b801000000c3"),  # mov eax, 1 ; ret
    ("x86", True): bytes.fromhex("b801000000c20c00"),  # mov eax, 1 ; ret 12
    ("x64", False): bytes.fromhex("b801000000c3"),
    ("x64", True): bytes.fromhex("b801000000c3"),
    ("arm64", False): bytes.fromhex("20008052c0035fd6"),  # mov w0, #1 ; ret
    ("arm64", True): bytes.fromhex("20008052c0035fd6"),
}
READOBJ_MACHINE = {
    "x86": "IMAGE_FILE_MACHINE_I386 (0x14C)",
    "x64": "IMAGE_FILE_MACHINE_AMD64 (0x8664)",
    "arm64": "IMAGE_FILE_MACHINE_ARM64 (0xAA64)",
}
OBJDUMP = {"x86": "i686-w64-mingw32-objdump", "x64": "x86_64-w64-mingw32-objdump"}
OBJDUMP_FORMAT = {"x86": "pei-i386", "x64": "pei-x86-64"}

IMPORTS = ("KERNEL32.dll", "liba.dll")
DELAY_IMPORTS = ("libc.dll", "nvcuda.dll")
FULL = {
    "imports": IMPORTS,
    "delay_imports": DELAY_IMPORTS,
    "linker_version": (14, 38),
    "file_version": (1, 19, 2, 7),
    "managed": True,
    "signed": True,
}

IMPORT = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]
RESOURCE = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]
SECURITY = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_SECURITY"]
IAT = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IAT"]
DELAY_IMPORT = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"]
COM_DESCRIPTOR = pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR"]

every_machine = pytest.mark.parametrize("machine", MACHINES)
every_kind = pytest.mark.parametrize("dll", [False, True], ids=["exe", "dll"])


def full_spec(machine: str, dll: bool) -> PESpec:
    return PESpec(machine=machine, dll=dll, **FULL)


def parse(data: bytes) -> pefile.PE:
    """Full pefile parse that must not produce a single warning."""
    pe = pefile.PE(data=data)
    assert pe.get_warnings() == []
    return pe


def parse_like_reader(data: bytes) -> pefile.PE:
    """The way the release tool's reader loads a DLL."""
    pe = pefile.PE(data=data, fast_load=True)
    pe.parse_data_directories(
        directories=[IMPORT, DELAY_IMPORT, RESOURCE], import_dllnames_only=True
    )
    return pe


def directory(pe: pefile.PE, index: int) -> tuple[int, int]:
    entry = pe.OPTIONAL_HEADER.DATA_DIRECTORY[index]
    return entry.VirtualAddress, entry.Size


@every_machine
@every_kind
def test_headers(machine: str, dll: bool) -> None:
    data = build_pe(full_spec(machine, dll))
    pe = parse(data)

    assert data[:2] == b"MZ"
    assert pe.DOS_HEADER.e_lfanew == 0x80
    assert data[0x80:0x84] == b"PE\0\0"
    assert pe.FILE_HEADER.Machine == MACHINE_CODE[machine]
    assert pe.FILE_HEADER.Characteristics == CHARACTERISTICS[(machine, dll)]
    assert pe.is_dll() is dll
    assert pe.is_exe() is not dll
    assert pe.OPTIONAL_HEADER.Magic == MAGIC[machine]
    assert pe.OPTIONAL_HEADER.ImageBase == IMAGE_BASE[(machine, dll)]
    opt = pe.OPTIONAL_HEADER
    assert (opt.MajorLinkerVersion, opt.MinorLinkerVersion) == (14, 38)
    assert pe.OPTIONAL_HEADER.NumberOfRvaAndSizes == 16
    assert pe.OPTIONAL_HEADER.CheckSum != 0
    assert pe.verify_checksum()


@every_machine
@every_kind
def test_section_layout(machine: str, dll: bool) -> None:
    pe = parse(build_pe(full_spec(machine, dll)))
    opt = pe.OPTIONAL_HEADER

    names = [s.Name.rstrip(b"\0") for s in pe.sections]
    assert names == [b".text", b".data", b".rdata", b".rsrc"]
    assert [s.VirtualAddress for s in pe.sections] == [0x1000, 0x2000, 0x3000, 0x4000]
    assert (opt.FileAlignment, opt.SectionAlignment) == (0x200, 0x1000)
    assert opt.SizeOfImage == 0x5000
    assert opt.SizeOfHeaders == pe.sections[0].PointerToRawData
    assert opt.SizeOfHeaders == 0x400  # four section headers no longer fit in 0x200 bytes
    for section in pe.sections:
        assert section.PointerToRawData % 0x200 == 0
        assert section.SizeOfRawData % 0x200 == 0
        assert section.Misc_VirtualSize <= section.SizeOfRawData
    assert opt.SizeOfCode == 0x200
    assert opt.BaseOfCode == 0x1000
    if machine == "x86":
        assert opt.BaseOfData == 0x2000

    assert opt.AddressOfEntryPoint == 0x1000
    text = pe.sections[0]
    assert text.IMAGE_SCN_MEM_EXECUTE and text.IMAGE_SCN_CNT_CODE
    code = ENTRY_CODE[(machine, dll)]
    assert pe.get_data(opt.AddressOfEntryPoint, len(code)) == code


@every_machine
@every_kind
def test_imports(machine: str, dll: bool) -> None:
    pe = parse(build_pe(full_spec(machine, dll)))

    assert [entry.dll for entry in pe.DIRECTORY_ENTRY_IMPORT] == [b"KERNEL32.dll", b"liba.dll"]
    symbols = [[(imp.name, imp.hint) for imp in e.imports] for e in pe.DIRECTORY_ENTRY_IMPORT]
    assert symbols == [[(b"f0", 0)], [(b"f1", 0)]]

    # The IAT directory covers both IATs: per DLL one hint/name RVA and a null thunk, each
    # thunk 4 bytes (PE32) or 8 bytes (PE32+). The ILT holds the same values.
    thunk = THUNK_SIZE[machine]
    iat_rva, iat_size = directory(pe, IAT)
    assert iat_size == 2 * 2 * thunk
    fmt = "<4Q" if thunk == 8 else "<4I"
    hint_names = [e.imports[0].hint_name_table_rva for e in pe.DIRECTORY_ENTRY_IMPORT]
    assert struct.unpack(fmt, pe.get_data(iat_rva, iat_size)) == (
        hint_names[0],
        0,
        hint_names[1],
        0,
    )
    for entry in pe.DIRECTORY_ENTRY_IMPORT:
        assert entry.imports[0].bound is None  # ILT and IAT agree
        assert entry.imports[0].address == IMAGE_BASE[(machine, dll)] + entry.struct.FirstThunk


@every_machine
@every_kind
def test_delay_imports(machine: str, dll: bool) -> None:
    pe = parse(build_pe(full_spec(machine, dll)))

    entries = pe.DIRECTORY_ENTRY_DELAY_IMPORT
    assert [entry.dll for entry in entries] == [b"libc.dll", b"nvcuda.dll"]
    assert [[imp.name for imp in entry.imports] for entry in entries] == [[b"f0"], [b"f1"]]
    assert directory(pe, DELAY_IMPORT)[1] == 3 * 32  # two ImgDelayDescr + the null one
    data_section = pe.sections[1]
    for entry in entries:
        assert entry.struct.grAttrs == 1
        assert entry.struct.dwTimeStamp == 0
        # Handle and IAT are written at run time, so they live in the writable .data section.
        assert data_section.contains_rva(entry.struct.phmod)
        assert data_section.contains_rva(entry.struct.pIAT)
        assert data_section.IMAGE_SCN_MEM_WRITE
        # Before the first call the IAT slot holds the VA of code in .text.
        assert entry.imports[0].bound == IMAGE_BASE[(machine, dll)] + 0x1000


@every_machine
@every_kind
def test_version_resource(machine: str, dll: bool) -> None:
    data = build_pe(full_spec(machine, dll))
    pe = parse(data)

    (type_entry,) = pe.DIRECTORY_ENTRY_RESOURCE.entries
    assert type_entry.id == 16
    (name_entry,) = type_entry.directory.entries
    assert name_entry.id == 1
    (language_entry,) = name_entry.directory.entries
    assert language_entry.id == 0x409

    (fixed,) = pe.VS_FIXEDFILEINFO
    assert fixed.Signature == 0xFEEF04BD
    assert (fixed.FileVersionMS, fixed.FileVersionLS) == (0x00010013, 0x00020007)
    assert (fixed.ProductVersionMS, fixed.ProductVersionLS) == (0x00010013, 0x00020007)
    assert fixed.FileType == (2 if dll else 1)
    assert pe.VS_VERSIONINFO[0].Key == b"VS_VERSION_INFO"

    (blocks,) = pe.FileInfo
    by_key = {block.Key: block for block in blocks}
    assert sorted(by_key) == [b"StringFileInfo", b"VarFileInfo"]
    (table,) = by_key[b"StringFileInfo"].StringTable
    assert table.LangID == b"040904b0"
    assert table.entries == {b"FileVersion": b"1.19.2.7", b"ProductVersion": b"1.19.2.7"}
    # The String block header sits just before its key. "FileVersion" + NUL is 24 bytes, so
    # the value starts at 6 + 24 + 2 (padding) = 32; "1.19.2.7" + NUL is 9 UTF-16 units.
    key_offset, value_offset = table.entries_offsets[b"FileVersion"]
    assert struct.unpack_from("<HHH", data, key_offset - 6) == (32 + 18, 9, 1)
    assert value_offset - key_offset == 26
    (var,) = by_key[b"VarFileInfo"].Var
    assert var.entry == {b"Translation": "0x0409 0x04b0"}


@every_machine
def test_com_descriptor(machine: str) -> None:
    pe = parse(build_pe(full_spec(machine, dll=True)))

    rva, size = directory(pe, COM_DESCRIPTOR)
    assert size == 72
    cb, major, minor, metadata_rva, metadata_size, flags = struct.unpack(
        "<IHHIII", pe.get_data(rva, 20)
    )
    assert (cb, major, minor, flags) == (72, 2, 5, 1)
    assert metadata_size == 32
    assert pe.get_data(metadata_rva, 4) == b"BSJB"


@every_machine
def test_security_directory_is_a_file_offset(machine: str) -> None:
    data = build_pe(full_spec(machine, dll=True))
    pe = parse(data)

    offset, size = directory(pe, SECURITY)
    last = pe.sections[-1]
    assert offset == last.PointerToRawData + last.SizeOfRawData  # right after the last section
    assert offset % 8 == 0
    assert offset + size == len(data)
    assert pe.get_overlay_data_start_offset() == offset
    length, revision, cert_type = struct.unpack_from("<IHH", data, offset)
    assert (revision, cert_type) == (0x0200, 0x0002)
    assert 8 < length <= size
    assert size - length < 8


@every_machine
@every_kind
def test_minimal_image_has_no_optional_parts(machine: str, dll: bool) -> None:
    data = build_pe(PESpec(machine=machine, dll=dll))
    pe = parse(data)

    assert len(data) == 0x400  # headers + .text, one file-alignment unit each
    assert [s.Name.rstrip(b"\0") for s in pe.sections] == [b".text"]
    assert pe.FILE_HEADER.Characteristics == CHARACTERISTICS[(machine, dll)]
    opt = pe.OPTIONAL_HEADER
    assert (opt.MajorLinkerVersion, opt.MinorLinkerVersion) == (14, 40)
    for index in (IMPORT, RESOURCE, SECURITY, IAT, DELAY_IMPORT, COM_DESCRIPTOR):
        assert directory(pe, index) == (0, 0)
    for attribute in (
        "DIRECTORY_ENTRY_IMPORT",
        "DIRECTORY_ENTRY_DELAY_IMPORT",
        "DIRECTORY_ENTRY_RESOURCE",
        "VS_FIXEDFILEINFO",
        "FileInfo",
    ):
        assert not hasattr(pe, attribute)
    assert pe.verify_checksum()


@every_machine
def test_reader_style_parse(machine: str) -> None:
    pe = parse_like_reader(build_pe(full_spec(machine, dll=True)))

    assert pe.get_warnings() == []
    assert [entry.dll for entry in pe.DIRECTORY_ENTRY_IMPORT] == [b"KERNEL32.dll", b"liba.dll"]
    assert all(entry.imports == [] for entry in pe.DIRECTORY_ENTRY_IMPORT)  # names only
    assert [entry.dll for entry in pe.DIRECTORY_ENTRY_DELAY_IMPORT] == [
        b"libc.dll",
        b"nvcuda.dll",
    ]
    assert pe.VS_FIXEDFILEINFO[0].FileVersionMS == 0x00010013


def test_imports_without_delay_imports_and_the_reverse() -> None:
    only_imports = parse(build_pe(PESpec(imports=("a.dll",))))
    assert [e.dll for e in only_imports.DIRECTORY_ENTRY_IMPORT] == [b"a.dll"]
    assert not hasattr(only_imports, "DIRECTORY_ENTRY_DELAY_IMPORT")
    assert [s.Name.rstrip(b"\0") for s in only_imports.sections] == [b".text", b".rdata"]

    only_delay = parse(build_pe(PESpec(delay_imports=("b.dll",))))
    assert [e.dll for e in only_delay.DIRECTORY_ENTRY_DELAY_IMPORT] == [b"b.dll"]
    assert not hasattr(only_delay, "DIRECTORY_ENTRY_IMPORT")
    assert directory(only_delay, IAT) == (0, 0)


def test_padding_adds_zero_bytes_to_the_data_section() -> None:
    data = build_pe(PESpec(padding=0x10000))

    assert len(data) == 0x400 + 0x10000
    reader_view = parse_like_reader(data)
    assert reader_view.get_warnings() == []
    data_section = reader_view.sections[1]
    assert data_section.Name.rstrip(b"\0") == b".data"
    assert data_section.Misc_VirtualSize == 0x10000
    assert data_section.get_data() == bytes(0x10000)
    # pefile's full (not fast) load flags files that are mostly zero; that is expected here.
    warnings = pefile.PE(data=data).get_warnings()
    assert len(warnings) == 1
    assert warnings[0].startswith("Byte 0x00 makes up")

    # Unaligned padding is rounded up to the file alignment on disk only.
    odd = parse_like_reader(build_pe(PESpec(padding=1000)))
    assert odd.sections[1].Misc_VirtualSize == 1000
    assert odd.sections[1].SizeOfRawData == 0x400


def test_write_pe(tmp_path: Path) -> None:
    spec = PESpec(machine="x86", imports=("KERNEL32.dll",))

    written = write_pe(tmp_path / "a.dll", spec)
    assert written == tmp_path / "a.dll"
    assert written.read_bytes() == build_pe(spec)

    from_fields = write_pe(tmp_path / "b.dll", machine="x86", imports=("KERNEL32.dll",))
    assert from_fields.read_bytes() == written.read_bytes()

    defaults = write_pe(tmp_path / "c.dll")
    assert pefile.PE(str(defaults)).FILE_HEADER.Machine == 0x8664
    with pytest.raises(TypeError):
        write_pe(tmp_path / "d.dll", spec, dll=False)


@pytest.mark.parametrize(
    "fields",
    [
        {"machine": "mips"},
        {"imports": ("",)},
        {"delay_imports": ("n\u00e4me.dll",)},
        {"file_version": (1, 2, 3, 0x10000)},
        {"linker_version": (256, 0)},
        {"padding": -1},
    ],
)
def test_rejects_invalid_specs(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        build_pe(PESpec(**fields))  # type: ignore[arg-type]


@pytest.mark.posix_only(reason="mingw-w64's objdump is installed on the Linux side only")
@pytest.mark.parametrize("machine", ["x86", "x64"])
def test_objdump_agrees(machine: str, tmp_path: Path) -> None:
    tool = OBJDUMP[machine]
    require(shutil.which(tool) is not None, f"{tool} not on PATH (apt-get install mingw-w64)")
    path = write_pe(tmp_path / "app.exe", full_spec(machine, dll=False))

    out = subprocess.run([tool, "-p", str(path)], capture_output=True, text=True, check=True)
    assert f"file format {OBJDUMP_FORMAT[machine]}" in out.stdout
    assert re.findall(r"DLL Name: (\S+)", out.stdout) == ["KERNEL32.dll", "liba.dll"]
    assert re.findall(r"^\s+[0-9a-f]+\s+0\s+(f\d)$", out.stdout, re.M) == ["f0", "f1"]
    delay = re.search(r"^Entry d [0-9a-f]+ ([0-9a-f]{8}) Delay Import Directory", out.stdout, re.M)
    assert delay is not None and int(delay.group(1), 16) == 3 * 32
    # resource tree: RT_VERSION -> 1 -> en-US
    assert re.findall(r"Entry: ID: (0x[0-9a-f]+),", out.stdout) == [
        "0x000010",
        "0x000001",
        "0x000409",
    ]


@pytest.mark.posix_only(reason="llvm-readobj is installed on the Linux side only")
@every_machine
def test_llvm_readobj_agrees(machine: str, tmp_path: Path) -> None:
    """The mingw objdump cannot read ARM64 images and does not list delay imports."""
    require(
        shutil.which("llvm-readobj") is not None, "llvm-readobj not on PATH (apt-get install llvm)"
    )
    path = write_pe(tmp_path / "lib.dll", full_spec(machine, dll=True))

    out = subprocess.run(
        ["llvm-readobj", "--file-headers", "--coff-imports", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"Machine: {READOBJ_MACHINE[machine]}" in out.stdout
    assert re.findall(r"^Import \{\n  Name: (\S+)", out.stdout, re.M) == list(IMPORTS)
    assert re.findall(r"^DelayImport \{\n  Name: (\S+)", out.stdout, re.M) == list(DELAY_IMPORTS)
    assert "warning" not in out.stderr.lower()
