"""The PE fixtures built by tests/fixtures/build.sh, checked with binutils' objdump.

These tests check the fixtures themselves, independently of `bundler`: if a fixture were
wrong (say the delay import had silently turned into a normal import), the resolver tests
that use it would be testing nothing. objdump is the independent witness here.

GNU objdump (binutils 2.40) does not decode delay imports, so for those the test reads the
"Delay Import Directory" data-directory entry from `objdump -p` and follows the descriptor
(ImgDelayDescr) to the DLL and function names with `objdump -s` hex dumps.
"""

from __future__ import annotations

import filecmp
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from tests.support.mingw import FIXTURES_SCRIPT, GCC, GCC_X86, run_build_script

pytestmark = pytest.mark.mingw

REPO = Path(__file__).resolve().parent.parent
HELLO_DIR = REPO / "examples" / "hello"
OBJDUMP = "x86_64-w64-mingw32-objdump"  # reads pei-i386 as well as pei-x86-64

ARCHES = ("x64", "x86")
EXPECTED_FILES = ("libb.dll", "liba.dll", "libc.dll", "app.exe", "ortapp.exe")
PE_FORMAT = {"x64": "pei-x86-64", "x86": "pei-i386"}
THUNK_SIZE = {"x64": 8, "x86": 4}  # import lookup table entry size
DESCRIPTOR_SIZE = 32  # ImgDelayDescr: 8 x uint32

# Imports a fixture may have: Windows system DLLs and our own DLLs, never the mingw runtime
# (libgcc_s_*.dll, libwinpthread-1.dll, ...), which would make the fixtures depend on files
# nobody deploys.
OWN_DLLS = {"liba.dll", "libb.dll", "libc.dll", "onnxruntime.dll"}
SYSTEM_DLLS = {"kernel32.dll", "msvcrt.dll"}


def run_objdump(*args: str | Path) -> str:
    result = subprocess.run(
        [OBJDUMP, *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    return result.stdout


def private_headers(path: Path) -> str:
    return run_objdump("-p", path)


def file_format(headers: str) -> str:
    match = re.search(r"file format (\S+)", headers)
    assert match, headers[:300]
    return match.group(1)


def imported_dlls(headers: str) -> list[str]:
    """DLL names of the ordinary import directory ("The Import Tables" block only)."""
    match = re.search(r"^The Import Tables.*?(?=^\S|\Z)", headers, re.M | re.S)
    if not match:
        return []
    return re.findall(r"^\tDLL Name: (\S+)$", match.group(0), re.M)


def imported_functions(headers: str, dll: str) -> list[str]:
    """Function names imported from `dll` (the rows under its "DLL Name:" line)."""
    match = re.search(
        rf"^\tDLL Name: {re.escape(dll)}\n\tvma:.*?\n(.*?)(?=^\s*$)", headers, re.M | re.S
    )
    assert match, f"{dll} not in import tables"
    return re.findall(r"^\t[0-9a-f]+\s+\d+\s+(\S+)", match.group(1), re.M)


def header_value(headers: str, name: str) -> int:
    match = re.search(rf"^{name}\s+([0-9a-fA-F]+)$", headers, re.M)
    assert match, f"{name} missing from objdump -p"
    return int(match.group(1), 16)


def read_bytes(path: Path, vma: int, length: int) -> bytes:
    """`length` bytes of the image at virtual address `vma`, from an objdump -s hex dump."""
    dump = run_objdump("-s", f"--start-address={vma:#x}", f"--stop-address={vma + length:#x}", path)
    data = bytearray()
    for line in dump.splitlines():
        # " <address> <hex groups separated by one space>  <ascii>"
        match = re.match(r"^ [0-9a-f]+ ([0-9a-f]+(?: [0-9a-f]+)*)", line)
        if match:
            data += bytes.fromhex(match.group(1).replace(" ", ""))
    return bytes(data)


def read_c_string(path: Path, vma: int) -> str:
    raw = read_bytes(path, vma, 256)
    assert b"\0" in raw, f"unterminated string at {vma:#x}"
    return raw.split(b"\0", 1)[0].decode("ascii")


def delay_imports(path: Path, arch: str) -> dict[str, list[str]]:
    """{dll: [function, ...]} from the PE Delay Import Directory, read via objdump only."""
    headers = private_headers(path)
    match = re.search(
        r"^Entry d ([0-9a-fA-F]+) ([0-9a-fA-F]+) Delay Import Directory$", headers, re.M
    )
    assert match, "no Delay Import Directory entry in objdump -p"
    rva, size = int(match.group(1), 16), int(match.group(2), 16)
    if rva == 0:
        return {}
    base = header_value(headers, "ImageBase")
    table = read_bytes(path, base + rva, size)
    assert len(table) == size

    result: dict[str, list[str]] = {}
    for offset in range(0, size, DESCRIPTOR_SIZE):
        descriptor = struct.unpack_from("<8I", table, offset)
        if not any(descriptor):  # the all-zero terminator
            break
        attributes, name_rva, _module, _iat, int_rva = descriptor[:5]
        assert attributes == 1, "expected an RVA-based (version 2) delay descriptor"
        functions = []
        thunk_size = THUNK_SIZE[arch]
        for index in range(64):
            thunk = read_bytes(path, base + int_rva + index * thunk_size, thunk_size)
            value = int.from_bytes(thunk, "little")
            if value == 0:
                break
            # Import by name: RVA of a hint (2 bytes) followed by the name.
            functions.append(read_c_string(path, base + value + 2))
        result[read_c_string(path, base + name_rva)] = functions
    else:
        pytest.fail("delay import descriptor table has no all-zero terminator")
    return result


def files_in(tree: Path) -> list[str]:
    return sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())


@pytest.mark.parametrize("arch", ARCHES)
def test_build_produces_exactly_the_expected_files(mingw_build: Path, arch: str) -> None:
    assert sorted(os.listdir(mingw_build)) == sorted(ARCHES)
    assert sorted(os.listdir(mingw_build / arch)) == sorted(EXPECTED_FILES)
    for name in EXPECTED_FILES:
        assert (mingw_build / arch / name).stat().st_size > 0


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("name", EXPECTED_FILES)
def test_pe_format_and_only_system_or_own_imports(mingw_build: Path, arch: str, name: str) -> None:
    headers = private_headers(mingw_build / arch / name)
    assert file_format(headers) == PE_FORMAT[arch]
    dlls = {dll.lower() for dll in imported_dlls(headers)}
    assert dlls, "expected at least KERNEL32.dll"
    unexpected = {dll for dll in dlls - OWN_DLLS - SYSTEM_DLLS if not dll.startswith("api-ms-win-")}
    assert not unexpected, f"{name} depends on non-system DLLs: {sorted(unexpected)}"


@pytest.mark.parametrize("arch", ARCHES)
def test_app_imports_liba_and_delay_imports_libc(mingw_build: Path, arch: str) -> None:
    app = mingw_build / arch / "app.exe"
    headers = private_headers(app)
    dlls = imported_dlls(headers)
    assert "liba.dll" in dlls
    assert imported_functions(headers, "liba.dll") == ["liba_value"]
    # libc.dll is reachable only through the delay-import directory, not the import table.
    assert "libc.dll" not in {dll.lower() for dll in dlls}
    assert delay_imports(app, arch) == {"libc.dll": ["libc_value"]}


@pytest.mark.parametrize("arch", ARCHES)
def test_dll_chain_liba_imports_libb(mingw_build: Path, arch: str) -> None:
    headers = private_headers(mingw_build / arch / "liba.dll")
    assert "libb.dll" in imported_dlls(headers)
    assert imported_functions(headers, "libb.dll") == ["libb_value"]
    for name in ("libb.dll", "libc.dll"):
        leaf = private_headers(mingw_build / arch / name)
        assert not OWN_DLLS & {dll.lower() for dll in imported_dlls(leaf)}


@pytest.mark.parametrize("arch", ARCHES)
def test_dlls_export_their_function(mingw_build: Path, arch: str) -> None:
    for name in ("liba.dll", "libb.dll", "libc.dll"):
        headers = private_headers(mingw_build / arch / name)
        function = name.removesuffix(".dll") + "_value"
        # "[Ordinal/Name Pointer] Table" rows: "\t[   0] libb_value"
        assert re.search(rf"^\t\[\s*\d+\] {function}$", headers, re.M), f"{name}: no {function}"


@pytest.mark.parametrize("arch", ARCHES)
def test_ortapp_imports_undecorated_ortgetapibase(mingw_build: Path, arch: str) -> None:
    headers = private_headers(mingw_build / arch / "ortapp.exe")
    assert "onnxruntime.dll" in imported_dlls(headers)
    # On x86 the C symbol is _OrtGetApiBase@0 (__stdcall), but onnxruntime.dll exports the
    # plain name, so that is what must be imported.
    assert imported_functions(headers, "onnxruntime.dll") == ["OrtGetApiBase"]
    assert delay_imports(mingw_build / arch / "ortapp.exe", arch) == {}


def test_fixture_build_is_byte_reproducible(mingw_build: Path, tmp_path: Path) -> None:
    # A different output path (and cwd) than the session build: paths must not leak in.
    again = run_build_script(FIXTURES_SCRIPT, "second/build", GCC, GCC_X86, cwd=tmp_path)
    assert files_in(again) == files_in(mingw_build)
    _, mismatch, errors = filecmp.cmpfiles(mingw_build, again, files_in(mingw_build), shallow=False)
    assert not mismatch and not errors, f"not reproducible: {mismatch + errors}"


def test_hello_build_reproduces_checked_in_exe(mingw_build: Path, tmp_path: Path) -> None:
    # mingw_build is requested for its toolchain check (skip locally / fail in CI without it).
    checked_in = HELLO_DIR / "hello.exe"
    assert checked_in.is_file(), "examples/hello/hello.exe is missing; run build.sh"
    subprocess.run(["bash", str(HELLO_DIR / "build.sh"), str(tmp_path)], check=True)
    assert sorted(os.listdir(tmp_path)) == ["hello.exe"]
    rebuilt = (tmp_path / "hello.exe").read_bytes()
    assert rebuilt == checked_in.read_bytes(), (
        "examples/hello/build.sh no longer reproduces the checked-in hello.exe: rebuild and "
        "commit it (or the toolchain differs from the one named in examples/hello/README.md)"
    )


def test_hello_exe_is_the_x64_ortapp(mingw_build: Path) -> None:
    """Same source, same flags: the fixture and the example must not drift apart."""
    headers = private_headers(HELLO_DIR / "hello.exe")
    assert file_format(headers) == "pei-x86-64"
    assert imported_functions(headers, "onnxruntime.dll") == ["OrtGetApiBase"]
    assert (mingw_build / "x64" / "ortapp.exe").read_bytes() == (
        HELLO_DIR / "hello.exe"
    ).read_bytes()
