"""The kept libraries behind the cache: platformdirs finds the cache folder, filelock takes the
cross-process locks (bundler/config/cache_root.py, bundler/disk/process_locks.py).

What a user sees is checked through the CLI: a build that has to wait for another process says
so, `$BUNDLE_LOCK_TIMEOUT` turns a wait that lasts too long into exit 20 with one line, and an
output folder lock leaves no file behind. The other process is a real one holding the lock
(HOLDER), so the locks are taken across processes exactly as two builds take them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bundler.config.cache_root import default_cache_dir
from bundler.errors import ExitCode
from bundler.ship.deploy import BUILD_LOCK
from tests.support.httpserver import HttpServer
from tests.support.slowbuilds import ENV, build_command, check_folder_matches_lock, setup
from tests.support.slowrelease import NAME, Release, make_release, mirror_args
from tests.support.slowrelease import serve_slowly as serve

RATE = 64 << 20

# Holds `argv[1]` (removed on release, as the output folder lock is) until stdin is closed.
HOLDER = """
import sys
from pathlib import Path
from bundler.disk.process_locks import file_lock
with file_lock(Path(sys.argv[1]), "the test's holder", limit=None, remove=sys.argv[2] == "remove"):
    print("held", flush=True)
    sys.stdin.read()
"""

# Many rounds of a critical section under one removed-on-release lock: creating `inside` with
# O_EXCL fails if another process is inside at the same moment; the counter is read and
# written back without any other protection, so an overlap would also lose an increment.
WORKER = """
import os, sys
from pathlib import Path
from bundler.disk.process_locks import file_lock
lock, inside, counter, rounds = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
for _ in range(rounds):
    with file_lock(lock, "the counter", limit=None, remove=True):
        os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        counter.write_text(str(int(counter.read_text()) + 1))
        os.unlink(inside)
"""


@contextmanager
def held(lock: Path, *, remove: bool = True) -> Iterator[None]:
    """`lock` held by another process for the duration of the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock), "remove" if remove else "keep"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.communicate(timeout=30)  # closes its stdin: the holder releases and exits
        assert holder.returncode == 0


def wait_for_text(path: Path, text: str, process: subprocess.Popen[str], limit: float) -> None:
    deadline = time.monotonic() + limit
    while text not in path.read_text():
        assert process.poll() is None, f"exited {process.returncode}: {path.read_text()}"
        assert time.monotonic() < deadline, f"no {text!r} within {limit} s: {path.read_text()}"
        time.sleep(0.05)


@pytest.fixture
def release(http_server: HttpServer) -> Release:
    release = make_release(overlay=1 << 20)
    serve(http_server, release.archive, RATE)
    return release


# --- the cache folder -------------------------------------------------------------------------


def test_the_cache_folder_is_the_documented_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """README: --cache-dir, else $BUNDLE_CACHE_DIR, else ~/.cache/bundle (XDG_CACHE_HOME
    respected) on Linux."""
    monkeypatch.delenv("BUNDLE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "bundle"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "bundle"
    monkeypatch.setenv("BUNDLE_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"


# --- waiting, and giving up -------------------------------------------------------------------


def test_a_build_waits_for_the_folder_says_so_and_then_finishes(
    tmp_path: Path, http_server: HttpServer, release: Release
) -> None:
    exe, profile = setup(tmp_path, release)
    out = tmp_path / "out"
    out.mkdir()
    log = tmp_path / "stderr.txt"
    command = build_command(exe, profile, tmp_path / "cache", out, http_server)
    with held(out / BUILD_LOCK), log.open("w") as stderr:
        build = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=ENV
        )
        wait_for_text(log, f"waiting for the build into {out}", build, limit=60)
        time.sleep(0.5)  # still waiting, and nothing of it in the folder yet
        assert build.poll() is None
        assert sorted(os.listdir(out)) == [BUILD_LOCK]
    assert build.wait(timeout=120) == 0, log.read_text()
    check_folder_matches_lock(out)  # every file, and no lock file left behind
    assert "Traceback" not in log.read_text()


def test_a_fetch_waits_for_the_download_another_process_holds(
    tmp_path: Path, http_server: HttpServer, release: Release
) -> None:
    """The cache lock of an archive is held, as while another process downloads it."""
    _exe, profile = setup(tmp_path, release)
    cache = tmp_path / "cache"
    log = tmp_path / "stderr.txt"
    fetch = [
        sys.executable, "-m", "bundler", "fetch", "--profile", str(profile),
        "--cache-dir", str(cache), *mirror_args(http_server),
    ]  # fmt: skip
    with held(cache / "locks" / f"{release.sha256}.lock", remove=False), log.open("w") as err:
        process = subprocess.Popen(fetch, stdout=subprocess.DEVNULL, stderr=err, text=True, env=ENV)
        wait_for_text(log, f"waiting for the download of {NAME}", process, limit=60)
        assert not (cache / "blobs" / "sha256" / release.sha256).exists()
    assert process.wait(timeout=120) == 0, log.read_text()
    assert (cache / "blobs" / "sha256" / release.sha256).is_file()


@pytest.mark.parametrize("seconds", ["0.3", "1.6"])
def test_a_wait_longer_than_the_timeout_is_exit_20(
    tmp_path: Path, http_server: HttpServer, release: Release, seconds: str
) -> None:
    """Below one second the wait is not announced; above, it is, then given up."""
    exe, profile = setup(tmp_path, release)
    out = tmp_path / "out"
    out.mkdir()
    command = build_command(exe, profile, tmp_path / "cache", out, http_server)
    env = {**ENV, "BUNDLE_LOCK_TIMEOUT": seconds}
    with held(out / BUILD_LOCK):
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        waited = time.monotonic() - started
        assert sorted(os.listdir(out)) == [BUILD_LOCK]  # nothing of the build's in the folder
    assert done.returncode == ExitCode.BUSY == 20, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == (
        f"error: {out / BUILD_LOCK}: another bundle process still holds it after "
        f"{float(seconds):g} s (the build into {out}); let it finish, or raise "
        "$BUNDLE_LOCK_TIMEOUT (unset: wait as long as it takes)."
    )
    announced = any(line.startswith("bundle: waiting for the build into") for line in lines)
    assert announced == (float(seconds) > 1.0)
    assert waited >= float(seconds)
    assert "Traceback" not in done.stderr
    assert not any(out.iterdir()), "the lock file of the holder was not removed"


@pytest.mark.parametrize(
    ("name", "value", "unit", "example"),
    [
        ("BUNDLE_LOCK_TIMEOUT", "soon", "seconds", "600"),
        ("BUNDLE_LOCK_TIMEOUT", "-5", "seconds", "600"),
        ("BUNDLE_LOCK_TIMEOUT", "inf", "seconds", "600"),
        ("BUNDLE_LOCK_TIMEOUT", "nan", "seconds", "600"),
        ("BUNDLE_HTTP_TIMEOUT", "fast", "seconds", "60"),
        ("BUNDLE_HTTP_RETRIES", "-1", "attempts", "5"),
        ("BUNDLE_HTTP_BACKOFF", "1e999", "seconds", "60"),
    ],
)
def test_a_setting_that_is_no_number_is_exit_14(
    tmp_path: Path,
    http_server: HttpServer,
    release: Release,
    name: str,
    value: str,
    unit: str,
    example: str,
) -> None:
    exe, profile = setup(tmp_path, release)
    out = tmp_path / "out"
    command = build_command(exe, profile, tmp_path / "cache", out, http_server)
    done = subprocess.run(command, capture_output=True, text=True, env={**ENV, name: value})
    assert done.returncode == ExitCode.CONFIG, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: ${name}={value!r} is not a number of {unit}; set it to e.g. {example}, or "
        "unset it for the default."
    ]
    assert not out.exists()


# --- mutual exclusion with a lock file that is removed on release ------------------------------


def test_a_removed_lock_file_never_lets_two_processes_in_at_once(tmp_path: Path) -> None:
    """The output folder lock deletes its file on release. A process that was waiting on the
    deleted file must not count as holding the lock while another holds the new one."""
    processes, rounds = 4, 500
    lock, inside, counter = tmp_path / "x.lock", tmp_path / "inside", tmp_path / "counter"
    counter.write_text("0")
    args = [str(lock), str(inside), str(counter), str(rounds)]
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, *args], stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    errors = [worker.communicate(timeout=300)[1] for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * processes, errors
    assert int(counter.read_text()) == processes * rounds
    assert sorted(os.listdir(tmp_path)) == ["counter"]
