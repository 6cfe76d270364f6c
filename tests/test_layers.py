"""The package's shape, read from its source with `ast`: layers, cycles, who may print.

- Layers: a core and wings (`acquire/`, `render/`, `ship/`, `audit/`, `rules/`, `measure/`,
  `publish/`, `cli/`). The core is a few modules at the top (`bundler/*.py`: errors, findings, the
  reporter) and the packages of CORE_PACKAGES, each a concept (what a build targets, binaries,
  the closure, pruning, EP packs, configuration, the disk). A module may import its own group
  and the groups LAYERS allows it: a core package the top modules and the core packages below
  it, a wing the whole core and, where it must, a wing below it; never a group above or beside
  it. Every import counts, also one inside a function or under TYPE_CHECKING.
- No cycles between modules (imports at module level, where a cycle breaks an import).
- Only `config/` reads the process environment (bundler.config.environment): library code gets
  values as arguments or from its helpers, so a command can say where each came from.
- Only `bundler/cli/` and the entry point print or exit: library code reports through
  the reporter the CLI hands it (bundler.reporter) or raises a BundleError.
- Every module's docstring opens with its layer (read, decide, act, talk) and its job, and
  imports point one way: read and decide (the lowest, which may import each other) < act < talk.
  A module imports only modules of its own rank or lower, every import counted.

Each checker is also run on a planted violation, so the test can fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.graphs import circles
from tests.support.paths import REPO
from tests.support.trees import write_tree

PACKAGE = REPO / "bundler"
WINGS = ("acquire", "render", "ship", "audit", "rules", "measure", "publish", "cli")
CORE_PACKAGES = ("target", "config", "disk", "binary", "closure", "pruning", "eps")
CORE = ("core", *CORE_PACKAGES)  # "core": the modules at the top of bundler/
# group -> the groups it may import (besides itself), lowest first
LAYERS: dict[str, tuple[str, ...]] = {
    "core": (),
    "target": ("core",),
    "config": ("core", "target"),
    "disk": ("core", "config"),
    "binary": ("core", "target"),
    "closure": ("core", "target", "binary", "disk"),
    "pruning": ("core", "target", "config", "disk", "closure"),
    "eps": ("core", "target", "config"),
    "acquire": CORE,
    "render": (*CORE, "acquire"),
    "ship": (*CORE, "acquire", "render"),
    "audit": (*CORE, "acquire", "render"),
    "rules": (*CORE, "acquire"),
    "measure": CORE,
    "publish": (*CORE, "acquire", "render"),
    "cli": (*CORE, "acquire", "render", "ship", "audit", "rules", "measure", "publish"),
    "entry": ("core", "cli"),
}
MAX_TOP_FILES = 8  # issue 39: a few modules at the top of bundler/, the rest in packages
MAY_PRINT = ("cli", "entry")
PRINTING = {"print", "sys.exit", "sys.stderr.write", "sys.stdout.write", "os._exit", "exit"}
PRINTING |= {"typer.echo", "typer.secho", "quit"}
LAYER_WORDS = ("Read layer", "Decide layer", "Act layer", "Talk layer", "Read/decide layer")
# The label a docstring opens with -> its rank: a module imports only its own rank or lower.
RANKS = {"read": 0, "decide": 0, "read/decide": 0, "act": 1, "talk": 2}


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def group(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in WINGS + CORE_PACKAGES:
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
    """Circles of more than one module, module-level imports (where a circle breaks an import)."""
    graph = {name: set(imports(tree, top_level_only=True)) for name, tree in modules}
    return circles({name: targets & graph.keys() for name, targets in graph.items()})


ENVIRONMENT = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
READS_ENVIRONMENT = ("config",)  # the groups that may


def environment_reads(modules: Iterator[tuple[str, ast.Module]]) -> list[str]:
    """`os.environ`, `os.getenv` and the like outside config/ (an import of them counts)."""
    found = []
    for name, tree in modules:
        if group(name) in READS_ENVIRONMENT:
            continue
        for node in ast.walk(tree):
            used = isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT
            used = used and isinstance(node.value, ast.Name) and node.value.id == "os"
            imported = isinstance(node, ast.ImportFrom) and node.module == "os"
            imported = imported and any(alias.name in ENVIRONMENT for alias in node.names)
            if used or imported:
                found.append(f"{name}:{node.lineno}")
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


def layer_of(name: str, tree: ast.Module) -> str | None:
    """The label the docstring opens with ("read", "decide", "act", ...); `__main__` is the
    entry point, talk. None: no label (a package's `__init__`), which counts as the lowest rank,
    so a package with code above that must say its layer."""
    text = ast.get_docstring(tree) or ""
    word = text.split(" layer", 1)[0].lower()
    if word in RANKS:
        return word
    return "talk" if name.endswith("__main__") else None


def imported_modules(tree: ast.Module, known: set[str]) -> Iterator[str]:
    """Every bundler module a module imports, anywhere in it (functions, TYPE_CHECKING):
    `from bundler.audit import winjob` is bundler.audit.winjob, `from bundler import
    __version__` the package bundler."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module or ""):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                yield name if name in known else str(node.module)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if _ours(alias.name))


def _ours(module: str) -> bool:
    return module == "bundler" or module.startswith("bundler.")


def direction_violations(modules: Iterator[tuple[str, ast.Module]]) -> list[str]:
    """Imports of a module whose layer ranks above the importer's (RANKS)."""
    trees = dict(modules)
    layers = {name: layer_of(name, tree) for name, tree in trees.items()}

    def rank(layer: str | None) -> int:
        return RANKS[layer] if layer else 0

    found = set()
    for name, tree in trees.items():
        for target in imported_modules(tree, set(trees)):
            mine, theirs = layers[name], layers.get(target)
            if rank(theirs) > rank(mine):
                found.add(f"{name} ({mine or 'no layer'}) imports {target} ({theirs})")
    return sorted(found)


# --- the package as it is ------------------------------------------------------------------------


def test_no_module_imports_a_layer_above_or_beside_it() -> None:
    assert layer_violations(sources()) == []


def test_the_top_of_the_package_holds_a_few_modules() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_FILES, top


def test_every_package_of_the_core_is_a_known_group() -> None:
    """A new package under bundler/ is placed in LAYERS, or its modules would count as the
    top's (which may import nothing)."""
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert folders == set(WINGS + CORE_PACKAGES)


def test_the_package_map_lists_the_core_packages_in_this_order() -> None:
    from tools.docs.repository_map import CORE_PACKAGES as MAPPED

    assert MAPPED == CORE_PACKAGES


def test_no_import_cycles() -> None:
    assert cycles(sources()) == []


def test_only_config_reads_the_environment() -> None:
    assert environment_reads(sources()) == []


def test_a_planted_environment_read_is_found(tmp_path: Path) -> None:
    files = {
        "acquire/artifacts.py": "import os\nbase = os.environ.get('CUDA_PATH')\n",
        "audit/loadrun.py": "from os import getenv\n",
        "cli/session.py": "import os\ndef f():\n    return os.getenv('BUNDLE_DEBUG')\n",
        "config/environment.py": "import os\nvalue = os.environ.get('X')\n",
    }
    assert environment_reads(planted(tmp_path, files)) == [
        "bundler.acquire.artifacts:2",
        "bundler.audit.loadrun:1",
        "bundler.cli.session:3",
    ]


def test_only_the_cli_prints_or_exits() -> None:
    assert printing_calls(sources()) == []


def test_every_module_says_its_layer_first() -> None:
    assert undeclared_layers(sources(), packages()) == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert direction_violations(sources()) == []


# --- and each checker on a planted violation ----------------------------------------------------


def planted(tmp_path: Path, files: dict[str, str]) -> Iterator[tuple[str, ast.Module]]:
    return sources(write_tree(tmp_path / "bundler", files))


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
        (  # between core packages: the target does not know the closure
            {"target/profiles.py": "from bundler.closure.plan import Plan\n"},
            "bundler.target.profiles (target) imports bundler.closure.plan (closure)",
        ),
        (  # the top of the core imports no package
            {"errors.py": "from bundler.disk import files\n"},
            "bundler.errors (core) imports bundler.disk (disk)",
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


READ = '"""Read layer: facts."""\n'
DECIDE = '"""Decide layer: choices."""\n'
ACT = '"""Act layer: writes."""\n'
TALK = '"""Talk layer: prints."""\n'


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # inside a function
            {"plan.py": DECIDE + "def f():\n    from bundler.lock import Lock\n", "lock.py": ACT},
            "bundler.plan (decide) imports bundler.lock (act)",
        ),
        (  # under TYPE_CHECKING, a module named as a package's member
            {
                "ship/deploy.py": ACT + "if TYPE_CHECKING:\n    from bundler.cli import views\n",
                "cli/__init__.py": "",
                "cli/views.py": TALK,
            },
            "bundler.ship.deploy (act) imports bundler.cli.views (talk)",
        ),
        (  # `from bundler import ...`: a module counts, a name of the package does not
            {
                "__init__.py": '"""bundle."""\n__version__ = "0"\n',
                "pe.py": READ + "from bundler import __version__, files\n",
                "files.py": ACT,
            },
            "bundler.pe (read) imports bundler.files (act)",
        ),
        (  # a package without a label counts as the lowest rank
            {
                "rules/derive/__init__.py": '"""derive."""\nimport bundler.acquire.artifacts\n',
                "acquire/artifacts.py": ACT,
            },
            "bundler.rules.derive (no layer) imports bundler.acquire.artifacts (act)",
        ),
    ],
)
def test_a_planted_import_above_the_layer_is_found(
    files: dict[str, str], expected: str, tmp_path: Path
) -> None:
    assert direction_violations(planted(tmp_path, files)) == [expected]


def test_imports_at_or_below_the_layer_pass(tmp_path: Path) -> None:
    files = {
        "pe.py": READ + "from bundler import plan\n",
        "plan.py": DECIDE + "from bundler import pe\n",
        "files.py": ACT + "from bundler import pe, plan\n",
        "cli.py": TALK + "from bundler import files, plan\n",
        "__main__.py": "from bundler import cli\n",
    }
    assert direction_violations(planted(tmp_path, files)) == []


# --- size ---------------------------------------------------------------------------------------

MAX_MODULE_LINES = 399  # issue 30: every module under 400 lines
MAX_CLASS_LINES = 150
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
            if isinstance(node, ast.ClassDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_CLASS_LINES:
                    found.append(f"{name}: class {node.name} {length} lines")
    return found


def test_no_module_of_400_lines_no_class_over_150_and_no_function_over_60() -> None:
    assert oversized() == []


def shared_file_names(root: Path = PACKAGE) -> dict[str, list[str]]:
    """File names that more than one module of the package has (packages' __init__ aside)."""
    where: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name != "__init__.py":
            where.setdefault(path.name, []).append(path.relative_to(root.parent).as_posix())
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_two_modules_share_a_file_name() -> None:
    """A name says what a module holds: `build.py` in two wings says nothing (issue 30)."""
    assert shared_file_names() == {}


def test_a_planted_shared_file_name_is_found(tmp_path: Path) -> None:
    root = tmp_path / "bundler"
    for name in ("cli/build.py", "ship/build.py", "ship/__init__.py", "cli/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    assert shared_file_names(root) == {
        "build.py": ["bundler/cli/build.py", "bundler/ship/build.py"]
    }


def test_a_planted_long_function_is_found(tmp_path: Path) -> None:
    body = "".join(f"    x{n} = {n}\n" for n in range(61))
    root = tmp_path / "bundler"
    root.mkdir()
    (root / "big.py").write_text("def f():\n" + body)
    assert oversized(root) == ["bundler/big.py: f() 61 lines"]
    methods = "".join(f"    def m{n}(self):\n        return {n}\n\n" for n in range(50))
    (root / "big.py").write_text("class C:\n" + methods + "\n" * 248)  # a class of 150 lines
    assert oversized(root) == []  # and a module of 399
    (root / "big.py").write_text("class C:\n" + methods + "    x = 1\n" + "\n" * 248)
    assert oversized(root) == ["bundler/big.py: 400 lines", "bundler/big.py: class C 152 lines"]
