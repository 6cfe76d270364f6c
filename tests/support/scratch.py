"""Disk for the suite's big fixtures, and a watch on it.

CI has a small disk and pytest keeps every `tmp_path_factory` folder until the session ends, so a
fixture that holds gigabytes for one module takes a `scratch` folder: removed as soon as its
fixture is torn down. As a plugin, this module also records the least free space seen at the
end of any test's body and prints it, with that test's name, in the summary: the suite's disk
peak, measured. It also counts the bytes the machine's disks wrote during each test (its
fixtures' set-up and teardown included, so a module's shared fixture counts for the test that
first asks for it) and prints the tests and modules that wrote the most.

The bytes are field 7 of /sys/block/<disk>/stat (sectors of 512 bytes written since boot, every
process included: Wine's server too), summed over the real disks, as .ci/run counts them."""

from __future__ import annotations

import shutil
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


LOW_WATER = pytest.StashKey[LowWater]()
WRITES = pytest.StashKey["Counter[str]"]()
BLOCK = Path("/sys/block")


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


def pytest_configure(config: pytest.Config) -> None:
    config.stash[LOW_WATER] = LowWater()
    config.stash[WRITES] = Counter()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    before = bytes_written()
    try:
        return (yield)
    finally:
        item.config.stash[WRITES][item.nodeid] += bytes_written() - before


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After each test's body, while its fixtures and its `tmp_path` still hold their files."""
    try:
        return (yield)
    finally:
        root = item.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        item.config.stash[LOW_WATER].see(shutil.disk_usage(root).free, item.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    low = terminalreporter.config.stash[LOW_WATER]
    if low.free >= 0:
        terminalreporter.write_line(
            f"disk: least free space {low.free / 1e9:.1f} GB, after {low.after}"
        )
    report_writes(terminalreporter, terminalreporter.config.stash[WRITES])


def report_writes(terminal: pytest.TerminalReporter, writes: Counter[str]) -> None:
    """The 15 tests and the 10 modules that wrote the most, and the total."""
    if not sum(writes.values()):
        return
    modules: Counter[str] = Counter()
    for nodeid, written in writes.items():
        modules[nodeid.split("::")[0]] += written
    terminal.write_sep("=", f"bytes written: {sum(writes.values()) / 1e9:.1f} GB in all")
    for nodeid, written in writes.most_common(15):
        terminal.write_line(f"{written / 1e9:7.2f} GB  {nodeid}")
    terminal.write_line("by module:")
    for module, written in modules.most_common(10):
        terminal.write_line(f"{written / 1e9:7.2f} GB  {module}")
