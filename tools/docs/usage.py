"""Render the `--help` of every `bundle` command as one Markdown page (docs/usage.md).

The commands are discovered from the CLI itself (bundler.cli.app, walked recursively), so a new
command, option or help text shows up here without editing this file. Help is plain text at a
fixed width (80 columns, no colour, no rich boxes), so the page is the same on every machine
and the docs site shows it without horizontal scrolling.

    python -m tools.docs.usage            # print the page
    python -m tools.docs.usage --write    # write it to docs/usage.md
    python -m tools.docs.usage --check    # exit 1 when docs/usage.md differs from the CLI's help

tests/test_docs.py keeps docs/usage.md equal to what this renders.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

# Before typer is imported: plain click help, no colour, a fixed terminal width.
os.environ["TYPER_USE_RICH"] = "0"
os.environ["NO_COLOR"] = "1"
os.environ["TERM"] = "dumb"
os.environ["COLUMNS"] = str(WIDTH := 80)

import typer
import typer.core

from tools.generated.command import REPO, Generated, generated_main

# The environment variable is read when typer.core is first imported; switch rich off here too
# in case it already was (typer >= 0.16 has HAS_RICH, older releases test the `rich` module).
if hasattr(typer.core, "HAS_RICH"):
    typer.core.HAS_RICH = False
elif hasattr(typer.core, "rich"):
    typer.core.rich = None

from bundler.cli.commands import command

USAGE_MD = REPO / "docs" / "usage.md"
HEADER = """\
# Usage

The `--help` of every `bundle` command and sub-command. This page is generated
from the command line itself by `python -m tools.docs.usage --write`; do not
edit it by hand (a test fails when it differs from the CLI's help).
"""


def helps() -> Iterator[tuple[str, str]]:
    """(command path, help text) of the root command and every (sub-)command, depth first, in
    the order the CLI lists them."""
    root = command()

    def walk(command: Any, path: tuple[str, ...], parent: Any) -> Iterator[tuple[str, str]]:
        ctx = command.context_class(
            command,
            info_name=path[-1],
            parent=parent,
            terminal_width=WIDTH,
            max_content_width=WIDTH,
        )
        yield " ".join(path), command.get_help(ctx)
        # a group (click.Group, or typer's vendored click group) has `commands`
        if getattr(command, "commands", None):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not getattr(sub, "hidden", False):
                    yield from walk(sub, (*path, name), ctx)

    yield from walk(root, ("bundle",), None)


def render() -> str:
    """The whole Markdown page."""
    sections = [HEADER]
    for path, text in helps():
        body = "\n".join(line.rstrip() for line in text.strip("\n").splitlines())
        sections.append(f"## `{path}`\n\n```text\n{body}\n```\n")
    return "\n".join(sections)


def main(argv: list[str] | None = None) -> int:
    page = Generated(USAGE_MD, render)
    return generated_main(__spec__.name, __doc__.splitlines()[0], lambda _: [page], argv)


if __name__ == "__main__":
    sys.exit(main())
