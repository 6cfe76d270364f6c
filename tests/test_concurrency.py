"""Concurrency: several `bundle build` processes at once, on one cache and on one output folder.

The release is synthetic (tests/support/slowrelease.py), served from 127.0.0.1 by a server that logs
every request, so "downloaded once" is counted on the wire. "Extracted once" is counted from
what each process reports: the `extracting ...: N%` progress lines are printed only as bytes are
actually inflated (bundler/acquire/extract.py's meter), so a process that reused another's tree
prints none.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.httpserver import HttpServer
from tests.support.slowbuilds import ENV, build_command, check_folder_matches_lock, setup
from tests.support.slowrelease import NAME, PATH, make_release
from tests.support.slowrelease import serve_slowly as serve

RATE = 16 << 20  # the download lasts long enough for all four builds to be waiting for it


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
