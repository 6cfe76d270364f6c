"""`bundle build` of the slow release (tests/support/slowrelease.py) in child processes, as the
concurrency and lock tests run it: the environment (ENV), the command line (`build_command`),
the app and profile in a test's folder (`setup`), and the check that an output folder holds
exactly its lock's files (`check_folder_matches_lock`)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from bundler.closure.lockfile import read_lock
from bundler.closure.times import TIMES_NAME
from bundler.render.doctor_dat import doctor_data
from tests.support.httpserver import HttpServer
from tests.support.slowrelease import DEPS, Release, app_exe, mirror_args

ENV = {**os.environ, "BUNDLE_DEBUG": "", "NO_PROXY": "127.0.0.1", "BUNDLE_HTTP_TIMEOUT": "10"}


def build_command(
    exe: Path, profile: Path, cache: Path, out: Path, server: HttpServer
) -> list[str]:
    return [
        sys.executable, "-m", "bundler", "build", str(exe), "--profile", str(profile),
        "--cache-dir", str(cache), "--out", str(out), "--no-iss", "--no-postbuild",
        *mirror_args(server),
    ]  # fmt: skip


def setup(tmp_path: Path, release: Release) -> tuple[Path, Path]:
    exe = tmp_path / "app" / "app.exe"
    exe.parent.mkdir(parents=True)
    exe.write_bytes(app_exe())
    return exe, release.write_profile(tmp_path)


def check_folder_matches_lock(out: Path) -> dict[str, object]:
    """Exactly the lock's files, each with the lock's hash, and nothing else (no temp file,
    no build lock left behind) beside the lock, the doctor's data and the build's local note
    of its files' times."""
    lock = json.loads((out / "bundle.lock.json").read_text())
    expected = {item["name"]: item["sha256"] for item in lock["files"]}
    found = {
        path.relative_to(out).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in out.rglob("*")
        if path.is_file() and path.name not in ("bundle.lock.json", "bundle-doctor.dat", TIMES_NAME)
    }
    assert found == expected
    # the doctor's data file is the lock's view, complete
    written = read_lock(out / "bundle.lock.json")
    assert written is not None
    assert (out / "bundle-doctor.dat").read_text() == doctor_data(written)
    assert {"onnxruntime.dll", *DEPS} <= set(expected)
    return lock
