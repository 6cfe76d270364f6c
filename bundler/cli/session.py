"""Talk layer: one run of the `bundle` command: whether tracebacks are shown (--debug,
$BUNDLE_DEBUG), its progress bars, and the reporter the library is handed (notes on stderr,
progress as bars or log lines). The entry point makes it and gives it to click as the context
object; a command asks its context for it (`of(ctx)`). Nothing about a run lives in module
state."""

from __future__ import annotations

from dataclasses import dataclass, field

import typer

from bundler.cli.progress import ProgressBars
from bundler.config.environment import debug_requested
from bundler.reporter import Reporter


def _debug_from_environment() -> bool:
    return debug_requested()


def _on_stderr(message: str) -> None:
    typer.echo(message, err=True)


@dataclass
class Session:
    debug: bool = field(default_factory=_debug_from_environment)
    bars: ProgressBars = field(default_factory=ProgressBars)

    @property
    def reporter(self) -> Reporter:
        return Reporter(note=_on_stderr, progress=self.bars)


def of(context: typer.Context) -> Session:
    """The run's session: the entry point's, or a fresh one where a command runs without it
    (typer's test runner)."""
    return context.ensure_object(Session)
