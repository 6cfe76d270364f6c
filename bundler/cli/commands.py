"""Talk layer: the `bundle` command: every command module registered on one typer app, and the
entry point that maps library errors onto the exit-code table."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterator
from inspect import cleandoc
from typing import Any

import typer
import typer.main

from bundler.cli import (  # noqa: F401 (registers)
    audit_commands,
    build_commands,
    cache_commands,
    inspect_commands,
    measure_commands,
    profile_commands,
    publish_commands,
)
from bundler.cli.app import app
from bundler.cli.session import Session
from bundler.errors import BundleError, ExitCode

__all__ = ["app", "command", "main"]

# `bundle --help` lists the commands in this order (the modules register them by topic).
ORDER = ("deps", "audit", "fetch", "build", "msbuild", "publish", "verify", "measure", "scan")
app.registered_commands.sort(
    key=lambda command: ORDER.index(getattr(command.callback, "__name__", ""))
)


def main() -> None:
    """Entry point: run the CLI and map library errors onto the exit-code table. Typer itself
    handles usage errors (exit 2) and typer.Exit; everything ends in SystemExit. With --json,
    a failure also prints one JSON object on stdout (bundler.cli.failures)."""
    from bundler.cli.failures import json_requested, move_global_json

    utf8_streams()
    sys.argv[1:] = move_global_json(sys.argv[1:])
    as_json = json_requested(sys.argv[1:])
    session = Session()
    try:
        try:
            _run(as_json, session)
        finally:
            session.bars.stop_all()
    except BundleError as exc:
        if session.debug:
            traceback.print_exc()
        _fail(f"error: {exc.message}", exc.message, exc.exit_code, as_json)
    except Exception:
        if session.debug:
            raise
        error = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        hint = "rerun with --debug and report it"
        _fail(f"internal error: {error}; {hint}.", error, ExitCode.INTERNAL, as_json, hint)


def _run(as_json: bool, session: Session) -> None:
    """The command tree in click's standalone mode. click prints a usage error and exits from
    inside its handler, so the SystemExit's context is the error: with --json, it is printed
    again as JSON."""
    from bundler.cli.failures import click_error, failure_json, usage_hint

    root = command()
    try:
        root(obj=session)
    except SystemExit as exit:
        error = exit.__context__
        if as_json and isinstance(exit.code, int) and exit.code and click_error(error):
            assert error is not None
            message = getattr(error, "format_message", error.__str__)()
            hint = usage_hint(error, root, sys.argv[1:])
            typer.echo(failure_json(message, exit.code, hint))
        raise


def _fail(text: str, message: str, code: int, as_json: bool, hint: str | None = None) -> None:
    """The error's line on stderr, its JSON on stdout under --json, then its exit code."""
    from bundler.cli.failures import failure_json, hint_of

    typer.echo(text, err=True)
    if as_json:
        typer.echo(failure_json(message, code, hint or hint_of(message)))
    sys.exit(code)


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
    lines, as click documents. Help shown by rich has its markup escaped, so `[models]` in
    `ort-bundle[models]` is shown, not taken for a style; an argument's usage is its metavar
    (typer >= 0.16 wraps a required one in braces). The escaping waits until help is shown:
    rich's markup module takes a fifth of a second to import on a slow file system, and most
    runs show no help."""
    root = typer.main.get_command(app)
    _unwrap(root)
    if _rich_help(root):
        _escape_when_shown(root)
    return root


def _unwrap(command: Any) -> None:
    _rewrite_help(command, paragraphs)
    for param in _tree_params(command):
        if param.param_type_name == "argument" and param.metavar:
            _plain_usage(param)


def _rewrite_help(root: Any, rewrite: Callable[[str], str]) -> None:
    """Every help text of the tree under `root` (commands' help and short help, parameters'
    help) replaced by `rewrite` of it."""
    for command in _tree(root):
        for attribute in ("help", "short_help"):
            if getattr(command, attribute, None):
                setattr(command, attribute, rewrite(getattr(command, attribute)))
    for param in _tree_params(root):
        if getattr(param, "help", None):
            param.help = rewrite(param.help)


def _tree(command: Any) -> Iterator[Any]:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _tree(sub)


def _tree_params(root: Any) -> Iterator[Any]:
    for command in _tree(root):
        yield from command.params


def _rich_help(command: Any) -> bool:
    """Whether typer renders `command`'s help as rich markup (not plain click help: tools/
    usage.py, or rich not installed)."""
    import typer.core

    has_rich = getattr(typer.core, "HAS_RICH", None)  # typer >= 0.16
    if has_rich is None:
        has_rich = getattr(typer.core, "rich", None) is not None  # older releases
    return bool(has_rich) and getattr(command, "rich_markup_mode", None) == "rich"


def _escape_when_shown(root: Any) -> None:
    """Every command's help, when shown, first escapes the markup of the whole tree (a group's
    help shows its commands' short help), once."""
    escaped: list[bool] = []

    def escape_once() -> None:
        if not escaped:
            from rich.markup import escape

            _rewrite_help(root, escape)
            escaped.append(True)

    for command in _tree(root):
        command.format_help = _after(escape_once, command.format_help)


def _after(first: Callable[[], None], show: Callable[..., Any]) -> Callable[..., Any]:
    def format_help(ctx: Any, formatter: Any) -> Any:
        first()
        return show(ctx, formatter)

    return format_help


def _plain_usage(argument: Any) -> None:
    """The usage line shows a required argument as its metavar (`FILE...`), not `{FILE...}`."""
    make_metavar = argument.make_metavar

    def plain(*args: Any, **kwargs: Any) -> str:
        shown = str(make_metavar(*args, **kwargs))
        braced = shown.startswith("{") and shown.endswith("}")
        return shown[1:-1] if braced else shown

    argument.make_metavar = plain


def paragraphs(text: str) -> str:
    """`text` with each paragraph (blank-line separated) joined into one line."""
    blocks = cleandoc(text).split("\n\n")
    return "\n\n".join(
        block if block.startswith("\b") else " ".join(map(str.strip, block.split("\n")))
        for block in blocks
    )
