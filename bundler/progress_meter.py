"""Decide layer: the shape of progress, shared by every wing that moves bytes (downloads,
extraction, deployment, archives): the callback the CLI hands down, the factory that makes one
per step, and a meter that sums what several threads did into one callback."""

from __future__ import annotations

import threading
from collections.abc import Callable

ProgressCallback = Callable[[int, int | None], None]
"""Called as bytes arrive with (bytes done, total size or None when the server does not say)."""

ProgressFactory = Callable[[str, int | None], ProgressCallback | None]
"""(label, total size or None) -> the callback of one step, or None to report nothing."""


class ProgressMeter:
    """Bytes done by several threads (copies, inflating), told to one progress callback under a
    lock: the callback draws on a terminal."""

    def __init__(self, total: int, progress: ProgressCallback | None) -> None:
        self.total, self.progress = total, progress
        self.done = 0
        self._lock = threading.Lock()

    def add(self, count: int) -> None:
        if self.progress is None:
            return
        with self._lock:
            self.done += count
            self.progress(self.done, self.total)
