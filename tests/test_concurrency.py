"""Concurrency: several `bundle build` processes at once, on one cache and on one output folder.

The release is synthetic (tests/support/slowrelease.py), served from 127.0.0.1 by a server that logs
every request, so "downloaded once" is counted on the wire. "Extracted once" is counted from
what each process reports: the `extracting ...: N%` progress lines are printed only as bytes are
actually inflated (bundler/acquire/extract.py's meter), so a process that reused another's tree
prints none.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from bundler.closure.lockfile import read_lock
from bundler.render.doctor_dat import doctor_data
from tests.support.httpserver import HttpServer
from tests.support.slowrelease import DEPS, NAME, PATH, Release, app_exe, make_release, mirror_args
from tests.support.slowrelease import serve_slowly as serve

RATE = 16 << 20  # the download lasts long enough for all four builds to be waiting for it
ENV = {**os.environ, "BUNDLE_DEBUG": "", "NO_PROXY": "127.0.0.1", "BUNDLE_HTTP_TIMEOUT": "10"}


def build_command(
    exe: Path, profile: Path, cache: Path, out: Path, server: HttpServer
) -> list[str]:
    return [
        sys.executable, "-m", "bundler", "build", str(exe), "--profile", str(profile),
        "--cache-dir", str(cache), "--out", str(out), "--no-iss", "--no-postbuild",
        *mirror_args(server),
    ]  # fmt: skip


def start_all(commands: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Start every command before waiting for any, then collect their results."""
    processes = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        for args in commands
    ]
    results = []
    for args, process in zip(commands, processes, strict=True):
        stdout, stderr = process.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(args, process.returncode, stdout, stderr))
    return results


def setup(tmp_path: Path, release: Release) -> tuple[Path, Path]:
    exe = tmp_path / "app" / "app.exe"
    exe.parent.mkdir(parents=True)
    exe.write_bytes(app_exe())
    return exe, release.write_profile(tmp_path)


def check_folder_matches_lock(out: Path) -> dict[str, object]:
    """Exactly the lock's files, each with the lock's hash, and nothing else (no temp file,
    no build lock left behind)."""
    lock = json.loads((out / "bundle.lock.json").read_text())
    expected = {item["name"]: item["sha256"] for item in lock["files"]}
    found = {
        path.relative_to(out).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in out.rglob("*")
        if path.is_file() and path.name not in ("bundle.lock.json", "bundle-doctor.dat")
    }
    assert found == expected
    # the doctor's data file is the lock's view, complete
    written = read_lock(out / "bundle.lock.json")
    assert written is not None
    assert (out / "bundle-doctor.dat").read_text() == doctor_data(written)
    assert {"onnxruntime.dll", *DEPS} <= set(expected)
    return lock


def test_four_builds_on_one_empty_cache_download_and_extract_once(
    tmp_path: Path, http_server: HttpServer
) -> None:
    release = make_release()
    serve(http_server, release.archive, RATE)
    exe, profile = setup(tmp_path, release)
    cache = tmp_path / "cache"
    outs = [tmp_path / f"out-{n}" for n in range(4)]

    results = start_all([build_command(exe, profile, cache, out, http_server) for out in outs])

    for result in results:
        assert result.returncode == 0, result.stderr
    downloads = [r for r in http_server.requests_for(PATH) if r.method == "GET"]
    assert len(downloads) == 1, downloads
    extracted = [r for r in results if f"extracting {NAME}:" in r.stderr]
    assert len(extracted) == 1, [r.stderr for r in results]
    locks = [check_folder_matches_lock(out) for out in outs]
    files = [lock["files"] for lock in locks]
    assert all(
        [(f["name"], f["sha256"]) for f in other] == [(f["name"], f["sha256"]) for f in files[0]]
        for other in files
    )
    blobs = os.listdir(cache / "blobs" / "sha256")
    assert release.sha256 in blobs and os.listdir(cache / "tmp") == []


def test_two_builds_into_one_folder_do_not_corrupt_each_other(
    tmp_path: Path, http_server: HttpServer
) -> None:
    """Both start deploying at the same moment (the cache is warm, so they race straight to
    the copy): one waits for the other's folder lock, then finds the files in place. Several
    rounds, so that a lost race would show."""
    release = make_release(overlay=16 << 20)  # 80 MB to copy: the two copies overlap
    serve(http_server, release.archive, 50 * RATE)
    exe, profile = setup(tmp_path, release)
    cache = tmp_path / "cache"
    warm = build_command(exe, profile, cache, tmp_path / "warm", http_server)
    first = subprocess.run(warm, capture_output=True, text=True, env=ENV)
    assert first.returncode == 0, first.stderr
    for round_ in range(3):
        out = tmp_path / f"shared-{round_}"
        command = build_command(exe, profile, cache, out, http_server)
        results = start_all([command, [*command, "--json"]])
        for result in results:
            assert result.returncode == 0, result.stderr
            assert "Traceback" not in result.stderr
        check_folder_matches_lock(out)
        assert not list(out.glob(".*")), "a temporary file or the build lock was left behind"
    assert len([r for r in http_server.requests_for(PATH) if r.method == "GET"]) == 1
