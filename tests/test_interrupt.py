"""Interruption: `bundle fetch` and `bundle build` killed with SIGKILL part way, then run again.

Each kill point is deterministic in what it waits for and seeded in where exactly it fires: the
test polls the cache and the output folder and kills the process when a given temporary file
appears or reaches N bytes (the `.part` download, the extraction's `.partial` tree, a
`.bundle-tmp` copy, the lock's temporary file), optionally after a seeded delay of a few
milliseconds. The release is synthetic (tests/support/slowrelease.py), served slowly from 127.0.0.1
so
that the download lasts about a second.

After every kill: no file under its final name is partial (every file in the output folder
that is not a temporary name has the SHA-256 the uninterrupted run's lock gives it; a lock file
there is whole), and the cache holds nothing unverified under a final name (every blob hashes
to its name, every extracted tree has its marker and the archive's bytes). Then the command is
run again and must converge: the same lock file, the same cache, as the uninterrupted run.

BUNDLE_TEST_SEED changes the seed (default fixed, so CI is reproducible).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.httpserver import HttpServer
from tests.support.slowrelease import DEPS, NAME, PATH, Release, app_exe, make_release, mirror_args
from tests.support.slowrelease import serve_slowly as serve

SEED = int(os.environ.get("BUNDLE_TEST_SEED", "20241130"))
RATE = 12 << 20  # bytes per second: the 15 MB archive downloads in about 1.3 s
KILL_TIMEOUT = 30.0
DLLS = ("onnxruntime.dll", *DEPS)
_HASH = re.compile(r"[0-9a-f]{64}")
_TEMP = re.compile(r"(\..*\.bundle-tmp|\.bundle-build\.lock)")
ENV = {
    **os.environ,
    "BUNDLE_DEBUG": "",
    "NO_PROXY": "127.0.0.1",
    "BUNDLE_HTTP_TIMEOUT": "5",
    "BUNDLE_HTTP_BACKOFF": "0.05",
}


@pytest.fixture(scope="module")
def release() -> Release:
    return make_release()


@dataclass
class Run:
    """One command's folders: a cache and (for build) an output folder, under `root`."""

    root: Path
    release: Release
    server: HttpServer

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def out(self) -> Path:
        return self.root / "out"

    def fetch_args(self) -> list[str]:
        profile = self.release.write_profile(self.root)
        return ["fetch", "--profile", str(profile), "--cache-dir", str(self.cache)]

    def build_args(self) -> list[str]:
        profile = self.release.write_profile(self.root)
        exe = self.root / "app" / "app.exe"
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_bytes(app_exe())
        return [
            "build", str(exe), "--profile", str(profile), "--cache-dir", str(self.cache),
            "--out", str(self.out), "--no-iss", "--no-postbuild",
        ]  # fmt: skip

    def part(self) -> Path:
        return self.cache / "tmp" / f"{self.release.sha256}.part"


def command(args: list[str], server: HttpServer) -> list[str]:
    return [sys.executable, "-m", "bundler", *args, *mirror_args(server)]


# --- kill points ---------------------------------------------------------------------------------

Trigger = Callable[[Run], bool]


def part_reaches(fraction: float) -> Trigger:
    def trigger(run: Run) -> bool:
        try:
            return run.part().stat().st_size >= fraction * len(run.release.archive)
        except FileNotFoundError:
            return False

    return trigger


def listing(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def extracting(run: Run) -> bool:
    prefix = f".{run.release.sha256}."
    names = listing(run.cache / "extracted")
    return any(name.startswith(prefix) and name.endswith(".partial") for name in names)


def blob_stored(run: Run) -> bool:
    return (run.cache / "blobs" / "sha256" / run.release.sha256).exists()


def tree_complete(run: Run) -> bool:
    return (run.cache / "extracted" / run.release.sha256 / ".complete").exists()


def copying(run: Run) -> bool:
    return any(name.endswith(".bundle-tmp") for name in listing(run.out))


def dlls_placed(run: Run) -> bool:
    names = set(listing(run.out))
    return all(dll in names for dll in DLLS)


def lock_being_written(run: Run) -> bool:
    return ".bundle.lock.json.bundle-tmp" in listing(run.out)


@dataclass(frozen=True)
class Point:
    phase: str  # what the command is doing when it is killed
    trigger: Trigger
    delay: float = 0.0  # seconds after the trigger fires

    def describe(self) -> str:
        return f"{self.phase}+{self.delay * 1000:.0f}ms"


def fetch_points(rng: random.Random) -> list[Point]:
    download = [Point("download", part_reaches(rng.uniform(0.05, 0.95))) for _ in range(5)]
    extraction = [Point("extraction", extracting, rng.uniform(0, 0.02)) for _ in range(4)]
    return [*download, Point("stored", blob_stored), *extraction, Point("marker", tree_complete)]


def build_points(rng: random.Random) -> list[Point]:
    return [
        *(Point("download", part_reaches(rng.uniform(0.05, 0.95))) for _ in range(3)),
        *(Point("extraction", extracting, rng.uniform(0, 0.02)) for _ in range(3)),
        Point("hashing", tree_complete, rng.uniform(0, 0.05)),
        *(Point("copy", copying, rng.uniform(0, 0.01)) for _ in range(3)),
        Point("lock", dlls_placed),
        Point("lock", lock_being_written),
    ]


def run_and_kill(args: list[str], run: Run, point: Point) -> bool:
    """Start the command, kill it with SIGKILL at `point`; False if it ended first."""
    process = subprocess.Popen(
        command(args, run.server), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV
    )
    deadline = time.monotonic() + KILL_TIMEOUT
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if point.trigger(run):
                time.sleep(point.delay)
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.0005)
        else:
            assert process.poll() is not None, f"{point.describe()} never fired"
    finally:
        process.wait()
    return process.returncode == -signal.SIGKILL


def run_to_end(args: list[str], run: Run) -> None:
    result = subprocess.run(command(args, run.server), capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stderr


# --- what must hold after every kill, and after every rerun --------------------------------------


def check_cache(run: Run) -> None:
    """Nothing unverified under a final name: blobs hash to their names, trees are complete
    and hold exactly the archive's bytes."""
    blobs = run.cache / "blobs" / "sha256"
    for name in listing(blobs):
        if _HASH.fullmatch(name):
            digest = hashlib.sha256((blobs / name).read_bytes()).hexdigest()
            assert digest == name, f"blob {name} holds other bytes ({digest})"
    extracted = run.cache / "extracted"
    for name in listing(extracted):
        if not _HASH.fullmatch(name):
            continue
        marker = json.loads((extracted / name / ".complete").read_text())
        for member in marker["members"]:
            data = (extracted / name / member).read_bytes()
            assert data == run.release.members[member], f"extracted {member} differs"


def check_output(run: Run, reference: dict[str, object]) -> None:
    """Every file under a final name is whole: the reference lock's hash, or the lock itself."""
    expected = {item["name"]: item["sha256"] for item in reference_files(reference)}
    for path in run.out.rglob("*") if run.out.is_dir() else ():
        name = path.relative_to(run.out).as_posix()
        if path.is_dir() or _TEMP.fullmatch(path.name):
            continue
        if name == "bundle.lock.json":
            assert comparable(json.loads(path.read_text())) == comparable(reference), name
            continue
        if name == "bundle.times.json":  # the build's note, written after the lock: whole
            assert set(json.loads(path.read_text())["mtime_ns"]) <= set(expected), name
            continue
        if name == "bundle-doctor.dat":  # the lock's view, written after it: whole, if there
            body, _, end = path.read_text().rstrip("\n").rpartition("\n")
            assert end == "end\t" + hashlib.sha256((body + "\n").encode()).hexdigest(), name
            continue
        assert name in expected, f"{name}: not a file of the bundle"
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert digest == expected[name], f"{name}: partial or wrong ({digest})"


def reference_files(lock: dict[str, object]) -> list[dict[str, str]]:
    files = lock["files"]
    assert isinstance(files, list)
    return files


def comparable(lock: dict[str, object]) -> dict[str, object]:
    """The lock without what legitimately differs between two runs: where the bytes were
    served from this time (the mirror, or the cache), the time of the app each run writes
    itself, and so the digest over them. (The extracted DLLs keep their archive times.)"""
    files = [
        {
            k: v
            for k, v in item.items()
            if k != "origin" and (k, item["kind"]) != ("mtime_ns", "app")
        }
        for item in reference_files(lock)
    ]
    return {k: v for k, v in lock.items() if k not in ("digest", "files")} | {"files": files}


def tree_digest(run: Run) -> dict[str, str]:
    tree = run.cache / "extracted" / run.release.sha256
    return {
        path.relative_to(tree).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(tree.rglob("*"))
        if path.is_file() and not path.name.startswith(".")
    }


# --- the tests -------------------------------------------------------------------------------


def interrupt_each(
    points: list[Point],
    make_args: Callable[[Run], list[str]],
    check_converged: Callable[[Run], None],
    after_kill: Callable[[Run], None],
    tmp_path: Path,
    release: Release,
    server: HttpServer,
) -> Counter[str]:
    killed: Counter[str] = Counter()
    for number, point in enumerate(points):
        run = Run(tmp_path / f"point-{number}", release, server)
        args = make_args(run)
        if run_and_kill(args, run, point):
            killed[point.phase] += 1
        try:
            after_kill(run)
            run_to_end(args, run)
            check_converged(run)
        except AssertionError as error:
            raise AssertionError(f"kill point {number} ({point.describe()}): {error}") from None
    return killed


def test_fetch_killed_anywhere_converges(
    tmp_path: Path, release: Release, http_server: HttpServer
) -> None:
    serve(http_server, release.archive, RATE)
    reference = Run(tmp_path / "reference", release, http_server)
    run_to_end(reference.fetch_args(), reference)
    expected_tree = tree_digest(reference)
    assert set(expected_tree) == set(release.members)

    def converged(run: Run) -> None:
        check_cache(run)
        assert tree_digest(run) == expected_tree
        assert listing(run.cache / "tmp") == [], "a partial download was left behind"

    points = fetch_points(random.Random(SEED))
    killed = interrupt_each(
        points, Run.fetch_args, converged, check_cache, tmp_path, release, http_server
    )
    assert sum(killed.values()) >= 10, killed
    assert {"download", "extraction"} <= set(killed), killed


def test_build_killed_anywhere_converges(
    tmp_path: Path, release: Release, http_server: HttpServer
) -> None:
    serve(http_server, release.archive, RATE)
    reference_run = Run(tmp_path / "reference", release, http_server)
    run_to_end(reference_run.build_args(), reference_run)
    reference = json.loads((reference_run.out / "bundle.lock.json").read_text())
    assert {item["name"] for item in reference_files(reference)} >= set(DLLS)

    def after_kill(run: Run) -> None:
        check_cache(run)
        check_output(run, reference)

    def converged(run: Run) -> None:
        after_kill(run)
        lock = json.loads((run.out / "bundle.lock.json").read_text())
        assert comparable(lock) == comparable(reference)
        names = {p.relative_to(run.out).as_posix() for p in run.out.rglob("*") if p.is_file()}
        views = {"bundle.lock.json", "bundle-doctor.dat", "bundle.times.json"}
        assert names == {*(i["name"] for i in reference_files(reference)), *views}

    points = build_points(random.Random(SEED + 1))
    killed = interrupt_each(
        points, Run.build_args, converged, after_kill, tmp_path, release, http_server
    )
    assert sum(killed.values()) >= 10, killed
    assert {"download", "extraction", "copy", "lock"} <= set(killed), killed


def test_the_kill_points_cover_every_phase() -> None:
    """The seeded lists themselves: at least 10 points per command, every phase present."""
    fetch = fetch_points(random.Random(SEED))
    build = build_points(random.Random(SEED + 1))
    assert len(fetch) >= 10 and len(build) >= 10
    assert {p.phase for p in build} >= {"download", "extraction", "copy", "lock"}
    assert NAME in PATH
