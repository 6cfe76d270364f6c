"""`bundle build --archive`: the payload of a bundle packed into a reproducible .zip or .7z.

The bundle folders are real files written here (with a real lock file); every archive is read
back with the stdlib / py7zr and, where installed, with the real `unzip` and `7z` tools
(p7zip-full), which must be there under CI=true.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import py7zr
import pytest

from bundler.closure.lock import LOCK_NAME, Lock, LockedFile
from bundler.closure.lockfile import read_lock, write_lock
from bundler.errors import (
    ArchiveError,
    ConfigError,
    ExitCode,
    InputFileError,
    OutputError,
    PlanFormatError,
)
from bundler.ship.archive import archive_format, write_archive
from bundler.ship.readback import verify_archive
from bundler.ship.sevenzip import BLOCK, THREADS
from tests.support.archives import read_back, sha256
from tests.support.paths import REPO
from tests.support.skips import require

FORMATS = [".zip", ".7z"]
STEM = "hello-1.2.0"
# Payload files of the synthetic bundle. The DLL is larger than the 1 MiB read chunk and not
# very compressible, so streaming and chunk boundaries are exercised; NOTICE is empty.
CONTENT = {
    "onnxruntime.dll": b"MZ" + random.Random(7).randbytes(2_500_000),
    "onnxruntime_providers_shared.dll": b"MZ shared provider " * 4000,
    "licenses/onnxruntime/LICENSE": b"MIT License\n\nCopyright (c) Microsoft Corporation\n",
    "licenses/x/LICENSE": b"x licence\n",
    "licenses/x/NOTICE": b"",
}
APP = b"MZ hello.exe built in place " * 50
NOT_PAYLOAD = {"setup.iss": b"[Setup]\n", "notes.txt": b"not shipped\n", "old.zip": b"PK junk"}


def make_bundle(folder: Path, wrong_hash_for: str | None = None) -> Lock:
    """A bundle folder as `bundle build` leaves it: payload files, an exe built in place (no
    hash in the lock), the lock file, and files that are not part of the payload."""
    for name, data in {**CONTENT, **NOT_PAYLOAD, "hello.exe": APP}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    files = tuple(
        LockedFile(
            name,
            "license" if name.startswith("licenses/") else "bundled",
            sha256(b"other bytes") if name == wrong_hash_for else sha256(data),
            len(data),
        )
        for name, data in CONTENT.items()
    )
    lock = Lock("ort-1.19.2-cpu", "x64", "app-local", files, app="hello.exe")
    write_lock(folder / LOCK_NAME, lock)
    return lock


def expected_members(folder: Path) -> dict[str, str]:
    """Archive name -> SHA-256 of every payload file, lock file included, in sorted order."""
    payload = {**CONTENT, "hello.exe": APP, LOCK_NAME: (folder / LOCK_NAME).read_bytes()}
    return {f"{STEM}/{name}": sha256(payload[name]) for name in sorted(payload)}


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.rglob("*.bundle-tmp"))


@pytest.fixture
def bundle(tmp_path: Path) -> tuple[Path, Lock]:
    folder = tmp_path / "dist"
    folder.mkdir()
    return folder, make_bundle(folder)


@pytest.fixture(params=FORMATS)
def suffix(request: pytest.FixtureRequest) -> str:
    """Each test that takes it runs for each archive format."""
    chosen: str = request.param
    return chosen


@pytest.fixture
def packed(bundle: tuple[Path, Lock], tmp_path: Path, suffix: str) -> Path:
    """The bundle's archive, written beside the folder."""
    folder, lock = bundle
    return write_archive(folder, lock, tmp_path / f"{STEM}{suffix}").path


# `bundle build --archive`'s packing in a process of its own: python -c PACK FOLDER TARGET
PACK = (
    "import sys; from pathlib import Path; from bundler.ship.archive import write_archive; "
    "from bundler.closure.lockfile import read_lock; folder = Path(sys.argv[1]); "
    "write_archive(folder, read_lock(folder / 'bundle.lock.json'), Path(sys.argv[2]))"
)


# --- what goes in ----------------------------------------------------------------------------


def test_members_are_the_payload_under_one_top_folder(
    bundle: tuple[Path, Lock], suffix: str
) -> None:
    folder, lock = bundle
    target = folder / f"{STEM}{suffix}"  # inside the bundle folder, next to files not shipped
    result = write_archive(folder, lock, target)
    again = write_archive(folder, lock, target)  # now the archive itself lies in the folder

    assert read_back(target) == expected_members(folder)
    assert list(read_back(target)) == sorted(expected_members(folder))
    assert again == result
    assert result.path == target
    assert result.members == len(CONTENT) + 2  # the payload, the app, the lock file
    assert result.total_bytes == sum(len(data) for data in CONTENT.values()) + len(APP) + len(
        (folder / LOCK_NAME).read_bytes()
    )
    assert result.archive_size == target.stat().st_size
    assert result.sha256 == sha256(target.read_bytes())
    assert leftovers(folder) == []


def test_progress_reports_every_file_up_to_the_total(
    bundle: tuple[Path, Lock], tmp_path: Path, suffix: str
) -> None:
    folder, lock = bundle
    calls: list[tuple[int, int | None]] = []
    result = write_archive(
        folder, lock, tmp_path / f"{STEM}{suffix}", lambda done, total: calls.append((done, total))
    )
    assert len(calls) == result.members
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert calls[-1] == (result.total_bytes, result.total_bytes)


def test_real_unzip_reads_the_zip(bundle: tuple[Path, Lock], tmp_path: Path) -> None:
    require(shutil.which("unzip") is not None, "unzip is not installed (apt-get install unzip)")
    folder, lock = bundle
    target = write_archive(folder, lock, tmp_path / f"{STEM}.zip").path

    tested = subprocess.run(["unzip", "-t", str(target)], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    listed = subprocess.run(["unzip", "-Z1", str(target)], capture_output=True, text=True)
    names = listed.stdout.splitlines()
    assert names == list(expected_members(folder))
    hashes = {
        name: sha256(subprocess.run(["unzip", "-p", str(target), name], capture_output=True).stdout)
        for name in names
    }
    assert hashes == expected_members(folder)
    verbose = subprocess.run(["zipinfo", "-l", str(target)], capture_output=True, text=True)
    rows = [line for line in verbose.stdout.splitlines() if line.startswith("-")]
    assert len(rows) == len(names) and all(row.startswith("-rw-r--r--") for row in rows)
    assert all("80-Jan-01 00:00" in row or "1980" in row for row in rows), rows


def test_real_7z_reads_the_7z(bundle: tuple[Path, Lock], tmp_path: Path) -> None:
    require(shutil.which("7z") is not None, "7z is not installed (apt-get install p7zip-full)")
    folder, lock = bundle
    target = write_archive(folder, lock, tmp_path / f"{STEM}.7z").path

    tested = subprocess.run(["7z", "t", str(target)], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    members = seven_zip_listing(target)
    assert [member["Path"] for member in members] == list(expected_members(folder))
    assert {member["Modified"][:19] for member in members} == {"1980-01-01 00:00:00"}
    assert {member["Attributes"] for member in members} == {"A -rw-r--r--"}
    hashes = {
        name: sha256(
            subprocess.run(["7z", "x", "-so", str(target), name], capture_output=True).stdout
        )
        for name in (member["Path"] for member in members)
    }
    assert hashes == expected_members(folder)


def test_7z_blocks_compressed_apart_decode_as_one_stream(
    bundle: tuple[Path, Lock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 7z writer compresses blocks on several threads and joins their LZMA2 streams
    (bundler/ship/sevenzip.py). With 64 KiB blocks and a DLL full of CALL rel32 (E8 with an
    operand the x86 filter converts), a cut in the wrong place would change the bytes; the
    real 7z and our read-back decode the joined stream, and the bytes do not depend on the
    number of threads."""
    from bundler.ship import sevenzip

    require(shutil.which("7z") is not None, "7z is not installed (apt-get install p7zip-full)")
    folder, _ = bundle
    calls = (b"\xe8\x10\x00\x00\x00" * 101 + bytes(range(11))) * 4000
    (folder / "calls.dll").write_bytes(calls)
    entry = LockedFile("calls.dll", "bundled", sha256(calls), len(calls))
    lock = Lock("ort-1.19.2-cpu", "x64", "app-local", (entry,), app="hello.exe")
    write_lock(folder / LOCK_NAME, lock)
    monkeypatch.setattr(sevenzip, "BLOCK", 1 << 16)
    cuts: list[int] = []
    compress = sevenzip._compress_block
    monkeypatch.setattr(
        sevenzip, "_compress_block", lambda at, data: cuts.append(at) or compress(at, data)
    )
    archives = []
    for threads in (1, 3):
        monkeypatch.setattr(sevenzip, "THREADS", threads)
        archives.append(write_archive(folder, lock, tmp_path / f"{threads}" / f"{STEM}.7z").path)
    assert len(cuts) > 20 and len(set(cuts)) == len(cuts) // 2
    assert archives[0].read_bytes() == archives[1].read_bytes()
    tested = subprocess.run(["7z", "t", str(archives[0])], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def seven_zip_listing(archive: Path) -> list[dict[str, str]]:
    """`7z l -slt`: one block of `Key = value` lines per member, after the `----------` line
    that ends the archive's own block. Times are shown in local time, hence TZ=UTC."""
    shown = subprocess.run(
        ["7z", "l", "-slt", str(archive)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "TZ": "UTC"},
    ).stdout
    members: list[dict[str, str]] = []
    for block in shown.split("\n----------\n", 1)[1].split("\n\n"):
        fields = dict(line.split(" = ", 1) for line in block.splitlines() if " = " in line)
        if "Path" in fields:
            members.append(fields)
    return members


def test_a_lock_name_outside_the_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "dist"
    folder.mkdir()
    lock = make_bundle(folder)
    (tmp_path / "secret.txt").write_text("not part of any bundle")
    evil = replace(lock, files=(*lock.files, LockedFile("../secret.txt", "bundled", "0" * 64, 1)))
    with pytest.raises(PlanFormatError, match=r"'\.\./secret\.txt'"):
        write_archive(folder, evil, tmp_path / f"{STEM}.zip")
    assert not (tmp_path / f"{STEM}.zip").exists()


# --- reproducible ----------------------------------------------------------------------------


def test_same_payload_gives_the_same_bytes(
    bundle: tuple[Path, Lock], tmp_path: Path, suffix: str
) -> None:
    """A second run in another process, another time zone and umask, into another folder,
    after the sources got other times and modes, writes the identical archive."""
    folder, lock = bundle
    first = write_archive(folder, lock, tmp_path / "one" / f"{STEM}{suffix}")
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (1_700_000_000, 1_700_000_000))
            path.chmod(0o755)
    second = tmp_path / "two" / f"{STEM}{suffix}"
    subprocess.run(
        [sys.executable, "-c", f"import os; os.umask(0o077); {PACK}", str(folder), str(second)],
        check=True,
        cwd=REPO,
        env={**os.environ, "TZ": "Asia/Tokyo"},
    )
    assert second.read_bytes() == first.path.read_bytes()


def test_zip_members_carry_fixed_metadata(bundle: tuple[Path, Lock], tmp_path: Path) -> None:
    folder, lock = bundle
    target = write_archive(folder, lock, tmp_path / f"{STEM}.zip").path
    with zipfile.ZipFile(target) as handle:
        infos = handle.infolist()
    assert {info.date_time for info in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {info.external_attr >> 16 for info in infos} == {0o100644}
    assert {info.create_system for info in infos} == {3}  # Unix, whatever OS packed it
    assert {info.extra for info in infos} == {b""}  # no extended times, uid or gid
    assert {info.compress_type for info in infos} == {zipfile.ZIP_DEFLATED}


def test_7z_members_carry_fixed_metadata(bundle: tuple[Path, Lock], tmp_path: Path) -> None:
    folder, lock = bundle
    target = write_archive(folder, lock, tmp_path / f"{STEM}.7z").path
    with py7zr.SevenZipFile(target) as handle:
        infos = handle.list()
    assert {info.creationtime for info in infos} == {datetime(1980, 1, 1, tzinfo=UTC)}
    assert {info.is_directory for info in infos} == {False}


# --- failures leave nothing behind -----------------------------------------------------------


def test_a_wrong_hash_in_the_lock_keeps_no_archive(tmp_path: Path, suffix: str) -> None:
    folder = tmp_path / "dist"
    folder.mkdir()
    lock = make_bundle(folder, wrong_hash_for="onnxruntime_providers_shared.dll")
    target = tmp_path / f"{STEM}{suffix}"
    with pytest.raises(ArchiveError, match=r"onnxruntime_providers_shared\.dll") as caught:
        write_archive(folder, lock, target)
    assert caught.value.exit_code == ExitCode.ARCHIVE
    assert not target.exists()
    assert leftovers(tmp_path) == []


def test_an_interrupted_run_keeps_the_earlier_archive(
    bundle: tuple[Path, Lock], tmp_path: Path, suffix: str
) -> None:
    """Ctrl-C after the first file: the archive that was there stays, byte for byte."""
    folder, lock = bundle
    target = tmp_path / f"{STEM}{suffix}"
    target.write_bytes(b"an earlier release")

    def interrupt(done: int, total: int | None) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_archive(folder, lock, target, interrupt)
    assert target.read_bytes() == b"an earlier release"
    assert leftovers(tmp_path) == []


def test_read_back_catches_other_bytes_and_other_members(
    bundle: tuple[Path, Lock], packed: Path, suffix: str
) -> None:
    folder, _ = bundle
    target = packed
    expected = list(expected_members(folder).items())
    verify_archive(target, expected, suffix)

    other = [(name, sha256(b"x") if "LICENSE" in name else digest) for name, digest in expected]
    with pytest.raises(ArchiveError, match=f"'{STEM}/licenses/onnxruntime/LICENSE'"):
        verify_archive(target, other, suffix)
    with pytest.raises(ArchiveError, match=f"'{STEM}/extra.dll' is missing"):
        verify_archive(target, [*expected, (f"{STEM}/extra.dll", sha256(b""))], suffix)
    with pytest.raises(ArchiveError, match=f"'{STEM}/hello.exe' is not in the payload"):
        verify_archive(
            target, [item for item in expected if item[0] != f"{STEM}/hello.exe"], suffix
        )


def test_read_back_catches_a_damaged_archive(
    bundle: tuple[Path, Lock], packed: Path, suffix: str
) -> None:
    folder, _ = bundle
    target = packed
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the DLL's compressed bytes
    target.write_bytes(data)
    with pytest.raises(ArchiveError, match=r"cannot be read back|reads back with"):
        verify_archive(target, list(expected_members(folder).items()), suffix)


def test_a_missing_payload_file_says_to_rebuild(bundle: tuple[Path, Lock], tmp_path: Path) -> None:
    folder, lock = bundle
    (folder / "licenses/x/LICENSE").unlink()
    target = tmp_path / f"{STEM}.zip"
    with pytest.raises(InputFileError, match=r"licenses/x/LICENSE.*rebuild") as caught:
        write_archive(folder, lock, target)
    assert caught.value.exit_code == ExitCode.INPUT
    assert not target.exists()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("name", ["hello.tar.gz", "hello", "hello.rar", "hello.zip.bak"])
def test_a_wrong_suffix_fails_before_any_work(tmp_path: Path, name: str) -> None:
    """The folder does not even exist: the suffix is checked first."""
    lock = Lock("ort-1.19.2-cpu", "x64", "app-local", (), app="hello.exe")
    with pytest.raises(ConfigError, match=rf"{name}.*\.zip or .*\.7z") as caught:
        write_archive(tmp_path / "no-such-folder", lock, tmp_path / name)
    assert caught.value.exit_code == ExitCode.CONFIG
    assert list(tmp_path.iterdir()) == []


def test_the_suffix_is_case_insensitive() -> None:
    assert archive_format(Path("HELLO.ZIP")) == ".zip"
    assert archive_format(Path("hello.7Z")) == ".7z"


def test_an_unwritable_target_is_an_output_error(bundle: tuple[Path, Lock], tmp_path: Path) -> None:
    folder, lock = bundle
    blocker = tmp_path / "release"
    blocker.write_text("a file where the archive's folder should be")
    with pytest.raises(OutputError, match="cannot write the archive") as caught:
        write_archive(folder, lock, blocker / f"{STEM}.zip")
    assert caught.value.exit_code == ExitCode.OUTPUT


# --- memory ----------------------------------------------------------------------------------


PEAK_RSS_SCRIPT = (
    PACK + "; import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
)


def peak_rss_of_packing(folder: Path, size: int, target: Path) -> float:
    """Peak RSS in MB of a process that packs one sparse file of `size` zero bytes."""
    folder.mkdir()
    with (folder / "big.dll").open("wb") as handle:
        handle.truncate(size)
    digest = hashlib.sha256()
    zeros = bytes(1 << 20)
    for _ in range(size >> 20):
        digest.update(zeros)
    digest.update(bytes(size % (1 << 20)))
    lock = Lock(
        "p", "x64", "app-local", (LockedFile("big.dll", "bundled", digest.hexdigest(), size),)
    )
    write_lock(folder / LOCK_NAME, lock)
    run = subprocess.run(
        [sys.executable, "-c", PEAK_RSS_SCRIPT, str(folder), str(target)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr
    assert target.is_file()
    return int(run.stdout) / 1024  # ru_maxrss is in KiB on Linux


def test_a_large_file_is_streamed(tmp_path: Path, suffix: str) -> None:
    """Packing a 440 MB larger DLL (sparse zeros: fast to write, read and compress, yet they
    sweep the whole LZMA dictionary) costs at most 64 MB more peak memory: the file is
    streamed, not read whole. The smaller file already fills the .7z writer's pipeline (THREADS
    blocks compressing, one being cut, one being read): with fewer blocks the peak still grows
    with the size, by up to two blocks (64 MiB), which is the design and not a leak. The absolute
    peak depends on what the installed libraries load at import, so it is not pinned here."""
    small_size = (THREADS + 3) * BLOCK
    large_size = small_size + 440_000_000
    small = peak_rss_of_packing(tmp_path / "small", small_size, tmp_path / f"small{suffix}")
    large = peak_rss_of_packing(tmp_path / "large", large_size, tmp_path / f"large{suffix}")
    assert large - small < 64, f"peak RSS {small:.0f} MB, then {large:.0f} MB for 440 MB more"


# --- through `bundle build --archive`, on the real CPU bundle ----------------------------------


@pytest.mark.realdata
def test_build_archive_holds_the_real_bundle_with_the_lock_hashes(
    cpu_cache: Path, tmp_path: Path
) -> None:
    from tests.support.runs import bundle_from_cache, hello_cpu

    out, target = tmp_path / "dist", tmp_path / "hello-1.0.zip"
    result = bundle_from_cache("build", *hello_cpu(out, cpu_cache, "--archive", str(target)))
    assert result.returncode == 0, result.stderr
    assert f"archive: {target}" in result.stdout
    lock = read_lock(out / LOCK_NAME)
    assert lock is not None
    with zipfile.ZipFile(target) as archive:
        names = archive.namelist()
        for item in lock.files:
            data = archive.read(f"hello-1.0/{item.name}")
            assert sha256(data) == item.sha256, item.name
    assert "hello-1.0/hello.exe" in names
    assert "hello-1.0/onnxruntime.dll" in names
    assert "hello-1.0/setup.iss" not in names  # a generated view, not payload
