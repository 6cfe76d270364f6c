"""Talk layer: the `bundle` command: every command module registered on one typer app, and the
entry point that maps library errors onto the exit-code table."""

from __future__ import annotations

import sys
import traceback
from inspect import cleandoc
from typing import Any

import typer
import typer.main

from bundler.cli import artifacts, audit, build, inspect, measure, profiles  # noqa: F401 (registers)
from bundler.cli.app import _debug, app
from bundler.errors import BundleError, ExitCode

__all__ = ["app", "command", "main"]

# `bundle --help` lists the commands in this order (the modules register them by topic).
ORDER = ("deps", "audit", "fetch", "build", "msbuild", "measure", "scan")
app.registered_commands.sort(
    key=lambda command: ORDER.index(getattr(command.callback, "__name__", ""))
)


def main() -> None:
    """Entry point: run the CLI and map library errors onto the exit-code table. Typer itself
    handles usage errors (exit 2) and typer.Exit; everything ends in SystemExit."""
    from bundler import notes

    utf8_streams()
    notes.set_sink(lambda message: typer.echo(message, err=True))
    try:
        try:
            command()()
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


def utf8_streams() -> None:
    """Output redirected to a file or pipe is UTF-8 on every system, so an `é` or CJK name in a
    path neither crashes the command (Windows would encode for cp1252, a C locale for ASCII)
    nor reaches a log as `?`. A Windows console is UTF-8 to Python already (it writes with
    WriteConsoleW). Colour is rich's choice: only on a terminal, never when NO_COLOR is set
    (docs/windows.md)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if reconfigure is None or encoding == "utf8":
            continue
        reconfigure(encoding="utf-8", errors="backslashreplace")


def command() -> Any:
    """The click command tree, its help written as paragraphs: a docstring's line breaks are
    only where its source wraps, so each paragraph becomes one line for the help formatter
    (rich or plain) to wrap at the terminal's width. A paragraph starting with \\b keeps its
    lines, as click documents."""
    root = typer.main.get_command(app)
    _unwrap(root)
    return root


def _unwrap(command: Any) -> None:
    for attribute in ("help", "short_help"):
        if getattr(command, attribute, None):
            setattr(command, attribute, paragraphs(getattr(command, attribute)))
    for param in command.params:
        if getattr(param, "help", None):
            param.help = paragraphs(param.help)
    for sub in getattr(command, "commands", {}).values():
        _unwrap(sub)


def paragraphs(text: str) -> str:
    """`text` with each paragraph (blank-line separated) joined into one line."""
    blocks = cleandoc(text).split("\n\n")
    return "\n\n".join(
        block if block.startswith("\b") else " ".join(map(str.strip, block.split("\n")))
        for block in blocks
    )
