"""The tests' own shape, read from their source with `ast`: no module imports a test module.

A test module holds tests. What several of them share (helpers, constants, fixtures) lives in
tests/support/, in a module named by what it holds, so that a test module can be run, changed or
removed on its own (issue 39).

- Under tests/ (the test modules, tests/support/, tests/conftest.py, tests/fixtures/), no module
  imports a test module: one whose name's last part starts with `test_` (`tests.test_build`,
  `from tests import test_build`, `from ..test_build import build`, a bare `test_build`).
- Outside tests/ (bundler/, tools/, benchmarks/, examples/), no module imports one either;
  tests.support and tests.conftest may be imported there (a tool runs Wine the way the tests do).

Every import counts, also one inside a function. Each checker is also run on a planted
violation, so the test can fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.paths import REPO
from tests.support.tiers import shares_out
from tests.support.trees import write_tree

TESTS = ("tests",)
OUTSIDE = ("bundler", "tools", "benchmarks", "examples")


def python_files(root: Path, folders: tuple[str, ...]) -> list[Path]:
    return sorted(path for folder in folders for path in (root / folder).rglob("*.py"))


def imported(node: ast.Import | ast.ImportFrom, path: Path, root: Path) -> Iterator[str]:
    """The modules an import statement imports: `import a.b` is a.b; `from a import b` is a, and
    a.b too where a is a package (a folder under `root`), so `from tests import test_build` is
    tests.test_build but `from tests.conftest import test_cache_dir` is only tests.conftest. A
    relative import is resolved from `path`'s package."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    else:
        parts: list[str] = []
        if node.level:  # relative: `path`'s package, then up one package per extra dot
            package = path.relative_to(root).parent.parts
            parts = list(package[: len(package) - node.level + 1])
        base = ".".join([*parts, *([node.module] if node.module else [])])
        if node.module:
            yield base
        if (root / base.replace(".", "/")).is_dir():
            yield from (f"{base}.{alias.name}" for alias in node.names)


def is_test_module(module: str) -> bool:
    return module.rsplit(".", 1)[-1].startswith("test_")


def imports_of_test_modules(root: Path, folders: tuple[str, ...]) -> list[str]:
    """Every import of a test module in the Python files of `folders` (functions included), as
    `path:line: module`."""
    found = []
    for path in python_files(root, folders):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for module in imported(node, path, root):
                if is_test_module(module):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {module}")
    return found


# --- the repository as it is -------------------------------------------------------------------


def test_no_module_of_the_tests_imports_a_test_module() -> None:
    assert imports_of_test_modules(REPO, TESTS) == []


def test_no_module_outside_the_tests_imports_a_test_module() -> None:
    assert imports_of_test_modules(REPO, OUTSIDE) == []


def test_the_walk_reads_conftest_the_support_modules_and_the_test_modules() -> None:
    """The check above is not vacuous: the files it reads are the tests' own, all of them."""
    files = {path.relative_to(REPO).as_posix() for path in python_files(REPO, TESTS)}
    expected = {"tests/conftest.py", "tests/support/tiny.py", "tests/test_test_layout.py"}
    assert expected <= files
    outside = {path.relative_to(REPO).parts[0] for path in python_files(REPO, OUTSIDE)}
    assert {"bundler", "tools", "benchmarks"} <= outside  # examples/ holds no Python today


# --- and each checker on a planted violation ----------------------------------------------------


def planted(tmp_path: Path, files: dict[str, str]) -> Path:
    """A small repository of `files` (path -> text) under tmp_path: its root."""
    return write_tree(tmp_path, files)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # a helper of another test module, the way 44 imports took theirs before issue 39
            {"tests/test_audit.py": "from tests.test_build import build, linked_copy\n"},
            "tests/test_audit.py:1: tests.test_build",
        ),
        (  # inside a function
            {"tests/test_docs_site.py": "def f():\n    import tests.test_action as action\n"},
            "tests/test_docs_site.py:2: tests.test_action",
        ),
        (  # the module as a name of the package
            {"tests/test_a.py": "import os\nfrom tests import test_build\n"},
            "tests/test_a.py:2: tests.test_build",
        ),
        (  # a fixture taken from a test module, in a support module
            {"tests/support/tiny.py": "from tests.test_msbuild import tiny as tiny\n"},
            "tests/support/tiny.py:1: tests.test_msbuild",
        ),
        (  # relative, from the support package
            {"tests/support/__init__.py": "", "tests/support/a.py": "from ..test_b import c\n"},
            "tests/support/a.py:1: tests.test_b",
        ),
        (  # conftest, and a bare name (the tests folder on sys.path)
            {"tests/conftest.py": "import pytest\n\ndef hook():\n    import test_build\n"},
            "tests/conftest.py:4: test_build",
        ),
    ],
)
def test_a_planted_import_of_a_test_module_is_found(
    files: dict[str, str], expected: str, tmp_path: Path
) -> None:
    root = planted(tmp_path, {"tests/test_build.py": "", **files})
    assert imports_of_test_modules(root, TESTS) == [expected]


def test_imports_of_support_modules_and_conftest_pass(tmp_path: Path) -> None:
    files = {
        "tests/support/__init__.py": "",
        "tests/support/tiny.py": "from tests.conftest import REPO, test_cache_dir\n",
        "tests/test_a.py": (
            "from tests.support.tiny import tiny as tiny\n"
            "from tests.support import tiny as module\n"
            "from tests.conftest import test_cache_dir\n"
            "def f():\n    from tests.support.builds import build\n"
        ),
    }
    assert imports_of_test_modules(planted(tmp_path, files), TESTS) == []


def test_a_planted_import_of_a_test_module_outside_the_tests_is_found(tmp_path: Path) -> None:
    files = {
        "tests/test_build.py": "",
        "bundler/ship/pipeline.py": "def f():\n    from tests.test_build import build\n",
        "tools/usage.py": "from tests import test_docs\n",
        "benchmarks/windows.py": "import tests.test_windows_workflows\n",
        "examples/hello/make.py": "from tests.test_build import GENERATED\n",
        # what tools and benchmarks may import
        "benchmarks/compression.py": "def f():\n    from tests.support.inno import InnoSetup\n",
        "tools/windows_python.py": "from tests.conftest import test_cache_dir\n",
    }
    assert imports_of_test_modules(planted(tmp_path, files), OUTSIDE) == [
        "benchmarks/windows.py:1: tests.test_windows_workflows",
        "bundler/ship/pipeline.py:2: tests.test_build",
        "examples/hello/make.py:1: tests.test_build",
        "tools/usage.py:1: tests.test_docs",
    ]


def not_fixtures_or_hooks(conftest: Path) -> list[str]:
    """What a conftest.py defines at its top beside fixtures, `pytest_*` hooks and the
    `pytest_plugins` list: a helper, a class or a constant belongs in tests/support/."""
    found = []
    for node in ast.parse(conftest.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
            if not fixture and not node.name.startswith("pytest_"):
                found.append(node.name)
        elif isinstance(node, ast.ClassDef):
            found.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [ast.unparse(t) for t in targets]
            if names != ["pytest_plugins"]:
                found.extend(names)
    return found


def test_conftest_keeps_fixtures_and_hooks_only() -> None:
    assert not_fixtures_or_hooks(REPO / "tests" / "conftest.py") == []


def test_a_planted_helper_in_conftest_is_found(tmp_path: Path) -> None:
    text = (
        "import pytest\n\npytest_plugins = ['a']\nREPO = 1\n\n\n@pytest.fixture\ndef f(): ...\n\n\n"
        "def pytest_configure(config): ...\n\n\ndef helper(): ...\n\n\nclass Thing: ...\n"
    )
    conftest = write_tree(tmp_path, {"conftest.py": text}) / "conftest.py"
    assert not_fixtures_or_hooks(conftest) == ["REPO", "helper", "Thing"]


def test_the_workers_of_pytest_xdist_share_out_by_group(request: pytest.FixtureRequest) -> None:
    """pytest-xdist's workers collect with numprocesses unset (they run their share, they do
    not start workers): the groups are marked there too, and in a worker of this run they are."""
    assert shares_out(SimpleNamespace(option=SimpleNamespace(numprocesses=2)))
    assert shares_out(SimpleNamespace(option=SimpleNamespace(numprocesses=None), workerinput={}))
    assert not shares_out(SimpleNamespace(option=SimpleNamespace(numprocesses=None)))
    if hasattr(request.config, "workerinput"):
        heavy = [i for i in request.session.items if i.get_closest_marker("real_tools")]
        loose = [i.nodeid for i in heavy if not i.get_closest_marker("xdist_group")]
        assert not loose, f"real-tools tests in no xdist_group in this worker: {loose[:3]}"
