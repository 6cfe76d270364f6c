"""Disk for the suite's big fixtures, and a watch on it.

CI has a small disk and pytest keeps every `tmp_path_factory` folder until the session ends, so a
fixture that holds gigabytes for one module takes a `scratch` folder: removed as soon as its
fixture is torn down. As a plugin, this module also records the least free space seen at the
end of any test's body and prints it, with that test's name, in the summary: the suite's disk
peak, measured."""

from __future__ import annotations

import shutil
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


def pytest_configure(config: pytest.Config) -> None:
    config.stash[LOW_WATER] = LowWater()


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
