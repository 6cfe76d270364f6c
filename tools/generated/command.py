"""The `--write` / `--check` / print command line that every generated docs page shares.

A generator renders its page as a string; this writes it, checks that the committed page equals
it (exit 1 with the command that mends it), or prints it. Used by tools.docs.usage,
tools.docs.docs_index and tools.docs.repository_map.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class PageError(Exception):
    """The page cannot be rendered; the message says which file and what to do."""


def page_main(
    tool: str,
    description: str,
    page: Path,
    render: Callable[[], str],
    argv: list[str] | None = None,
) -> int:
    """Print, write (--write) or check (--check) `page` against what `render` gives; `tool` is
    the generator's module (`tools.docs.usage`)."""
    name = page.relative_to(REPO).as_posix()
    parser = argparse.ArgumentParser(prog=f"python -m {tool}", description=description)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {name}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 when {name} is out of date")
    args = parser.parse_args(argv)
    try:
        text = render()
    except PageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.write:
        page.write_text(text, encoding="utf-8", newline="\n")
        return 0
    if args.check:
        current = page.read_text(encoding="utf-8") if page.is_file() else None
        if current != text:
            print(f"{name} is out of date: run python -m {tool} --write", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0
