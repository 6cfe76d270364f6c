"""Disk for the suite's big fixtures, and a watch on it.

CI has a small disk and pytest keeps every `tmp_path_factory` folder until the session ends, so a
fixture that holds gigabytes for one module takes a `scratch` folder: removed as soon as its
fixture is torn down. As a plugin, this module also records the least free space seen at the
end of any test's body and prints it, with that test's name, in the summary: the suite's disk
peak, measured. It also counts the bytes the machine's disks wrote during each test (its
fixtures' set-up and teardown included, so a module's shared fixture counts for the test that
first asks for it) and prints the tests and modules that wrote the most, and each worker's
time in tests (how evenly the two workers were loaded), and when and on which worker each test
longer than a minute ran.

The run's bytes are field 7 of /sys/block/<disk>/stat (sectors of 512 bytes written since boot,
every process included: Wine's server too), summed over the real disks, as .ci/run counts them.
Beside it, a test's own bytes: `write_bytes` of its worker's /proc/self/io (what was written,
files deleted before the kernel wrote them back included), which holds the worker and every
child process it has waited for (a `bundle` process, ISCC, xbuild). It leaves out the other
worker, and also Wine's daemonised server and the Windows processes a Wine program starts
(Wine forks them away from their parent): where a test's two figures differ by much, either
the other worker or the Windows side wrote the difference."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@contextmanager
def scratch(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A new folder under the session's temporary root, removed (whatever happened) on exit."""
    folder = factory.mktemp(name)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class LowWater:
    """The least free space seen so far and the test after which it was seen."""

    free: int = -1
    after: str = ""

    def see(self, free: int, test: str) -> None:
        if self.free < 0 or free < self.free:
            self.free, self.after = free, test


BLOCK = Path("/sys/block")
# Each measure travels in the test's report (user_properties), so that with pytest-xdist the
# controlling process, which prints the summary, sees what every worker measured.
FREE, WRITTEN, OWN = "disk_free_bytes", "disk_bytes_written", "own_bytes_written"
STARTED = pytest.StashKey[tuple[int, int | None]]()
LONG = 60.0  # seconds: a test this long is listed with its worker and when it started


def own_bytes_written() -> int | None:
    """Bytes this process and its waited-for children wrote to a disk's files; None where /proc
    has no I/O accounting."""
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
        return int(fields["write_bytes"])
    except (OSError, KeyError, ValueError):
        return None


def bytes_written() -> int:
    """Bytes written by the machine's real disks since boot; 0 where /sys has no block stats."""
    total = 0
    for disk in BLOCK.glob("*") if BLOCK.is_dir() else ():
        try:
            if (disk / "device").exists():
                total += int((disk / "stat").read_text().split()[6]) * 512
        except (OSError, IndexError, ValueError):
            continue
    return total


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[STARTED] = (bytes_written(), own_bytes_written())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After each test's body, while its fixtures and its `tmp_path` still hold their files."""
    try:
        return (yield)
    finally:
        root = item.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        item.user_properties.append((FREE, shutil.disk_usage(root).free))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[object]:
    """The bytes written from the test's set-up to the end of its teardown."""
    if call.when == "teardown" and STARTED in item.stash:
        disk, own = item.stash[STARTED]
        item.user_properties.append((WRITTEN, bytes_written() - disk))
        now = own_bytes_written()
        if own is not None and now is not None:
            item.user_properties.append((OWN, now - own))
    return (yield)


class DiskWatch:
    """What the reports say, gathered where the summary is printed."""

    def __init__(self, workers: int) -> None:
        self.low = LowWater()
        self.writes: Counter[str] = Counter()
        self.own: Counter[str] = Counter()
        self.busy: Counter[str] = Counter()  # seconds of set-up, call and teardown per worker
        self.workers = workers
        self.started = bytes_written()
        self.began = time.time()
        self.long: list[tuple[float, str, float, str]] = []  # start, worker, seconds, test

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # pytest-xdist: the worker that ran it
        worker = node.workerinput["workerid"] if node is not None else "main"
        self.busy[worker] += report.duration
        start = getattr(report, "start", None)  # pytest >= 7.4 stamps each phase
        if report.when == "call" and report.duration > LONG and start is not None:
            self.long.append((start - self.began, worker, report.duration, report.nodeid))
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == FREE:
                self.low.see(int(value), report.nodeid)
            elif name == WRITTEN:
                self.writes[report.nodeid] += int(value)
            elif name == OWN:
                self.own[report.nodeid] += int(value)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.low.free >= 0:
            terminalreporter.write_line(
                f"disk: least free space {self.low.free / 1e9:.1f} GB, after {self.low.after}"
            )
        if self.busy:
            shares = ", ".join(f"{w} {t / 60:.1f} min" for w, t in sorted(self.busy.items()))
            terminalreporter.write_line(f"time in tests, per worker: {shares}")
        for start, worker, seconds, nodeid in sorted(self.long):
            terminalreporter.write_line(
                f"  {worker} from {start / 60:4.1f} min, {seconds:4.0f} s: {nodeid}"
            )
        total = bytes_written() - self.started
        report_writes(terminalreporter, (self.writes, self.own), total, self.workers)


def pytest_configure(config: pytest.Config) -> None:
    workers = int(getattr(config.option, "numprocesses", 0) or 0)
    config.pluginmanager.register(DiskWatch(workers), "disk-watch")


def report_writes(
    terminal: pytest.TerminalReporter,
    writes: tuple[Counter[str], Counter[str]],
    total: int,
    workers: int,
) -> None:
    """The run's bytes written, then the 15 tests and the 10 modules that wrote the most by the
    machine's disks, each with its own worker's figure beside it; the 10 modules whose own
    processes wrote the most (what `time -v` counts), and the sum of every test's own bytes."""
    if not total:
        return
    disk, own = writes
    terminal.write_sep("=", f"bytes written: {total / 1e9:.1f} GB by this run")
    terminal.write_line(
        f"   disk    own  (disk: the machine's during the test, {workers or 1} worker(s); "
        "own: its worker and the children it waited for)"
    )
    for nodeid, written in disk.most_common(15):
        terminal.write_line(f"{written / 1e9:7.2f} {own[nodeid] / 1e9:6.2f}  {nodeid}")
    modules: Counter[str] = Counter()
    owned: Counter[str] = Counter()
    for nodeid, written in disk.items():
        modules[nodeid.split("::")[0]] += written
        owned[nodeid.split("::")[0]] += own[nodeid]
    lists = [("by module:", modules)] + ([("by module, own bytes first:", owned)] if own else [])
    for title, order in lists:
        terminal.write_line(title)
        for module, _ in order.most_common(10):
            terminal.write_line(
                f"{modules[module] / 1e9:7.2f} {owned[module] / 1e9:6.2f}  {module}"
            )
    if own:  # where /proc has I/O accounting (not under Windows)
        terminal.write_line(f"own bytes of all tests: {sum(own.values()) / 1e9:.1f} GB")
