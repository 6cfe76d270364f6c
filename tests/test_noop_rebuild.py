"""A no-op rebuild of the real GPU bundle reads no DLL in full and hashes nothing (issue 10, P3).

Not timed. The probe is the page cache: after `sync`, every DLL (the cache's and the bundle's
copies) is dropped from it with posix_fadvise(DONTNEED), the rebuild runs, and `fincore`
(util-linux) then shows how many bytes of each file the kernel had to bring back. That sees
every way of reading, read() and copy_file_range as well as pefile's mmap, and any hash of a
file needs all of its bytes. Reading a PE header pulls in a read-ahead window around it (8 MiB
on these machines), so only DLLs much larger than that window are judged: one of those that
is mostly resident was read in full. The last test shows the probe does see a full read: a DLL
whose time stamp changed is compared byte for byte, and the probe must notice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from bundler.closure.lock import LOCK_NAME
from tests.support.cache_links import RELEASES, kept_cache
from tests.support.paths import GPU, HELLO, test_cache_dir
from tests.support.runs import pip_env
from tests.support.skips import require

FULL = 0.5  # a DLL with more than this share of its bytes resident was read in full


def build(out: Path, cache: Path) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-m", "bundler", "build", str(HELLO), "--profile", GPU, "--offline",
         "--cache-dir", str(cache), "--out", str(out), "--copy", "--json"],
        capture_output=True, text=True,
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env(PIP_FIND_LINKS="/nonexistent")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def evict(files: list[Path]) -> None:
    """Write back, then drop every file's pages from the page cache."""
    os.sync()
    for path in files:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def resident(files: list[Path]) -> dict[Path, int]:
    """Bytes of each file in the page cache, as mincore(2) reports them through fincore."""
    shown = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", *map(str, files)],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return dict(zip(files, map(int, shown), strict=True))


def read_ahead(path: Path) -> int:
    """The read-ahead window of the block device holding `path` (8 MiB when unknown)."""
    device = os.stat(path).st_dev
    queue = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}")
    for candidate in (queue / "queue", queue.parent / "queue"):
        try:
            return int((candidate / "read_ahead_kb").read_text()) * 1024
        except (OSError, ValueError):
            continue
    return 8 << 20


def read_in_full(files: list[Path], run: Callable[[], object]) -> list[str]:
    """The large DLLs that `run` brought into the page cache mostly or wholly."""
    evict(files)
    before = resident(files)
    require(
        sum(before.values()) < 0.01 * sum(path.stat().st_size for path in files),
        "posix_fadvise(DONTNEED) does not empty the page cache here",
    )
    run()
    after = resident(files)
    window = read_ahead(files[0])
    large = [path for path in files if path.stat().st_size > 8 * window]
    assert len(large) >= 4, f"too few DLLs larger than 8 x {window} bytes to judge"
    return [str(path) for path in large if after[path] > FULL * path.stat().st_size]


@pytest.fixture(scope="module")
def cache(gpu_cache: Path) -> Path:
    """The kept cache of released wheels (tests/support/cache_links.kept_cache), seeded with the
    session's GPU cache: its extracted DLLs keep their times from run to run, so the kept
    bundle below stays a no-op rebuild of it."""
    return kept_cache(RELEASES, seed=gpu_cache)


@pytest.fixture(scope="module")
def bundle(cache: Path) -> Iterator[Path]:
    """A copied (not linked) GPU bundle: the cache's DLLs and the bundle's are other files.
    It is kept in the test cache between runs, as a user's output folder is kept between
    builds: a first run copies its 2.6 GB, a later one finds it built (the build here first
    brings it up to date, whatever an earlier run or version left), so the probed rebuilds
    below are no-op rebuilds of a copied bundle either way. Held under a file lock, for a
    second suite on the same test cache."""
    require(shutil.which("fincore") is not None, "fincore is not installed (util-linux)")
    folder = test_cache_dir() / "bundles" / "noop-gpu"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{folder}.lock"):
        build(folder / "out", cache)
        yield folder / "out"


def dlls(bundle: Path, cache: Path) -> list[Path]:
    """The bundle's DLLs and their sources in the cache (extracted/<archive>/<member>)."""
    lock = json.loads((bundle / LOCK_NAME).read_text(encoding="utf-8"))
    sources = [
        cache / "extracted" / item["archive_sha256"] / item["member"]
        for item in lock["files"]
        if item["name"].lower().endswith(".dll")
    ]
    return sorted(bundle.glob("*.dll")) + sorted(sources)


@pytest.mark.realdata
def test_noop_rebuild_reads_no_dll_in_full_and_hashes_nothing(bundle: Path, cache: Path) -> None:
    outcome: dict[str, object] = {}
    files = dlls(bundle, cache)

    full = read_in_full(files, lambda: outcome.update(build(bundle, cache)))

    assert full == []
    counters = outcome["counters"]
    assert isinstance(counters, dict)
    assert (counters["copied"], counters["linked"], counters["hashed"]) == (0, 0, 0)


@pytest.mark.realdata
def test_the_probe_sees_a_dll_compared_byte_for_byte(bundle: Path, cache: Path) -> None:
    """Negative control: a changed time stamp makes the rebuild compare the file with its
    source (same content: adopted, not copied); both copies are then read in full."""
    target = bundle / "cublasLt64_12.dll"
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    files = dlls(bundle, cache)

    full = read_in_full(files, lambda: build(bundle, cache))

    assert sorted(Path(path).name for path in full) == ["cublasLt64_12.dll"] * 2
