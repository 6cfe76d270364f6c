"""Decide layer: the one output channel of library code. The CLI makes a `Reporter` (notes on
stderr, progress bars or log lines) and hands it down; library code tells it what happens and
never prints. A library caller that passes none gets `SILENT`: nothing is shown.

- `note`: one line for the user while work goes on (a wait for another process's lock, a
  prefix set up, a model measured);
- `progress`: the callback of one long step (bundler.progress_meter's ProgressFactory).

What a command found (findings, counters, fall-backs) is data in its result, shown by the CLI's
views, not a note."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bundler.progress_meter import ProgressCallback, ProgressFactory

Note = Callable[[str], None]


def _unheard(message: str) -> None:
    del message


def _unmeasured(label: str, total: int | None) -> ProgressCallback | None:
    del label, total
    return None


@dataclass(frozen=True)
class Reporter:
    """Where a command's notes and progress go."""

    note: Note = _unheard
    progress: ProgressFactory = _unmeasured


SILENT = Reporter()
