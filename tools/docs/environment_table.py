"""The environment variables' table of docs/building.md, generated from the one table of
variables (bundler.config.variables), whose names are derived from the options they stand in
for (bundler.config.option_table); tests/test_environment_table.py keeps the page equal to it.

    python -m tools.docs.environment_table            # print docs/building.md as it should be
    python -m tools.docs.environment_table --write    # rewrite the table in docs/building.md
    python -m tools.docs.environment_table --check    # exit 1 when the page's table differs
"""

from __future__ import annotations

import sys

from bundler.config.variables import markdown
from tools.generated.command import REPO, Generated, GenerationError, generated_main

BUILDING_MD = REPO / "docs" / "building.md"
HEAD = "| variable | what it sets | instead of |"


def page() -> str:
    """docs/building.md with its table of variables as bundler.config.variables has it: the
    rows from HEAD to the first line that is not a table row are replaced."""
    lines = BUILDING_MD.read_text(encoding="utf-8").split("\n")
    if HEAD not in lines:
        raise GenerationError(f"{BUILDING_MD.name} has no table headed {HEAD!r}; put one back")
    start = lines.index(HEAD)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join([*lines[:start], markdown(), *lines[end:]])


def main(argv: list[str] | None = None) -> int:
    building = Generated(BUILDING_MD, page)
    return generated_main(__spec__.name, __doc__.splitlines()[0], lambda _: [building], argv)


if __name__ == "__main__":
    sys.exit(main())
