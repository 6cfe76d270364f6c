"""Tier 1: the PE reader on synthetic images, and its errors as a user sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.binary.pe import read_pe
from bundler.errors import InputFileError
from tests.support.paths import REPO
from tests.support.pefactory import PESpec, build_pe, write_pe
from tests.support.runs import run_bundle


@pytest.mark.parametrize("machine", ["x86", "x64", "arm64"])
def test_machine_is_read(tmp_path: Path, machine: str) -> None:
    info = read_pe(write_pe(tmp_path / "a.dll", machine=machine))
    assert info.machine == machine


def test_exe_or_dll(tmp_path: Path) -> None:
    assert read_pe(write_pe(tmp_path / "a.exe", dll=False)).kind == "exe"
    assert read_pe(write_pe(tmp_path / "a.dll", dll=True)).kind == "dll"


def test_imports_and_delay_imports_keep_order_and_spelling(tmp_path: Path) -> None:
    path = write_pe(
        tmp_path / "a.dll",
        imports=("KERNEL32.dll", "Foo.DLL"),
        delay_imports=("DirectML.dll", "dxgi.dll"),
    )
    info = read_pe(path)
    assert info.imports == ("KERNEL32.dll", "Foo.DLL")
    assert info.delay_imports == ("DirectML.dll", "dxgi.dll")


def test_linker_and_file_version(tmp_path: Path) -> None:
    info = read_pe(
        write_pe(tmp_path / "a.dll", linker_version=(14, 40), file_version=(1, 19, 24, 903))
    )
    assert info.linker_version == (14, 40)
    assert info.file_version == (1, 19, 24, 903)
    assert read_pe(write_pe(tmp_path / "b.dll")).file_version is None


def test_product_name_from_the_version_resource(tmp_path: Path) -> None:
    named = write_pe(
        tmp_path / "app.exe", dll=False, file_version=(2, 0, 0, 0), product_name="Ünï Demo"
    )
    assert read_pe(named).product_name == "Ünï Demo"
    unnamed = write_pe(tmp_path / "plain.exe", dll=False, file_version=(2, 0, 0, 0))
    assert read_pe(unnamed).product_name is None


def test_the_example_app_names_itself() -> None:
    assert read_pe(REPO / "examples" / "hello" / "hello.exe").product_name == "hello"


def test_managed_and_signed_flags(tmp_path: Path) -> None:
    plain = read_pe(write_pe(tmp_path / "plain.dll"))
    assert (plain.managed, plain.signed) == (False, False)
    both = read_pe(write_pe(tmp_path / "both.dll", managed=True, signed=True))
    assert (both.managed, both.signed) == (True, True)


def test_not_a_pe_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "readme.dll"
    path.write_text("hello, not a DLL\n")
    with pytest.raises(InputFileError, match=r"readme\.dll: not a valid PE file"):
        read_pe(path)


def test_truncated_file_is_reported(tmp_path: Path) -> None:
    data = build_pe(PESpec(imports=("KERNEL32.dll",), padding=8192))
    path = tmp_path / "cut.dll"
    path.write_bytes(data[: len(data) - 4096])
    with pytest.raises(InputFileError, match=r"cut\.dll: truncated PE file"):
        read_pe(path)


def test_headers_only_fragment_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "stub.dll"
    path.write_bytes(build_pe(PESpec())[:80])
    with pytest.raises(InputFileError, match=r"stub\.dll"):
        read_pe(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="does not exist"):
        read_pe(tmp_path / "nope.exe")
    with pytest.raises(InputFileError, match="is a folder, not a file"):
        read_pe(tmp_path)


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"MZ but nothing else", "not a valid PE file"), (b"", "not a valid PE file")],
)
def test_cli_gives_one_line_and_exit_code_4(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "app.exe"
    path.write_bytes(content)
    result = run_bundle("deps", str(path), "--profile", "ort-1.19.2-cpu")
    assert result.returncode == 4
    assert result.stderr.count("\n") == 1
    assert str(path) in result.stderr and expected in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_truncated_exe_one_line(tmp_path: Path) -> None:
    data = build_pe(PESpec(dll=False, imports=("onnxruntime.dll",), padding=8192))
    path = tmp_path / "app.exe"
    path.write_bytes(data[:-5000])
    result = run_bundle("deps", str(path))
    assert result.returncode == 4
    assert result.stderr.startswith(f"error: {path}: truncated PE file")
    assert result.stderr.count("\n") == 1
