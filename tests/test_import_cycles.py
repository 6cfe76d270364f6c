"""No circle anywhere in the repository's Python (issue 39): bundler/, tools/, tests/,
benchmarks/ and examples/, every import counted, also one inside a function or under
TYPE_CHECKING, where tests/test_layers.py counts module-level imports of bundler/ only. A
circle through function-level imports works only as long as nobody calls the function at
import time; it still ties the two modules into one."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.graphs import circles
from tests.support.paths import REPO
from tests.support.trees import write_tree

FOLDERS = ("bundler", "tools", "tests", "benchmarks", "examples")


def modules(root: Path, folders: tuple[str, ...] = FOLDERS) -> Iterator[tuple[str, Path]]:
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def import_graph(root: Path, folders: tuple[str, ...] = FOLDERS) -> dict[str, set[str]]:
    """module -> the repository's modules it imports anywhere in it (`from a import b` is a.b
    when that is a module, else a)."""
    known = dict(modules(root, folders))
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    member = f"{node.module}.{alias.name}"
                    found.add(member if member in known else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {target for target in found if target in known and target != name}
    return graph


def test_no_circle_in_the_repository() -> None:
    graph = import_graph(REPO)
    assert len(graph) > 250  # every folder was read (278 modules on 2026-12-05)
    assert circles(graph) == []


def test_a_planted_circle_through_a_function_is_found(tmp_path: Path) -> None:
    files = {
        "tools/a.py": "def f():\n    from tools import b\n",
        "tools/b.py": "from tools.c import x\n",
        "tools/c.py": "import tools.a\nx = 1\n",
        "tools/d.py": "import tools.a\n",
    }
    graph = import_graph(write_tree(tmp_path, files), ("tools",))
    assert circles(graph) == [["tools.a", "tools.b", "tools.c"]]
