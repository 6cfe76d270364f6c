"""Talk layer's channel into the library: notes (a wait, a fallback) that library code reports
without printing. The CLI injects where they go (`set_sink`, stderr); a library caller gets
nothing unless it asks. Only bundler.cli and the entry point print or exit (tests/test_layers.py
reads every module's calls to keep that true)."""

from __future__ import annotations

from collections.abc import Callable

Note = Callable[[str], None]


def _nowhere(message: str) -> None:
    del message


_sink: list[Note] = [_nowhere]


def set_sink(sink: Note | None) -> None:
    """Where notes go from now on (None: nowhere)."""
    _sink[0] = sink or _nowhere


def note(message: str) -> None:
    """One line for the user, through the sink the CLI set."""
    _sink[0](message)
