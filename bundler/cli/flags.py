"""Talk layer: typer's options, made from the one option table (bundler.config.option_table).
A command takes each of its options as `option(name)` (with the command's wording of the help
where the table keeps one), a group of options (bundler.cli.groups) each field as
`grouped(name, default)`; nothing else in the package calls typer.Option, so a flag is spelt,
helped and tied to its variable once (tests/test_option_table.py)."""

from __future__ import annotations

from dataclasses import field
from typing import Any

import typer

from bundler.config.option_table import OPTIONS


def option(name: str, wording: str | None = None, **more: Any) -> Any:
    """typer's option for the table's `name`, its help in `wording` (a command's own, where the
    table keeps one); `more` is what only the command line knows (a callback, eagerness)."""
    flag = OPTIONS[name]
    declared = (flag.flag, flag.short) if flag.short else (flag.flag,)
    return typer.Option(
        *declared, help=flag.wording(wording), metavar=flag.metavar, min=flag.minimum, **more
    )


def grouped(name: str, default: Any, wording: str | None = None) -> Any:
    """A group's field: its default, and the table's option `name` (bundler.cli.groups shows it
    in the group's panel)."""
    return field(default=default, metadata={"option": option(name, wording)})
