"""No hidden global state in bundler/: no `global` statement, no look-up in sys.modules, no
module-level value that changes, no cache kept between calls.

A module that rebinds a global, changes a module-level list or dict, keeps a functools cache, or
reaches another module through sys.modules to reset what it keeps, links code in a way no import
test sees (issue 30). What a run needs is owned by an object that is passed in: the cache folder
(each command resolves its --cache-dir and hands it down: Templates, Cache), the reporter that
carries notes and progress (bundler.reporter, made by the CLI's Session), the progress bars that
are still drawing (bundler.cli.progress.ProgressBars), --debug (the Session). Module-level
tables are constants: read, never changed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO

PACKAGE = REPO / "bundler"
# Calls that change a list, dict or set in place.
MUTATING = {"append", "extend", "insert", "update", "add", "pop", "popitem", "clear", "remove"}
MUTATING |= {"discard", "setdefault", "sort", "reverse", "__setitem__", "__delitem__"}
KEPT = {"cache", "lru_cache", "cached_property"}  # decorators that keep results between calls


def violations(source: str, name: str) -> list[str]:
    """`name:line: what` for each `global` statement, each use of sys.modules, each change of
    a module-level name and each module-level function that keeps a cache, in the module text
    `source` (`name`: its path under the repository)."""
    tree = ast.parse(source)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"{name}:{node.lineno}: global {', '.join(node.names)}")
        elif _is_sys_modules(node):
            found.append(f"{name}:{getattr(node, 'lineno', 0)}: sys.modules")
    found += _changed_module_names(tree, name) + _kept_caches(tree, name)
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def _module_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def _changed_module_names(tree: ast.Module, name: str) -> list[str]:
    """A module-level name changed in place anywhere in its module: `X[k] = v`, `del X[k]`,
    `X += ...` inside a function, `X.append(...)` and the other MUTATING calls."""
    module_names = _module_names(tree)
    found = []
    for node in ast.walk(tree):
        changed: ast.expr | None = None
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
            changed = next((t.value for t in targets if isinstance(t, ast.Subscript)), None)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            changed = node.func.value if node.func.attr in MUTATING else None
        if isinstance(changed, ast.Name) and changed.id in module_names:
            found.append(f"{name}:{node.lineno}: module-level {changed.id} changed")
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                target = node.target if isinstance(node, ast.AugAssign) else None
                if isinstance(target, ast.Name) and target.id in module_names:
                    found.append(f"{name}:{node.lineno}: module-level {target.id} changed")
    return found


def _kept_caches(tree: ast.Module, name: str) -> list[str]:
    """A module-level function whose results a functools cache keeps between calls."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                called = decorator.func if isinstance(decorator, ast.Call) else decorator
                word = (
                    called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
                )
                if word in KEPT:
                    found.append(f"{name}:{node.lineno}: {node.name} keeps a cache")
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
    `in` and `from sys import modules` are all found, in every function."""
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
        "bundler/cli/commands.py:3: sys.modules",
    ]


def test_module_state_that_changes_is_found() -> None:
    """The shapes issue 30 removed: a list of live bars, a dict flag set by a callback, a sink
    swapped in, a functools cache; a constant table that is only read is not state."""
    planted = (
        "import functools\n"
        "from functools import cache\n"
        "_live = []\n"
        "_debug = {'on': False}\n"
        "_sink: list = [print]\n"
        "TABLE = {'a': 1}\n"
        "count = 0\n"
        "def start(bar):\n"
        "    _live.append(bar)\n"
        "def options(debug):\n"
        "    _debug['on'] = debug\n"
        "    count += 1\n"
        "def set_sink(sink):\n"
        "    _sink[0] = sink\n"
        "    return TABLE['a'], TABLE.get('b')\n"
        "@cache\n"
        "def patterns():\n"
        "    return ()\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def more():\n"
        "    return ()\n"
    )
    assert violations(planted, "bundler/cli/app.py") == [
        "bundler/cli/app.py:9: module-level _live changed",
        "bundler/cli/app.py:11: module-level _debug changed",
        "bundler/cli/app.py:12: module-level count changed",
        "bundler/cli/app.py:14: module-level _sink changed",
        "bundler/cli/app.py:17: patterns keeps a cache",
        "bundler/cli/app.py:20: more keeps a cache",
    ]
