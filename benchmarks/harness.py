"""What every benchmark of benchmarks/run.py shares: the timed run of one process, a row of
samples and its verdict, the CLI as a user starts it (this checkout, or the Windows Python
under Wine with --windows), and the prepared data. benchmarks/run.py and the modules of its
larger targets (compression.py, runtime_pack.py) import it; it imports none of them."""

from __future__ import annotations

import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROFILE = "ort-1.19.2-gpu-cuda12"
EXE = REPO / "examples" / "hello" / "hello.exe"


@dataclass
class Sample:
    wall: float  # seconds
    cpu: float  # user + system seconds of the process and its children
    rss_mb: float  # peak resident set of the process (largest of its children too)


@dataclass
class Row:
    """One target: the command's samples, its yardstick's (paired by index) or an absolute
    limit, and the verdict."""

    key: str
    what: str
    target: str
    command: list[Sample] = field(default_factory=list)
    yardstick: list[Sample] = field(default_factory=list)
    yardstick_name: str = ""
    limit: float | None = None  # the highest ratio, seconds or MB that passes
    unit: str = "ratio"  # "ratio" (command / yardstick), "s" (wall), "MB" (peak RSS)
    note: str = ""
    size_ratio: float | None = None  # P9, P10: output size / the yardstick's
    size_limit: float | None = None

    def value(self) -> float:
        if self.unit == "MB":
            return max(sample.rss_mb for sample in self.command)
        if self.unit == "s":
            return statistics.median(sample.wall for sample in self.command)
        pairs = zip(self.command, self.yardstick, strict=True)
        return statistics.median(ours.wall / theirs.wall for ours, theirs in pairs)

    def passed(self) -> bool | None:
        if not self.command or self.limit is None:
            return None
        sized = self.size_ratio is not None and self.size_limit is not None
        if sized and self.size_ratio > self.size_limit:  # type: ignore[operator]
            return False
        return self.value() <= self.limit


class Failed(Exception):
    """A command of the benchmark itself failed: the numbers would mean nothing."""


def run(command: Sequence[str], env: dict[str, str] | None = None) -> Sample:
    """One whole process, timed from start to exit; rusage from wait4 (this process only,
    including what it waited for). Output goes to temporary files, except for the Windows
    Python (--windows): under Wine a Windows process whose standard handle is a file dies at
    start-up (tests/support/winpython.py), so it writes to /dev/null and, on failure, runs
    again for the message."""
    windows = command[: len(PYTHON)] == PYTHON and bool(WINDOWS)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sink = subprocess.DEVNULL if windows else out
        start = time.perf_counter()
        process = subprocess.Popen(list(command), stdout=sink, stderr=sink, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            if windows:
                output(list(command))  # raises Failed with bundle's message
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-3:]
            raise Failed(f"{shlex.join(command)} exited {process.returncode}: {' / '.join(tail)}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


PYTHON = [sys.executable]  # --python: the interpreter (an environment) that runs bundle
WINDOWS: dict[str, str] = {}  # --windows: the environment of the Windows Python under Wine


def bundle(*args: str) -> list[str]:
    """The CLI as a user starts it, from this checkout whatever is installed; for the Windows
    Python every absolute path is spelled as Windows sees it (Z:\\...)."""
    if WINDOWS:
        args = tuple("Z:" + arg.replace("/", "\\") if arg.startswith("/") else arg for arg in args)
    return [*PYTHON, "-m", "bundler", *args]


def warm(paths: Sequence[Path]) -> None:
    """Read files once, untimed, so every timed run finds them in the page cache."""
    for path in paths:
        with path.open("rb") as handle:
            while handle.read(1 << 24):
                pass


def bundle_env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, **WINDOWS}
    env.pop("BUNDLE_DEBUG", None)
    return env


def quiet_disk() -> None:
    """Write back what earlier runs left dirty, so it is not flushed during the next one, and
    let the filesystem settle (freeing a removed 2.6 GB folder goes on after unlink)."""
    os.sync()
    time.sleep(1)


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


@dataclass(frozen=True)
class Data:
    work: Path
    cache: Path  # a complete cache of the GPU profile (archives and extracted trees)
    reference: Path  # a --link build: the cache's own files, the yardstick copies those
    blobs: tuple[Path, ...]  # the archives of the profile, in the cache


def gpu_args(cache: Path) -> list[str]:
    return ["--profile", PROFILE, "--offline", "--cache-dir", str(cache)]


def output(command: list[str]) -> str:
    done = subprocess.run(command, env=bundle_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise Failed(f"{shlex.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout
