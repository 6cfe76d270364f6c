"""Talk layer: progress for long transfers. A redrawn bar on a terminal; in CI logs (no TTY)
plain lines at every 10 % (or every 64 MB when the size is unknown), so logs stay short."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from bundler.download import ProgressCallback

_STEP_UNKNOWN = 64 * 1000 * 1000


def progress_for(
    label: str, total: int | None, stream: TextIO | None = None
) -> ProgressCallback | None:
    out = stream or sys.stderr
    return _Bar(label, total, out) if out.isatty() else _Lines(label, total, out)


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


class _Bar:
    def __init__(self, label: str, total: int | None, out: TextIO) -> None:
        self.label, self.total, self.out = label, total, out
        self.started = time.monotonic()
        self.last_draw = 0.0

    def __call__(self, done: int, total: int | None) -> None:
        total = total or self.total
        now = time.monotonic()
        finished = total is not None and done >= total
        if now - self.last_draw < 0.1 and not finished:
            return
        self.last_draw = now
        rate = done / max(now - self.started, 1e-6)
        if total:
            filled = int(30 * done / total)
            bar = "#" * filled + "-" * (30 - filled)
            text = f"{self.label} [{bar}] {_mb(done)} / {_mb(total)} {_mb(int(rate))}/s"
        else:
            text = f"{self.label} {_mb(done)} {_mb(int(rate))}/s"
        self.out.write("\r" + text[:120].ljust(120))
        if finished:
            self.out.write("\n")
        self.out.flush()


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
