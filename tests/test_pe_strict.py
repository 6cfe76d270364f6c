"""The PE reader refuses damaged images instead of reading them as "no imports".

Each case damages one structure of a healthy image (synthetic, or real ones built by mingw) and
checks the one-line error a user sees: the file, what is wrong with it. The healthy twin of
every image is read first, so a case cannot pass because the image was broken to begin with.
objdump is the independent witness that a damaged import directory is really damaged.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pefile
import pytest

from bundler.binary.pe import read_pe
from bundler.closure.plan import Status
from bundler.closure.resolve import resolve
from bundler.errors import InputFileError
from bundler.target.profiles import load_profile_file
from bundler.target.system import load_system_policy
from tests.support.pefactory import (
    DELAY_DESCRIPTOR_SIZE,
    DIR_DELAY_IMPORT,
    DIR_IMPORT,
    DIR_RESOURCE,
    IMPORT_DESCRIPTOR_SIZE,
    PEPatch,
    PESpec,
    build_pe,
    write_pe,
)
from tests.support.real_dlls import RealDlls

OUTSIDE = 0x7FFF0000  # an RVA far past every section of these small images
NAME_FIELD = {DIR_IMPORT: 12, DIR_DELAY_IMPORT: 4}
DESCRIPTOR_SIZE = {DIR_IMPORT: IMPORT_DESCRIPTOR_SIZE, DIR_DELAY_IMPORT: DELAY_DESCRIPTOR_SIZE}
TITLE = {DIR_IMPORT: "import directory", DIR_DELAY_IMPORT: "delay-import directory"}
TABLES = pytest.mark.parametrize("table", [DIR_IMPORT, DIR_DELAY_IMPORT], ids=["import", "delay"])
MACHINES = pytest.mark.parametrize("machine", ["x64", "x86"])

Damage = Callable[[PEPatch, int], None]


def healthy(machine: str = "x64") -> bytes:
    """Two imports and two delay imports: every table has more than one entry."""
    return build_pe(
        PESpec(
            machine=machine,
            imports=("KERNEL32.dll", "onnxruntime.dll"),
            delay_imports=("DirectML.dll", "dxgi.dll"),
        )
    )


def damaged(tmp_path: Path, data: bytes, damage: Damage, table: int) -> Path:
    assert read_pe(write(tmp_path / "healthy.dll", data)).imports  # the twin reads fine
    image = PEPatch(data)
    damage(image, table)
    return write(tmp_path / "damaged.dll", image.to_bytes())


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def refused(path: Path, expected: str) -> str:
    with pytest.raises(InputFileError) as caught:
        read_pe(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: corrupt PE file ("), message
    assert expected in message
    assert message.endswith("; copy, download or build the file again.")
    assert "\n" not in message
    return message


# --- the directory itself ------------------------------------------------------------------------


@MACHINES
@TABLES
def test_directory_outside_every_section(tmp_path: Path, machine: str, table: int) -> None:
    path = damaged(tmp_path, healthy(machine), lambda i, t: i.set_directory(t, OUTSIDE), table)
    refused(path, f"the {TITLE[table]} (RVA 0x{OUTSIDE:x}) points outside every section")


@TABLES
def test_directory_past_the_file_data_of_its_section(tmp_path: Path, table: int) -> None:
    """The section is larger in memory than in the file: the loader would only zero-fill there."""

    def damage(image: PEPatch, table: int) -> None:
        rdata = image.section(".rdata")
        image.set_section(".rdata", virtual_size=0x4000)
        image.set_directory(table, rdata.rva + rdata.raw_size + 0x100)

    path = damaged(tmp_path, healthy(), damage, table)
    refused(path, f"the {TITLE[table]} (RVA 0x")
    refused(path, "points past the data of section .rdata in the file")


@MACHINES
@TABLES
def test_chain_without_terminator(tmp_path: Path, machine: str, table: int) -> None:
    """The all-zero entry that ends the table is overwritten by a copy of the entry before it,
    so the table runs to the end of the section's data. (The table is the last thing in the
    section here.) pefile took the short read there for the end: "no more imports"."""
    names = ("KERNEL32.dll", "onnxruntime.dll")
    spec = (
        PESpec(machine=machine, imports=names)
        if table == DIR_IMPORT
        else PESpec(machine=machine, delay_imports=names)
    )

    def damage(image: PEPatch, table: int) -> None:
        *entries, terminator = image.descriptors(table)
        assert terminator + DESCRIPTOR_SIZE[table] == image.section(".rdata").data_end_rva
        image.write(terminator, image.read(entries[-1], DESCRIPTOR_SIZE[table]))

    data = build_pe(spec)
    healthy_info = read_pe(write(tmp_path / "healthy.dll", data))
    assert healthy_info.imports + healthy_info.delay_imports == names
    image = PEPatch(data)
    damage(image, table)
    path = write(tmp_path / "damaged.dll", image.to_bytes())
    refused(path, f"the {TITLE[table]} has no terminating entry: it runs off the end of section")


@TABLES
def test_damaged_terminator_is_an_entry_without_a_name(tmp_path: Path, table: int) -> None:
    def damage(image: PEPatch, table: int) -> None:
        terminator = image.descriptors(table)[-1]
        image.write(terminator, b"\x01")

    path = damaged(tmp_path, healthy(), damage, table)
    refused(path, f"entry 3 of the {TITLE[table]} names no DLL")


# --- the DLL names -------------------------------------------------------------------------------


def set_name(image: PEPatch, table: int, rva: int, entry: int = 0) -> None:
    image.write_u32(image.descriptors(table)[entry] + NAME_FIELD[table], rva)


@MACHINES
@TABLES
def test_name_outside_every_section(tmp_path: Path, machine: str, table: int) -> None:
    path = damaged(tmp_path, healthy(machine), lambda i, t: set_name(i, t, OUTSIDE, 1), table)
    refused(
        path,
        f"the DLL name of entry 2 of the {TITLE[table]} (RVA 0x{OUTSIDE:x}) points outside "
        "every section",
    )


@TABLES
def test_name_that_runs_off_the_end_of_the_file(tmp_path: Path, table: int) -> None:
    """The last section's raw data ends the file; its last bytes are not zero and a name is
    made to start there."""

    def damage(image: PEPatch, table: int) -> None:
        last = image.sections[-1]
        assert last.raw_offset + last.raw_size == len(image.data)
        image.set_section(last.name, virtual_size=last.raw_size)
        image.write(last.rva + last.raw_size - 6, b"abcdef")
        set_name(image, table, last.rva + last.raw_size - 6)

    path = damaged(tmp_path, healthy(), damage, table)
    refused(path, f"the DLL name of entry 1 of the {TITLE[table]} runs off the end of section")


@TABLES
def test_empty_name(tmp_path: Path, table: int) -> None:
    def damage(image: PEPatch, table: int) -> None:
        set_name(image, table, image.descriptors(table)[-1])  # the all-zero terminator

    path = damaged(tmp_path, healthy(), damage, table)
    refused(path, f"the DLL name of entry 1 of the {TITLE[table]} is empty")


@TABLES
def test_name_that_is_no_file_name(tmp_path: Path, table: int) -> None:
    def damage(image: PEPatch, table: int) -> None:
        name = image.u32(image.descriptors(table)[0] + NAME_FIELD[table])
        image.write(name, b"\x07\xfe|?")

    path = damaged(tmp_path, healthy(), damage, table)
    refused(path, f"the DLL name of entry 1 of the {TITLE[table]} is not a file name")


@MACHINES
def test_delay_entry_that_pefile_drops_without_a_warning(tmp_path: Path, machine: str) -> None:
    """The first function of a delay-imported DLL named by bytes in code (its INT entry points
    into .text): pefile leaves the whole entry out and records no warning. The strict walk
    still sees the entry, so the two readings disagree and the read fails."""

    def damage(image: PEPatch, table: int) -> None:
        name_table = image.u32(image.descriptors(table)[1] + 16)  # rvaINT
        image.write_u32(name_table, image.section(".text").rva)

    path = damaged(tmp_path, healthy(machine), damage, DIR_DELAY_IMPORT)
    refused(path, "the delay-import directory entry for dxgi.dll is damaged")


# --- headers, sections, certificate, warnings ----------------------------------------------------


def test_headers_cut_inside_the_optional_header(tmp_path: Path) -> None:
    """pefile pads this with zeros and reads an image with no sections and no imports."""
    path = write(tmp_path / "cut.exe", healthy()[:0x100])
    with pytest.raises(InputFileError, match=r"cut\.exe: truncated PE file \(its headers end"):
        read_pe(path)


def test_section_header_pefile_skips(tmp_path: Path) -> None:
    """An all-zero section header ends pefile's section table early: the sections after it
    would silently have no data."""
    image = PEPatch(healthy())
    second = image.sections[1].header_offset
    image.data[second : second + 40] = bytes(40)
    path = write(tmp_path / "holes.dll", image.to_bytes())
    refused(path, "section header 2 of 3 is damaged")


def test_certificate_table_cut_off(tmp_path: Path) -> None:
    """The signature is the last thing in a signed file: a short download loses it first,
    and no section is cut."""
    data = build_pe(PESpec(imports=("KERNEL32.dll",), signed=True))
    path = write(tmp_path / "signed.dll", data[:-8])
    with pytest.raises(InputFileError, match=r"truncated PE file \(the certificate table ends"):
        read_pe(path)
    assert read_pe(write(tmp_path / "whole.dll", data)).signed


def test_pefile_warning_in_the_version_resource_is_an_error(tmp_path: Path) -> None:
    """The version resource's data entry points outside the file: pefile warns and reads
    no version; we would otherwise report "no version" for a damaged file."""
    data = build_pe(PESpec(imports=("KERNEL32.dll",), file_version=(1, 2, 3, 4)))
    image = PEPatch(data)
    resource = image.directory(DIR_RESOURCE)[0]
    image.write_u32(resource + 72, OUTSIDE)  # IMAGE_RESOURCE_DATA_ENTRY.OffsetToData
    path = write(tmp_path / "version.dll", image.to_bytes())
    assert read_pe(write(tmp_path / "healthy.dll", data)).file_version == (1, 2, 3, 4)
    refused(path, "version")


@pytest.mark.parametrize("machine", ["x64", "x86", "arm64"])
def test_a_healthy_image_with_everything_is_read(tmp_path: Path, machine: str) -> None:
    """The strict checks leave well-formed images alone (no false positives)."""
    spec = PESpec(
        machine=machine,
        imports=("KERNEL32.dll", "a.dll"),
        delay_imports=("b.dll",),
        file_version=(1, 2, 3, 4),
        product_name="P",
        managed=True,
        signed=True,
    )
    info = read_pe(write_pe(tmp_path / "all.dll", spec))
    assert (info.imports, info.delay_imports) == (("KERNEL32.dll", "a.dll"), ("b.dll",))
    assert (info.file_version, info.product_name, info.managed, info.signed) == (
        (1, 2, 3, 4),
        "P",
        True,
        True,
    )


# --- real images built by mingw ------------------------------------------------------------------


@pytest.mark.mingw
@pytest.mark.parametrize("arch", ["x64", "x86"])
@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda i: i.set_directory(DIR_IMPORT, OUTSIDE), "import directory (RVA 0x7fff0000)"),
        (lambda i: i.set_directory(DIR_DELAY_IMPORT, OUTSIDE), "delay-import directory (RVA"),
        (
            lambda i: set_name(i, DIR_IMPORT, OUTSIDE),
            "the DLL name of entry 1 of the import directory",
        ),
    ],
    ids=["import-outside", "delay-outside", "name-outside"],
)
def test_damaged_mingw_app(
    mingw_build: Path, tmp_path: Path, arch: str, damage: Callable[[PEPatch], None], expected: str
) -> None:
    app = mingw_build / arch / "app.exe"
    info = read_pe(app)
    assert "liba.dll" in info.imports and info.delay_imports == ("libc.dll",)
    image = PEPatch(app.read_bytes())
    damage(image)
    refused(write(tmp_path / "app.exe", image.to_bytes()), expected)


@pytest.mark.mingw
def test_objdump_agrees_the_import_table_is_lost(mingw_build: Path, tmp_path: Path) -> None:
    """The issue's own case, seen by an independent reader: binutils cannot find the import
    table either, so refusing the file is right (and reading it as "no imports" was wrong)."""
    image = PEPatch((mingw_build / "x64" / "ortapp.exe").read_bytes())
    image.set_directory(DIR_IMPORT, OUTSIDE)
    path = write(tmp_path / "ortapp.exe", image.to_bytes())
    objdump = shutil.which("x86_64-w64-mingw32-objdump")
    assert objdump is not None
    headers = subprocess.run([objdump, "-p", str(path)], capture_output=True, text=True).stdout
    assert "There is an import table, but the section containing it could not be found" in headers
    refused(path, "the import directory (RVA 0x7fff0000) points outside every section")


@pytest.mark.mingw
def test_every_mingw_fixture_reads(mingw_build: Path) -> None:
    for path in sorted(mingw_build.glob("*/*.*")):
        assert read_pe(path).imports, path


@pytest.mark.realdata
def test_every_real_dll_reads(real_dlls: RealDlls) -> None:
    """ORT, CUDA, cuDNN and MSVC DLLs from the pinned wheels: no false positives."""
    count = 0
    for folder in real_dlls.folders.values():
        for path in sorted(folder.glob("*.dll")):
            assert read_pe(path).imports, path
            count += 1
    assert count >= 20


# --- DLLs in search folders and audited folders --------------------------------------------------

PROFILE = """
schema_version = 1
name = "strict"
description = "test profile"
architecture = "x64"
min_windows = "10.0.10240"
vc_runtime = "app-local"
roots = []
"""


def corrupt_dll(path: Path) -> Path:
    image = PEPatch(build_pe(PESpec(imports=("KERNEL32.dll", "cudart64_12.dll"))))
    image.set_directory(DIR_IMPORT, OUTSIDE)
    return write(path, image.to_bytes())


def test_corrupt_dll_in_a_search_folder(tmp_path: Path) -> None:
    """Reported by name either way: as a finding and a note on the name (deps, audit), or as
    the error that stops the resolution (build)."""
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("onnxruntime.dll",))
    (tmp_path / "bad").mkdir()
    bad = corrupt_dll(tmp_path / "bad" / "onnxruntime.dll")
    good = write_pe(tmp_path / "good" / "onnxruntime.dll", imports=("KERNEL32.dll",))
    profile_path = write(tmp_path / "strict.toml", PROFILE.encode())
    args = ([read_pe(app)], load_profile_file(profile_path), load_system_policy())

    plan = resolve(*args, [tmp_path / "bad"])
    (item,) = [f for f in plan.files if f.key == "onnxruntime.dll"]
    assert item.status is Status.MISSING and item.note == f"{bad} is unreadable"
    (finding,) = [f for f in plan.findings if f.kind == "unreadable"]
    assert finding.path == str(bad) and "import directory" in finding.message

    plan = resolve(*args, [tmp_path / "bad", tmp_path / "good"])
    (item,) = [f for f in plan.files if f.key == "onnxruntime.dll"]
    assert item.source == str(good)
    assert [f.path for f in plan.findings if f.kind == "unreadable"] == [str(bad)]

    expected = rf"^{re.escape(str(bad))}: corrupt PE file \(the import directory"
    with pytest.raises(InputFileError, match=expected):
        resolve(*args, [tmp_path / "bad", tmp_path / "good"], unreadable="error")


def test_corrupt_dll_in_an_audited_folder(tmp_path: Path) -> None:
    from bundler.audit.report import scan_folder  # here: only this test depends on the audit module

    write_pe(tmp_path / "app.exe", dll=False, imports=("onnxruntime.dll",))
    corrupt_dll(tmp_path / "onnxruntime.dll")
    write_pe(tmp_path / "fine.dll", imports=("KERNEL32.dll",))
    files = scan_folder(tmp_path)
    assert set(files.unreadable) == {"onnxruntime.dll"}
    assert "the import directory (RVA 0x7fff0000)" in files.unreadable["onnxruntime.dll"]
    assert set(files.pe) == {"app.exe", "fine.dll"}


@pytest.mark.parametrize("where", ["__init__", "parse_data_directories"])
def test_any_other_pefile_failure_is_our_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """No such input is known (the fuzz tests look for one), but pefile is not ours: an
    IndexError deep inside it must still reach the user as a PE error naming the file."""
    path = write(tmp_path / "odd.dll", healthy())

    def fails(*args: object, **kwargs: object) -> None:
        raise IndexError("list index out of range")

    monkeypatch.setattr(pefile.PE, where, fails)
    refused(path, "pefile cannot read its")
    refused(path, "IndexError: list index out of range")
