"""Talk layer: the `bundle` command: every command module registered on one typer app, and the
entry point that maps library errors onto the exit-code table."""

from __future__ import annotations

import sys
import traceback

import typer

from bundler.cli import artifacts, audit, build, inspect, profiles  # noqa: F401 (registers commands)
from bundler.cli.app import _debug, app
from bundler.errors import BundleError, ExitCode

__all__ = ["app", "main"]

# `bundle --help` lists the commands in this order (the modules register them by topic).
ORDER = ("deps", "audit", "fetch", "build", "msbuild", "scan")
app.registered_commands.sort(
    key=lambda command: ORDER.index(getattr(command.callback, "__name__", ""))
)


def main() -> None:
    """Entry point: run the CLI and map library errors onto the exit-code table. Typer itself
    handles usage errors (exit 2) and typer.Exit; everything ends in SystemExit."""
    from bundler import notes

    notes.set_sink(lambda message: typer.echo(message, err=True))
    try:
        try:
            app()
        finally:
            if "bundler.cli.progress" in sys.modules:  # imported by commands that draw bars
                sys.modules["bundler.cli.progress"].stop_all()
    except BundleError as exc:
        if _debug["on"]:
            traceback.print_exc()
        typer.echo(f"error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except Exception:
        if _debug["on"]:
            raise
        error = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        typer.echo(f"internal error: {error}; rerun with --debug and report it.", err=True)
        sys.exit(ExitCode.INTERNAL)
