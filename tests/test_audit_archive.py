"""`bundle audit` of a .zip/.7z as shipped, and --ignore suppressions.

An archive is judged like the folder it holds: the same findings, its own lock file checked,
places named inside the archive (never the scratch folder it was unpacked into, which is gone
when the audit ends), and an unsafe or damaged archive refused with nothing left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, cast

import py7zr
import pytest

from bundler.closure.lock import LOCK_NAME
from tests.support.audits import audit_cli, codes, found
from tests.support.locks import lock_for
from tests.support.paths import GPU, REPO
from tests.support.pefactory import PESpec
from tests.support.synthetic_gpu import synthetic_gpu


def zip_folder(folder: Path, archive: Path, top: str | None = "hello-1.0") -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as handle:
        for path in sorted(folder.iterdir()):
            handle.write(path, f"{top}/{path.name}" if top else path.name)
    return archive


def sevenzip_folder(folder: Path, archive: Path, top: str = "hello-1.0") -> Path:
    with py7zr.SevenZipFile(archive, "w") as handle:
        for path in sorted(folder.iterdir()):
            handle.write(path, f"{top}/{path.name}")
    return archive


def entries(data: dict[str, object], key: str) -> list[dict[str, Any]]:
    """A list of finding records from the --json document."""
    return cast(list[dict[str, Any]], data[key])


def audit_in(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with its scratch space confined to `tmp`, so a test can see what is left."""
    return subprocess.run(
        [sys.executable, "-m", "bundler", "audit", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp), "BUNDLE_DEBUG": ""},
        cwd=REPO,
    )


@pytest.fixture
def broken_folder(tmp_path: Path) -> Path:
    """A GPU folder with two known problems: no cudnn64_9.dll (BA101 at start-up, through the
    provider) and a shipped nvcuda.dll (BA301)."""
    return synthetic_gpu(
        tmp_path / "bundle", without=("cudnn64_9.dll",), **{"nvcuda.dll": PESpec()}
    )


@pytest.mark.parametrize("pack", [zip_folder, sevenzip_folder], ids=["zip", "7z"])
def test_an_archive_gives_the_findings_of_its_folder(
    broken_folder: Path, tmp_path: Path, pack: object
) -> None:
    suffix = ".zip" if pack is zip_folder else ".7z"
    archive = pack(broken_folder, tmp_path / f"hello-1.0{suffix}")  # type: ignore[operator]
    folder_data, folder_code = audit_cli(str(broken_folder), "--profile", GPU)
    data, code = audit_cli(str(archive), "--profile", GPU)
    assert code == folder_code == 17
    assert [(f["code"], f["files"]) for f in entries(data, "findings")] == [
        (f["code"], f["files"]) for f in entries(folder_data, "findings")
    ]
    assert {"BA101", "BA301"} <= set(found(data))
    assert data["archive"] == str(archive)
    assert data["folder"] == str(archive / "hello-1.0")


def test_an_archive_without_a_top_folder_is_its_own_folder(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "bundle")
    archive = zip_folder(folder, tmp_path / "flat.zip", top=None)
    data, code = audit_cli(str(archive), "--profile", GPU)
    assert code == 0, data["findings"]
    assert data["folder"] == str(archive)


def test_the_archives_lock_file_is_checked_and_names_places_inside(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "bundle")
    lock_for(folder)
    with (folder / "cudart64_12.dll").open("r+b") as handle:  # after the lock was written
        handle.seek(200)
        byte = handle.read(1)
        handle.seek(200)
        handle.write(bytes([byte[0] ^ 0xFF]))
    archive = zip_folder(folder, tmp_path / "shipped.zip")
    result = audit_in(tmp_path, str(archive))  # no --profile: the lock file's
    assert result.returncode == 17, result.stderr
    assert f"Audit of {archive / 'hello-1.0'} (unpacked from the archive)" in result.stdout
    assert "verified against bundle.lock.json" in result.stdout
    assert "BA401  cudart64_12.dll" in result.stdout
    assert "bundle-audit-" not in result.stdout  # the scratch folder is never shown
    data, _ = audit_cli(str(archive))
    assert data["lock"] == str(archive / "hello-1.0" / LOCK_NAME)
    assert [f["files"] for f in found(data)["BA401"]] == [["cudart64_12.dll"]]
    assert not list(tmp_path.glob("bundle-audit-*")), "scratch folder left behind"


@pytest.mark.parametrize(
    ("member", "reason"),
    [("../evil.dll", "'..'"), ("/abs/evil.dll", "absolute")],
    ids=["dotdot", "absolute"],
)
def test_an_unsafe_archive_is_refused_and_nothing_is_left(
    tmp_path: Path, member: str, reason: str
) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("hello-1.0/hello.exe", b"MZ")
        handle.writestr(member, b"MZ")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = audit_in(scratch, str(archive))
    assert result.returncode == 10, result.stderr
    line = result.stderr.strip()
    assert line.count("\n") == 0 and "Traceback" not in line
    assert str(archive) in line and "cannot be audited" in line and reason in line
    assert list(scratch.iterdir()) == []
    assert not (tmp_path / "evil.dll").exists()


def test_a_damaged_archive_is_an_archive_error(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "bundle")
    archive = zip_folder(folder, tmp_path / "cut.zip")
    archive.write_bytes(archive.read_bytes()[:-300])  # the central directory is gone
    result = audit_in(tmp_path, str(archive))
    assert result.returncode == 10
    assert "corrupt archive" in result.stderr and "cannot be audited" in result.stderr


# --- --ignore ----------------------------------------------------------------------------------


def test_ignore_moves_a_code_out_of_the_verdict(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "bundle", (), **{"nvcuda.dll": PESpec()})
    assert "BA301" in codes(folder)
    data, code = audit_cli(str(folder), "--profile", GPU, "--strict", "--ignore", "BA301")
    assert "BA301" not in found(data)
    assert [f["code"] for f in entries(data, "suppressed")] == ["BA301"]
    assert data["summary"]["error"] == 0  # type: ignore[index]
    assert code == 0, data["findings"]


def test_ignore_by_name_and_file_pattern(tmp_path: Path) -> None:
    extra = {"nvcuda.dll": PESpec(), "nvml.dll": PESpec()}
    folder = synthetic_gpu(tmp_path / "bundle", (), **extra)
    data, code = audit_cli(
        str(folder), "--profile", GPU, "--ignore", "driver-dll-shipped:NVML*.dll"
    )
    assert code == 17
    assert [f["files"] for f in found(data)["BA301"]] == [["nvcuda.dll"]]
    assert [f["files"] for f in entries(data, "suppressed")] == [["nvml.dll"]]


def test_ignore_shows_what_it_hid_in_the_table(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "bundle", (), **{"nvcuda.dll": PESpec()})
    result = audit_in(tmp_path, str(folder), "--profile", GPU, "--ignore", "BA301")
    assert result.returncode == 0, result.stdout
    assert "SUPPRESSED by --ignore (1, not counted)" in result.stdout
    assert "BA301  nvcuda.dll" in result.stdout


def test_an_unknown_ignore_code_is_a_usage_error(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "bundle")
    result = audit_in(tmp_path, str(folder), "--ignore", "BA999")
    assert result.returncode == 14
    assert "--ignore 'BA999'" in result.stderr and "not a finding code" in result.stderr
    assert result.stdout == ""


def test_the_json_document_lists_suppressed_and_archive_keys(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "bundle")
    data, code = audit_cli(str(folder), "--profile", GPU)
    assert code == 0
    assert data["suppressed"] == [] and data["archive"] is None and data["load_proof"] is None
    json.dumps(data)  # round-trips
