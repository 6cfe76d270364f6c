"""Library code receives values as arguments (issue 39): a module outside `bundler/config/`, the
CLI (`bundler/cli/`) and the entry point calls none of config's helpers that read the process
environment at use time. The command reads each value once (bundler.config.settings'
http_limits, lock_timeout, own_evidence_dir; bundler.config.environment's pip_index_url, ...)
and hands it down, so that it can say where the value came from. tests/test_layers.py keeps
`os.environ` itself inside config/; this keeps the helpers that wrap it there too.

The helpers are found, not listed: a function of config/ reads the environment when it touches
`os.environ`/`os.getenv` or calls one that does (so a helper added tomorrow is covered). What
the issue lets come from one config/ helper is allowed by name, module by module (ALLOWED):
the system locations and the environments of child processes of the load proof and of
`bundle measure`, and the variable a profile's `dir` source names.

Each checker is also run on a planted tree, so the test can fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import REPO
from tests.support.trees import write_tree

PACKAGE = REPO / "bundler"
MAY_READ = ("config", "cli", "entry", "__main__")  # the groups that may call them
ENVIRONMENT = {"environ", "environb", "getenv", "getenvb"}
# module -> the helpers it may call, and why (issue 39: "System locations, a profile's `dir`
# sources and the environments handed to child processes come from one `config/` helper")
ALLOWED: dict[str, set[str]] = {
    # %SYSTEMROOT%, $WINEPREFIX, and the environments of the loader's child processes
    "bundler.audit.loadrun": {"system_root", "wine_prefix", "child_environment"},
    # a profile's `dir` source names its variable ($CUDA_PATH and the like)
    "bundler.acquire.artifacts": {"variable"},
    # the environment of `bundle measure`'s child process
    "bundler.measure.parent": {"child_environment"},
}
# The helpers the issue names, each of which must be found as a reader.
NAMED = {"variable", "env_number", "http_limits", "lock_timeout", "own_evidence_dir"}
NAMED |= {"pip_index_url", "system_root", "wine_prefix", "child_environment", "cache_root"}


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def trees(root: Path) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield module_name(path, root), ast.parse(path.read_text(encoding="utf-8"))


def reads_os_environment(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr in ENVIRONMENT
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def reading_helpers(root: Path = PACKAGE) -> set[str]:
    """The functions of config/ that read the environment, directly or through another."""
    functions: dict[str, ast.AST] = {}
    for _name, tree in trees(root / "config"):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                functions[node.name] = node
    reading: set[str] = set()
    while True:
        more = {
            name
            for name, function in functions.items()
            if name not in reading and any(_reads(node, reading) for node in ast.walk(function))
        }
        if not more:
            return reading
        reading |= more


def _reads(node: ast.AST, reading: set[str]) -> bool:
    """`node` touches os.environ, or calls a reader of config/ by its name."""
    if reads_os_environment(node):
        return True
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in reading
    )


def helper_calls(root: Path = PACKAGE) -> list[str]:
    """`module:line helper` for each reading helper a library module imports or uses through
    config's module (`from bundler.config import environment; environment.variable(...)`),
    the ALLOWED ones aside."""
    helpers = reading_helpers(root)
    found = []
    for name, tree in trees(root):
        if len(name.split(".")) > 1 and name.split(".")[1] in MAY_READ:
            continue
        allowed = ALLOWED.get(name, set())
        for line, helper in _uses(tree, helpers):
            if helper not in allowed:
                found.append(f"{name}:{line} {helper}")
    return found


def _uses(tree: ast.Module, helpers: set[str]) -> Iterator[tuple[int, str]]:
    modules = set()  # the names config's modules are bound to here
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bundler.config"):
            for alias in node.names:
                if node.module == "bundler.config":
                    modules.add(alias.asname or alias.name)
                elif alias.name in helpers:
                    yield node.lineno, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bundler.config.") and alias.asname:
                    modules.add(alias.asname)
                elif alias.name.startswith("bundler.config"):
                    modules.add("bundler")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in helpers:
            base = ast.unparse(node.value).split(".")[0]
            if base in modules:
                yield node.lineno, node.attr


# --- the package as it is ------------------------------------------------------------------------


def test_every_helper_the_issue_names_is_found_as_a_reader() -> None:
    assert reading_helpers() >= NAMED


def test_library_code_calls_no_helper_that_reads_the_environment() -> None:
    assert helper_calls() == []


def test_every_allowed_module_still_calls_what_it_is_allowed() -> None:
    """An allowance no longer used goes, so the list stays as narrow as the code."""
    helpers = reading_helpers()
    used = {name: {helper for _, helper in _uses(tree, helpers)} for name, tree in trees(PACKAGE)}
    assert {name: used.get(name, set()) & allowed for name, allowed in ALLOWED.items()} == ALLOWED


# --- and on a planted tree ----------------------------------------------------------------------

CONFIG = {
    "config/environment.py": (
        "import os\n"
        "def variable(name):\n    return os.environ.get(name)\n"
        "def pip_index_url():\n    return variable('PIP_INDEX_URL')\n"
        "def child_environment():\n    return dict(os.environ)\n"
    ),
    "config/settings.py": (
        "from bundler.config.environment import variable\n"
        "def env_number(name):\n    return float(variable(name) or 0)\n"
        "def lock_timeout():\n    return env_number('BUNDLE_LOCK_TIMEOUT')\n"
        "def plain(value):\n    return value\n"
        # a name like a helper's that is no call of it
        "def rows(variables):\n    return [variable.row() for variable in variables]\n"
    ),
    "config/variables.py": "HTTP_TIMEOUT = 30.0\n",
}


def test_a_planted_call_of_a_reading_helper_is_found(tmp_path: Path) -> None:
    files = CONFIG | {
        "acquire/download.py": "from bundler.config.settings import env_number\n",
        "pruning/evidence.py": (
            "from bundler.config import environment\nx = environment.variable('X')\n"
        ),
        "rules/index.py": (
            "import bundler.config.environment as env\ndef f():\n    return env.pip_index_url()\n"
        ),
        "disk/locks.py": (
            "import bundler.config.settings\ndef f():\n"
            "    return bundler.config.settings.lock_timeout()\n"
        ),
        # allowed by name, and only that name
        "acquire/artifacts.py": "from bundler.config.environment import pip_index_url, variable\n",
        "measure/parent.py": "from bundler.config.environment import child_environment\n",
        # data, the commands, config itself: not calls of a reading helper
        "ship/pipeline.py": "from bundler.config.variables import HTTP_TIMEOUT\n",
        "acquire/fetch.py": "from bundler.config.settings import plain\n",
        "cli/groups.py": "from bundler.config.settings import lock_timeout\n",
        "entry.py": "from bundler.config.environment import variable\n",
    }
    root = write_tree(tmp_path / "bundler", files)
    assert reading_helpers(root) == {
        "variable", "pip_index_url", "child_environment", "env_number", "lock_timeout"
    }  # fmt: skip
    assert helper_calls(root) == [
        "bundler.acquire.artifacts:1 pip_index_url",
        "bundler.acquire.download:1 env_number",
        "bundler.disk.locks:3 lock_timeout",
        "bundler.pruning.evidence:2 variable",
        "bundler.rules.index:3 pip_index_url",
    ]
