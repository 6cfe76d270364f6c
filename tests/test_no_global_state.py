"""No hidden global state in bundler/: no `global` statement and no look-up in sys.modules.

A module that rebinds a global, or reaches another module through sys.modules to reset what it
keeps, links code in a way no import test sees (issue 30): the cache folder, for one, is
resolved by each command from its own --cache-dir and passed down (Templates, Cache). The one
look-up allowed is the CLI's interrupt handler stopping the progress bars of a command that
imported them (bundler/cli/commands.py, main): importing the bars there would cost every
command their start-up.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "bundler"
ALLOWED = {("bundler/cli/commands.py", "main")}  # (file, function): sys.modules allowed there


def violations(source: str, name: str) -> list[str]:
    """`name:line: what` for each `global` statement and each use of sys.modules in the
    module text `source` (`name`: its path under the repository), outside ALLOWED."""
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Global):
            found.append(f"{name}:{node.lineno}: global {', '.join(node.names)}")
        elif _is_sys_modules(node) and (name, function) not in ALLOWED:
            found.append(f"{name}:{getattr(node, 'lineno', 0)}: sys.modules")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "")
    return found


def _is_sys_modules(node: ast.AST) -> bool:
    """`sys.modules` (any use: [...], .get, `in`), or `from sys import modules`."""
    if isinstance(node, ast.Attribute) and node.attr == "modules":
        return isinstance(node.value, ast.Name) and node.value.id == "sys"
    if isinstance(node, ast.ImportFrom) and node.module == "sys":
        return any(alias.name == "modules" for alias in node.names)
    return False


def package_violations(root: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        found += violations(path.read_text(encoding="utf-8"), name)
    return found


def test_bundler_keeps_no_global_state() -> None:
    assert package_violations(PACKAGE) == []


def test_a_global_statement_is_found() -> None:
    planted = "_chosen = None\n\ndef choose(folder):\n    global _chosen\n    _chosen = folder\n"
    assert violations(planted, "bundler/acquire/cache.py") == [
        "bundler/acquire/cache.py:4: global _chosen"
    ]


def test_every_look_up_in_sys_modules_is_found(tmp_path: Path) -> None:
    """Written into a package of its own, as a module of bundler/ would be: subscript, .get,
    `in` and `from sys import modules` are all found; the allowed function only in its file."""
    package = tmp_path / "bundler"
    (package / "acquire").mkdir(parents=True)
    (package / "acquire" / "cache.py").write_text(
        "import sys\n"
        "from sys import modules\n"
        "def choose():\n"
        '    sys.modules["bundler.render.kept"].cache_folder.cache_clear()\n'
        '    engine = sys.modules.get("bundler.render.engine")\n'
        '    return "x" in sys.modules\n'
        "def main():\n"
        "    sys.modules.clear()\n",
        encoding="utf-8",
    )
    (package / "cli").mkdir()
    (package / "cli" / "commands.py").write_text(
        "import sys\ndef main():\n    sys.modules['bundler.cli.progress'].stop_all()\n",
        encoding="utf-8",
    )
    assert package_violations(package) == [
        "bundler/acquire/cache.py:2: sys.modules",
        "bundler/acquire/cache.py:4: sys.modules",
        "bundler/acquire/cache.py:5: sys.modules",
        "bundler/acquire/cache.py:6: sys.modules",
        "bundler/acquire/cache.py:8: sys.modules",
    ]
