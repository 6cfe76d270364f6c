"""The one command line of every tool that regenerates committed files: print what it would
write, `--write` it, or `--check` that the committed files are what it would write.

A generator names its files, each with the function that renders its text, and this does the
rest the same way for all: the docs pages (tools.docs.usage, tools.docs.docs_index,
tools.docs.repository_map: one file each) and the generated parts of manifests/
(tools.manifests.record_files: the hand-written profiles' [[files]] blocks;
tools.manifests.ep_facts: the EP packs' generated blocks).

- no flag: print each file as it should be (with a `==> FILE <==` line before each when there
  are several), change nothing;
- `--write`: rewrite each file that differs (UTF-8, `\\n` line ends), then have the file's loader
  read it back: what was written must load;
- `--check`: change nothing; name each file that differs and the command that mends it, exit 1.

A file that cannot be rendered (GenerationError: the message says which file and what to do)
stops the tool with exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class GenerationError(Exception):
    """A file cannot be rendered; the message says which file and what to do."""


def _nothing_reads_it(path: Path) -> object:
    return None  # a docs page: no loader reads it back


@dataclass(frozen=True)
class Generated:
    """One committed file, and how it is made."""

    path: Path
    render: Callable[[], str]  # the text the file should hold
    load: Callable[[Path], object] = _nothing_reads_it  # reads a written file back, or raises

    @property
    def name(self) -> str:
        """The file as messages name it: relative to the repository where it lies inside."""
        path = self.path.resolve()
        return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(self.path)

    def current(self) -> str | None:
        return self.path.read_text(encoding="utf-8") if self.path.is_file() else None


def generated_main(
    module: str,
    description: str,
    files: Callable[[argparse.Namespace], Sequence[Generated]],
    argv: list[str] | None = None,
    arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """The command line of the generator `module` (`tools.docs.usage`): its own `arguments`
    (positional files, a cache), then print, --write or --check the `files` they choose."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    if arguments is not None:
        arguments(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite what is out of date")
    mode.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a file is out of date"
    )
    args = parser.parse_args(argv)
    try:
        chosen = files(args)
        if args.write:
            return write(chosen)
        if args.check:
            return check(chosen, f"python -m {module} --write")
        return show(chosen)
    except GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def show(files: Sequence[Generated]) -> int:
    for item in files:
        if len(files) > 1:
            print(f"==> {item.name} <==", flush=True)
        sys.stdout.write(item.render())
    return 0


def write(files: Sequence[Generated]) -> int:
    for item in files:
        text = item.render()
        if text == item.current():
            print(f"{item.name}: up to date")
            continue
        item.path.write_text(text, encoding="utf-8", newline="\n")
        item.load(item.path)
        print(f"{item.name}: written")
    return 0


def check(files: Sequence[Generated], mend: str) -> int:
    stale = 0
    for item in files:
        if item.render() == item.current():
            print(f"{item.name}: up to date")
        else:
            print(f"{item.name} is out of date: run {mend}", file=sys.stderr)
            stale += 1
    return 1 if stale else 0
