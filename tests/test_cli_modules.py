"""Command modules have one suffix (issue 39): a module of `bundler/cli/` that registers a
command is `*_commands.py`, and a `*_commands.py` registers one; its views are `*_views.py`."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO
from tests.support.trees import write_tree


def registers_a_command(path: Path) -> bool:
    """Whether the module calls `<something>.command(...)`, as a decorator or a call."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "command"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    )


def misnamed(cli: Path) -> list[str]:
    wrong = []
    for path in sorted(cli.glob("*.py")):
        named = path.stem.endswith("_commands")
        if registers_a_command(path) != named:
            wrong.append(path.name)
    return wrong


def test_every_command_module_is_named_for_it() -> None:
    assert misnamed(REPO / "bundler" / "cli") == []


def test_a_planted_misnamed_module_is_found(tmp_path: Path) -> None:
    registering = "from x import app\n\n\n@app.command()\ndef go() -> None: ...\n"
    write_tree(tmp_path, {"audit.py": registering, "build_commands.py": "x = 1\n"})
    assert misnamed(tmp_path) == ["audit.py", "build_commands.py"]
