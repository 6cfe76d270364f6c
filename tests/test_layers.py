"""The package's shape, read from its source with `ast`: layers, cycles, who may print.

- Layers: a small core (`bundler/*.py`) and wings (`acquire/`, `render/`, `ship/`, `audit/`,
  `rules/`, `cli/`). A module may import its own group and the groups LAYERS allows it: the
  core nothing above it, a wing the core and, where it must, a wing below it; never a wing
  above or beside it. Every import counts, also one inside a function or under TYPE_CHECKING.
- No cycles between modules (imports at module level, where a cycle breaks an import).
- Only `bundler/cli/` and the entry point print or exit: library code reports through
  bundler.notes or raises a BundleError.
- Every module's docstring opens with its layer (read, decide, act, talk) and its job.

Each checker is also run on a planted violation, so the test can fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "bundler"
WINGS = ("acquire", "render", "ship", "audit", "rules", "cli")
# group -> the groups it may import (besides itself), lowest first
LAYERS: dict[str, tuple[str, ...]] = {
    "core": (),
    "acquire": ("core",),
    "render": ("core", "acquire"),
    "ship": ("core", "acquire", "render"),
    "audit": ("core", "acquire", "render"),
    "rules": ("core", "acquire"),
    "cli": ("core", "acquire", "render", "ship", "audit", "rules"),
    "entry": ("core", "cli"),
}
MAY_PRINT = ("cli", "entry")
PRINTING = {"print", "sys.exit", "sys.stderr.write", "sys.stdout.write", "os._exit", "exit"}
PRINTING |= {"typer.echo", "typer.secho", "quit"}
LAYER_WORDS = ("Read layer", "Decide layer", "Act layer", "Talk layer", "Read/decide layer")


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def group(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in WINGS:
        return parts[1]
    if len(parts) >= 2 and parts[1] in ("entry", "__main__"):
        return "entry"
    return "core"


def sources(root: Path = PACKAGE) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield module_name(path, root), ast.parse(path.read_text(encoding="utf-8"))


def packages(root: Path = PACKAGE) -> set[str]:
    return {module_name(path, root) for path in root.rglob("__init__.py")}


def imports(tree: ast.Module, top_level_only: bool = False) -> Iterator[str]:
    """The bundler modules a module imports (`from bundler import x` counts as bundler.x)."""
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bundler"):
            if node.module == "bundler":
                yield from (f"bundler.{alias.name}" for alias in node.names)
            else:
                yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("bundler"))


def layer_violations(modules: Iterator[tuple[str, ast.Module]]) -> list[str]:
    found = []
    for name, tree in modules:
        mine = group(name)
        for target in imports(tree):
            theirs = group(target)
            if theirs != mine and theirs not in LAYERS[mine] and target != "bundler":
                found.append(f"{name} ({mine}) imports {target} ({theirs})")
    return found


def cycles(modules: Iterator[tuple[str, ast.Module]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), module-level imports."""
    graph = {name: set(imports(tree, top_level_only=True)) for name, tree in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def printing_calls(modules: Iterator[tuple[str, ast.Module]]) -> list[str]:
    found = []
    for name, tree in modules:
        if group(name) in MAY_PRINT:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in PRINTING:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node.func)}()")
    return found


def undeclared_layers(
    modules: Iterator[tuple[str, ast.Module]], skipped: set[str] | None = None
) -> list[str]:
    """Modules whose docstring does not open with their layer (packages and __main__ aside)."""
    found = []
    for name, tree in modules:
        text = ast.get_docstring(tree) or ""
        if name in (skipped or set()) or name.endswith("__main__"):
            continue
        if not text.startswith(LAYER_WORDS):
            found.append(f"{name}: {text.splitlines()[0] if text else '(no docstring)'}")
    return found


# --- the package as it is ------------------------------------------------------------------------


def test_no_module_imports_a_layer_above_or_beside_it() -> None:
    assert layer_violations(sources()) == []


def test_no_import_cycles() -> None:
    assert cycles(sources()) == []


def test_only_the_cli_prints_or_exits() -> None:
    assert printing_calls(sources()) == []


def test_every_module_says_its_layer_first() -> None:
    assert undeclared_layers(sources(), packages()) == []


# --- and each checker on a planted violation ----------------------------------------------------


def planted(tmp_path: Path, files: dict[str, str]) -> Iterator[tuple[str, ast.Module]]:
    root = tmp_path / "bundler"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sources(root)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"plan.py": "def f():\n    from bundler.audit.judge import audit\n"},
            "bundler.plan (core) imports bundler.audit.judge (audit)",
        ),
        (
            {"ship/pipeline.py": "from bundler.audit.checks import CHECKS\n"},
            "bundler.ship.pipeline (ship) imports bundler.audit.checks (audit)",
        ),
        (
            {"acquire/cache.py": "from bundler.cli import views\n"},
            "bundler.acquire.cache (acquire) imports bundler.cli (cli)",
        ),
    ],
)
def test_a_planted_upward_import_is_found(
    files: dict[str, str], expected: str, tmp_path: Path
) -> None:
    assert layer_violations(planted(tmp_path, files)) == [expected]


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    files = {"a.py": "import bundler.b\n", "b.py": "from bundler import a\n", "c.py": ""}
    assert cycles(planted(tmp_path, files)) == [["bundler.a", "bundler.b"]]


def test_a_planted_print_is_found(tmp_path: Path) -> None:
    files = {
        "acquire/cache.py": "import sys\ndef f():\n    print('x')\n    sys.exit(3)\n",
        "cli/commands.py": "print('fine here')\n",
    }
    assert printing_calls(planted(tmp_path, files)) == [
        "bundler.acquire.cache:3: print()",
        "bundler.acquire.cache:4: sys.exit()",
    ]


def test_a_planted_module_without_its_layer_is_found(tmp_path: Path) -> None:
    files = {"good.py": '"""Read layer: one job."""\n', "bad.py": '"""Does things."""\n'}
    assert undeclared_layers(planted(tmp_path, files)) == ["bundler.bad: Does things."]


# --- size ---------------------------------------------------------------------------------------

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60  # from the first statement: a command's typer options are declarations


def oversized(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            found.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}: {node.name}() {length} lines")
    return found


def test_no_module_over_500_lines_and_no_function_over_60() -> None:
    assert oversized() == []


def test_a_planted_long_function_is_found(tmp_path: Path) -> None:
    body = "".join(f"    x{n} = {n}\n" for n in range(61))
    root = tmp_path / "bundler"
    root.mkdir()
    (root / "big.py").write_text("def f():\n" + body)
    assert oversized(root) == ["bundler/big.py: f() 61 lines"]
