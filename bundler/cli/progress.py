"""Talk layer: progress for long transfers. rich's bar on a terminal; in CI logs (no TTY)
plain lines at every 10 % (or every 64 MB when the size is unknown), so logs stay short."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from bundler.progress_meter import ProgressCallback

_STEP_UNKNOWN = 64 * 1000 * 1000


class ProgressBars:
    """The progress of one command run: a bar per step on a terminal, plain lines in a log. It
    knows the bars drawing now, so the CLI can stop them however the command ends (a step that
    fails never finishes its bar). Called as a ProgressFactory: (label, total) -> callback."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.live: list[_Bar] = []

    def __call__(self, label: str, total: int | None) -> ProgressCallback | None:
        out = self.stream or sys.stderr
        return _Bar(label, total, out, self.live) if out.isatty() else _Lines(label, total, out)

    def stop_all(self) -> None:
        """Stop every bar still drawing, so a failed step leaves no hidden cursor and no
        redirected stdout/stderr behind."""
        while self.live:
            self.live.pop().stop()


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


class _Bar:
    """rich's progress bar (installed with typer), the same look for every long step. rich is
    imported only here, on a terminal: a CI log never pays for it."""

    def __init__(self, label: str, total: int | None, out: TextIO, live: list[_Bar]) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(file=out, force_terminal=True),
            transient=False,
            auto_refresh=False,  # redrawn by the calls below, at most every 0.1 s: no thread
        )
        self.task = self.progress.add_task(label, total=total)
        self.live = live
        self.last_draw = 0.0
        self.started = False

    def __call__(self, done: int, total: int | None) -> None:
        if not self.started:  # drawn from the first byte on, not when the step is planned
            self.started = True
            self.progress.start()
            self.live.append(self)
        finished = total is not None and done >= total
        now = time.monotonic()
        self.progress.update(self.task, completed=done, total=total)
        if finished:
            self.progress.refresh()
            self.stop()
        elif now - self.last_draw >= 0.1:
            self.last_draw = now
            self.progress.refresh()

    def stop(self) -> None:
        self.progress.stop()
        if self in self.live:
            self.live.remove(self)


class _Lines:
    def __init__(self, label: str, total: int | None, out: TextIO) -> None:
        self.label, self.total, self.out = label, total, out
        self.next_percent = 0
        self.next_bytes = 0

    def __call__(self, done: int, total: int | None) -> None:
        total = total or self.total
        if total:
            percent = 100 * done // total
            if percent < self.next_percent:
                return
            self.out.write(f"{self.label}: {percent}% ({_mb(done)} of {_mb(total)})\n")
            self.next_percent = percent - percent % 10 + 10
        else:
            if done < self.next_bytes:
                return
            self.out.write(f"{self.label}: {_mb(done)}\n")
            self.next_bytes = done + _STEP_UNKNOWN
        self.out.flush()
