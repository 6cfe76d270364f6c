"""`bundle fetch` as a user runs it: sources, fallbacks, mirrors, offline, concurrency.

Network code runs against the real HTTP server of tests/support/httpserver.py on 127.0.0.1, and
against
real pip, pointed by its own environment variables at the pinned wheels already fetched into the
test cache (exactly how a corporate agent points pip at its mirror)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.httpserver import HttpServer
from tests.support.paths import CPU, GPU, REPO
from tests.support.pefactory import PESpec, build_pe
from tests.support.profiles import artifact, profile, source
from tests.support.real_dlls import RealDlls
from tests.support.runs import fetch, pip_env, run_bundle


def artifacts(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    items = data["artifacts"]
    assert isinstance(items, list)
    return items


# --- the acceptance run on the real profile -----------------------------------------------


@pytest.mark.realdata
def test_gpu_fetch_falls_back_from_unreachable_urls_to_pinned_wheels(
    gpu_fetch: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    cache, result = gpu_fetch
    items = artifacts(result)
    assert [item["artifact"] for item in items] == [
        "onnxruntime",
        "cuda-runtime",
        "cublas",
        "cufft",
        "nvrtc",
        "cudnn",
        "msvc-runtime",
    ]
    assert {item["source"] for item in items} == {"pip"}
    assert not any(item["cached"] for item in items)
    with_url = [item for item in items if item["skipped"]]
    assert [item["artifact"] for item in with_url] == [
        "onnxruntime",
        "cuda-runtime",
        "cublas",
        "cufft",
        "nvrtc",
    ]
    for item in with_url:
        (reason,) = item["skipped"]  # type: ignore[misc]
        assert reason.startswith("url: cannot resolve host") and "unreachable" in reason
    # Every archive in the cache has exactly the bytes its pin promises.
    for item in items:
        blob = cache / "blobs" / "sha256" / str(item["sha256"])
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == item["sha256"]
    assert not list((cache / "tmp").iterdir())


@pytest.mark.realdata
def test_second_gpu_fetch_downloads_nothing(
    gpu_fetch: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    cache, _ = gpu_fetch
    # pip pointed nowhere: any attempt to fetch would fail the run.
    again = fetch(
        "--profile", GPU, "--cache-dir", str(cache), "--json",
        env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(cache / "nowhere")},
    )  # fmt: skip
    items = artifacts(again)
    assert all(item["cached"] for item in items)
    assert all(item["skipped"] == [] for item in items)


@pytest.mark.realdata
def test_deps_fetch_uses_the_cached_artifacts(
    gpu_fetch: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    cache, _ = gpu_fetch
    hello = REPO / "examples" / "hello" / "hello.exe"
    deps = run_bundle("deps", "--fetch", "--cache-dir", str(cache), str(hello))
    assert deps.returncode == 0, deps.stdout + deps.stderr
    assert "Bundled: 21 DLLs" in deps.stdout
    assert f"{cache}/extracted/" in deps.stdout


# --- air-gapped agents ------------------------------------------------------------------------


@pytest.mark.realdata
def test_export_then_offline_mirror_in_a_fresh_cache(real_dlls: RealDlls, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    first = fetch(
        "--profile", CPU, "--cache-dir", str(tmp_path / "c1"), "--to", str(mirror), "--json",
        env=pip_env(),
    )  # fmt: skip
    exported = sorted(path.name for path in mirror.iterdir())
    assert exported == sorted(str(item["filename"]) for item in artifacts(first))
    # No network at all: pip has no index, and any HTTP(S) would go to a dead proxy.
    dead = "http://127.0.0.1:9"
    offline = fetch(
        "--profile", CPU, "--cache-dir", str(tmp_path / "c2"),
        "--mirror", str(mirror), "--offline", "--json",
        env={"PIP_NO_INDEX": "1", "HTTPS_PROXY": dead, "HTTP_PROXY": dead},
    )  # fmt: skip
    items = artifacts(offline)
    assert [item["origin"] for item in items] == [str(mirror / name) for name in exported[::-1]]
    assert not any(item["cached"] for item in items)
    # Online with the same mirror: the mirror is preferred, the network is never tried.
    online = fetch(
        "--profile", CPU, "--cache-dir", str(tmp_path / "c3"), "--mirror", str(mirror), "--json",
        env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "nowhere")},
    )  # fmt: skip
    for item in artifacts(online):
        assert str(item["origin"]).startswith(str(mirror))
        assert not any(reason.startswith("url:") for reason in item["skipped"])  # type: ignore[union-attr]


def test_offline_without_mirror_fails_with_exit_8(tmp_path: Path) -> None:
    result = fetch("--profile", CPU, "--cache-dir", str(tmp_path / "c"), "--offline")
    assert result.returncode == 8
    # every artifact the cache lacks is named, with its archives' file names, in one line
    assert f"--offline: 2 of the 2 artifacts of {CPU} are not in the cache" in result.stderr
    assert "onnxruntime-1.19.2-cp311-cp311-win_amd64.whl" in result.stderr
    assert "msvc-runtime 14.44.35112" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.realdata
def test_two_fetches_at_once_share_one_verified_copy(real_dlls: RealDlls, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    command = [
        sys.executable,
        "-m",
        "bundler",
        "fetch",
        "--profile",
        CPU,
        "--cache-dir",
        str(cache),
    ]
    env = {**os.environ, **pip_env()}
    runs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err.decode()
    blobs = [p for p in (cache / "blobs" / "sha256").iterdir() if not p.suffix]
    assert len(blobs) == 2
    for blob in blobs:
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    assert list((cache / "tmp").iterdir()) == []


# --- a small profile of our own, served by the local HTTP server ------------------------------


def dll_bytes() -> bytes:
    return build_pe(PESpec(machine="x64", file_version=(1, 0, 0, 0)))


def make_zip(members: dict[str, bytes], symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def write_profile(folder: Path, archive: bytes, name: str = "tiny-1.0.zip") -> Path:
    digest = hashlib.sha256(archive).hexdigest()
    path = folder / "tiny.toml"
    zip_source = source(
        "url", url=f"https://downloads.invalid/tiny/{name}", sha256=digest, size=len(archive)
    )
    folder_source = source("dir", env="TINY_HOME", subdir="bin")
    tiny = artifact("tiny", "1.0", ["tiny.dll"], zip_source, folder_source, licenses=["LICENSE"])
    path.write_text(profile("tiny", ["tiny.dll"], tiny, description="one zip"))
    return path


def fetch_from_mirror(
    server: HttpServer, tmp_path: Path, archive: bytes, served: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """`bundle fetch` of the tiny profile pinned to `archive`, into tmp_path/cache, from a
    mirror on `server` that serves `served` (the archive itself unless given)."""
    profile = write_profile(tmp_path, archive)
    server.serve_bytes("/m/tiny-1.0.zip", archive if served is None else served)
    return fetch(
        "--profile", str(profile), "--cache-dir", str(tmp_path / "cache"),
        "--mirror", server.url("/m"), "--allow-http",
    )  # fmt: skip


def test_http_mirror_needs_allow_http(http_server: HttpServer, tmp_path: Path) -> None:
    archive = make_zip({"tiny/bin/tiny.dll": dll_bytes(), "tiny/LICENSE": b"MIT"})
    profile = write_profile(tmp_path, archive)
    http_server.serve_bytes("/mirror/tiny-1.0.zip", archive)
    mirror = http_server.url("/mirror")
    cache = str(tmp_path / "cache")

    refused = fetch("--profile", str(profile), "--cache-dir", cache, "--mirror", mirror)
    assert refused.returncode == 8
    assert "plain HTTP" in refused.stderr or "http://" in refused.stderr
    assert http_server.requests_for("/mirror/tiny-1.0.zip") == []

    allowed = fetch(
        "--profile", str(profile), "--cache-dir", cache, "--mirror", mirror, "--allow-http",
        "--json",
    )  # fmt: skip
    (item,) = artifacts(allowed)
    assert item["origin"] == f"{mirror}/tiny-1.0.zip"
    folder = Path(str(item["dll_folders"][0]))  # type: ignore[index]
    assert folder.name == "bin" and (folder / "tiny.dll").read_bytes() == dll_bytes()
    assert (Path(str(item["folder"])) / "tiny" / "LICENSE").read_text() == "MIT"


def test_wrong_bytes_on_a_mirror_stop_the_run(http_server: HttpServer, tmp_path: Path) -> None:
    archive = make_zip({"tiny/bin/tiny.dll": dll_bytes()})
    tampered = archive[:-1] + bytes([archive[-1] ^ 1])
    result = fetch_from_mirror(http_server, tmp_path, archive, served=tampered)
    assert result.returncode == 9
    assert hashlib.sha256(archive).hexdigest() in result.stderr
    assert hashlib.sha256(tampered).hexdigest() in result.stderr
    assert [p for p in (tmp_path / "cache" / "blobs" / "sha256").iterdir()] == []


def test_unsafe_archive_is_refused_with_nothing_written(
    http_server: HttpServer, tmp_path: Path
) -> None:
    archive = make_zip(
        {"tiny/bin/tiny.dll": dll_bytes(), "../evil.dll": b"MZ", "/abs.dll": b"MZ"},
        symlink="tiny/bin/link.dll",
    )
    result = fetch_from_mirror(http_server, tmp_path, archive)
    assert result.returncode == 10
    assert "evil.dll" in result.stderr or "abs.dll" in result.stderr or "link.dll" in result.stderr
    extracted = tmp_path / "cache" / "extracted"
    assert not extracted.exists() or list(extracted.iterdir()) == []
    assert not (tmp_path / "evil.dll").exists() and not (tmp_path / "cache" / "evil.dll").exists()


def test_local_install_is_accepted_by_name_machine_and_version(tmp_path: Path) -> None:
    archive = make_zip({"tiny/bin/tiny.dll": dll_bytes()})
    profile = write_profile(tmp_path, archive)
    home = tmp_path / "tiny-home"
    (home / "bin").mkdir(parents=True)
    cache = str(tmp_path / "cache")

    unset = fetch("--profile", str(profile), "--cache-dir", cache, "--source", "dir")
    assert unset.returncode == 8
    assert "$TINY_HOME is not set" in unset.stderr
    assert "url: not allowed by --source dir" in unset.stderr

    empty = fetch("--profile", str(profile), "--cache-dir", cache, env={"TINY_HOME": str(home)})
    assert empty.returncode == 8 and "has no tiny.dll" in empty.stderr
    assert "cannot resolve host downloads.invalid" in empty.stderr

    (home / "bin" / "tiny.dll").write_bytes(build_pe(PESpec(machine="x86")))
    wrong = fetch("--profile", str(profile), "--cache-dir", cache, env={"TINY_HOME": str(home)})
    assert wrong.returncode == 8 and "is x86, not x64" in wrong.stderr

    (home / "bin" / "tiny.dll").write_bytes(dll_bytes())
    good = fetch(
        "--profile", str(profile), "--cache-dir", cache, "--json", env={"TINY_HOME": str(home)}
    )
    (item,) = artifacts(good)
    assert (item["source"], item["origin"]) == ("dir", str(home / "bin"))
    assert item["skipped"][0].startswith("url: cannot resolve host")  # type: ignore[index]


def test_cache_list_and_clean(http_server: HttpServer, tmp_path: Path) -> None:
    archive = make_zip({"tiny/bin/tiny.dll": dll_bytes()})
    fetched = fetch_from_mirror(http_server, tmp_path, archive)
    assert fetched.returncode == 0, fetched.stderr
    cache = tmp_path / "cache"
    listing = run_bundle("cache", "list", "--cache-dir", str(cache))
    digest = hashlib.sha256(archive).hexdigest()
    assert f"{digest[:16]}" in listing.stdout and "tiny-1.0.zip" in listing.stdout
    assert run_bundle("cache", "clean", "--cache-dir", str(cache)).returncode == 0
    assert not (cache / "extracted").exists()
    assert (cache / "blobs" / "sha256" / digest).is_file()
    assert run_bundle("cache", "clean", "--all", "--cache-dir", str(cache)).returncode == 0
    assert not (cache / "blobs" / "sha256").exists()


def test_verify_rehashes_cached_archives(http_server: HttpServer, tmp_path: Path) -> None:
    archive = make_zip({"tiny/bin/tiny.dll": dll_bytes()})
    profile = write_profile(tmp_path, archive)
    http_server.serve_bytes("/m/tiny-1.0.zip", archive)
    cache = tmp_path / "cache"
    args = ["--profile", str(profile), "--cache-dir", str(cache)]
    first = fetch(*args, "--mirror", http_server.url("/m"), "--allow-http")
    assert first.returncode == 0, first.stderr
    digest = hashlib.sha256(archive).hexdigest()
    blob = cache / "blobs" / "sha256" / digest
    damaged = bytearray(blob.read_bytes())
    damaged[100] ^= 0xFF  # same size: only a full re-hash can tell
    blob.write_bytes(bytes(damaged))
    assert fetch(*args).returncode == 0  # the cheap check trusts the stored file
    verified = fetch(*args, "--verify")
    assert verified.returncode == 9
    assert f"expected {digest}" in verified.stderr
    assert not blob.exists()


def test_pip_serving_other_bytes_stops_the_run(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    (index / "onnxruntime-1.19.2-cp311-cp311-win_amd64.whl").write_bytes(make_zip({"x": b"y"}))
    result = fetch(
        "--profile", CPU, "--cache-dir", str(tmp_path / "cache"), "--source", "pip",
        env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)},
    )  # fmt: skip
    assert result.returncode == 9
    assert "not the pinned 1c3e5d415b78337fa0b1b75291e9ea9fb2a4c1f148eb5811e7212fed02cfffa8" in (
        result.stderr
    )


def test_pip_source_fetches_a_py3_wheel_that_declares_requires_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A py3-none wheel (the EP packs') is asked for as this Python, not as "3" (Python 3.0),
    which pip refuses for every wheel whose metadata declares Requires-Python."""
    from bundler.acquire.sources import pip_download
    from bundler.target.profiles import PipSource

    wheel = "demo_pack-1.0-py3-none-win_amd64.whl"
    metadata = b"Metadata-Version: 2.1\nName: demo-pack\nVersion: 1.0\nRequires-Python: >=3.10\n"
    record = b"demo_pack-1.0.dist-info/METADATA,,\n"
    info = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-win_amd64\n"
    members = {
        "demo_pack/x.dll": b"MZ",
        "demo_pack-1.0.dist-info/METADATA": metadata,
        "demo_pack-1.0.dist-info/WHEEL": info,
        "demo_pack-1.0.dist-info/RECORD": record,
    }
    index, out = tmp_path / "index", tmp_path / "out"
    index.mkdir()
    out.mkdir()
    (index / wheel).write_bytes(make_zip(members))
    digest = hashlib.sha256((index / wheel).read_bytes()).hexdigest()
    source = PipSource("demo-pack", "1.0", wheel, digest)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    fetched = pip_download(source, out)
    assert fetched == out / wheel
    assert hashlib.sha256(fetched.read_bytes()).hexdigest() == digest


def test_a_wheel_pip_wrote_into_the_cache_is_renamed_into_the_store(tmp_path: Path) -> None:
    """pip's download lies in the cache's tmp/: it is hashed where it lies and renamed, so its
    bytes are written once (the store's blob is the very file pip wrote); one that breaks the
    pin is removed and nothing is stored."""
    from bundler.acquire.cache import Cache
    from bundler.errors import IntegrityError

    cache = Cache(tmp_path / "cache", lock_timeout=None)
    cache.prepare()
    data = b"a wheel's bytes" * 1000
    digest = hashlib.sha256(data).hexdigest()
    written = cache.tmp / "pip-1" / "x-1.0-py3-none-win_amd64.whl"
    written.parent.mkdir()
    written.write_bytes(data)
    inode = written.stat().st_ino
    stored = cache.import_own(written, digest, written.name, "pip:x==1.0")
    assert (stored.stat().st_ino, stored.read_bytes()) == (inode, data)
    assert not written.exists()
    assert [entry.origins for entry in cache.entries()] == [("pip:x==1.0",)]

    other = written.parent / "y-1.0-py3-none-win_amd64.whl"
    other.write_bytes(b"other bytes")
    wrong = hashlib.sha256(b"the pinned bytes").hexdigest()
    with pytest.raises(IntegrityError, match=f"does not match the pin {wrong}"):
        cache.import_own(other, wrong, other.name, "pip:y==1.0")
    assert not other.exists() and cache.lookup(wrong) is None
