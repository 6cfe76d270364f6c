"""The shape of tools/ and benchmarks/, read from their source with `ast` (issue 39).

- tools/ holds one package per kind of script (the docs generators, the data regenerators of
  manifests/, the GPU evidence pipeline, what the tests set up, what the generators share). Each
  has an __init__.py whose docstring is one line saying what belongs there, docs/repository.md
  names it, and no script lies directly in tools/.
- No module of tools/ or benchmarks/ edits sys.path (insert, append, extend, an assignment,
  `from sys import path`, site.addsitedir) to import the project or another tool: each runs as
  `python -m tools.KIND.NAME` or `python -m benchmarks.NAME` from the repository root, where
  both are packages. The one exception is a user-given ONNX Runtime folder (`--ort-dir`, the
  `ort_dir` argument), which gpu_probe and gpu_matrix put first for the onnxruntime they
  measure. Python that a shell script of tools/ runs inline edits no sys.path either.
- Every module of both imports as a module of its package, in a process of its own.
- One command line for every generator of a committed file: only tools/generated/command.py
  declares `--check`, and its --check, --write and print are shown on files of a tmp_path.

Each checker also runs on a copy of the real folders with a planted violation, so the test can
fail.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.trees import write_tree
from tools.generated.command import Generated, generated_main

FOLDERS = ("tools", "benchmarks")
ORT_FOLDER = "ort_dir"  # the named exception: the user-given ONNX Runtime folder
SHARED_MAIN = "tools/generated/command.py"


def python_files(root: Path, folders: tuple[str, ...] = FOLDERS) -> list[Path]:
    return sorted(path for folder in folders for path in (root / folder).rglob("*.py"))


def where(path: Path, root: Path, line: int) -> str:
    return f"{path.relative_to(root).as_posix()}:{line}"


# --- sys.path --------------------------------------------------------------------------------


def sys_names(tree: ast.AST) -> set[str]:
    """The names the module binds to the sys module (`import sys`, `import sys as s`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name for alias in node.names if alias.name == "sys"}
    return names


def edits_sys_path(node: ast.AST, sys_aliases: set[str]) -> bool:
    def is_path(expr: ast.expr) -> bool:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        return (
            isinstance(expr, ast.Attribute)
            and expr.attr == "path"
            and isinstance(expr.value, ast.Name)
            and expr.value.id in sys_aliases
        )

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("insert", "append", "extend") and is_path(node.func.value):
            return True
        return node.func.attr == "addsitedir"
    if isinstance(node, ast.Assign):
        return any(is_path(target) for target in node.targets)
    if isinstance(node, ast.AugAssign):
        return is_path(node.target)
    if isinstance(node, ast.ImportFrom) and node.module == "sys":
        return any(alias.name == "path" for alias in node.names)
    return False


def names_the_ort_folder(node: ast.AST) -> bool:
    return any(
        (isinstance(part, ast.Name) and part.id == ORT_FOLDER)
        or (isinstance(part, ast.Attribute) and part.attr == ORT_FOLDER)
        for part in ast.walk(node)
    )


def sys_path_edits(root: Path) -> list[str]:
    """Every sys.path edit in tools/ and benchmarks/ but one that adds the ORT folder, as
    `path:line`; in tools/'s shell scripts, every line of inline Python that names sys.path."""
    found = []
    for path in python_files(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = sys_names(tree)
        for node in ast.walk(tree):
            if edits_sys_path(node, names) and not names_the_ort_folder(node):
                found.append(where(path, root, node.lineno))
    for path in sorted((root / "tools").rglob("*.sh")):
        lines = path.read_text(encoding="utf-8").splitlines()
        found += [where(path, root, n) for n, line in enumerate(lines, 1) if "sys.path" in line]
    return sorted(found)


# --- the packages ----------------------------------------------------------------------------


def kinds(root: Path) -> list[Path]:
    tools = root / "tools"
    return sorted(p for p in tools.iterdir() if p.is_dir() and p.name != "__pycache__")


def misplaced(root: Path) -> list[str]:
    """A file directly in tools/ (but its __init__.py), and a folder of tools/ (tools/ too)
    without an __init__.py, or whose __init__.py's docstring is not one line."""
    tools = root / "tools"
    found = [
        f"{path.relative_to(root).as_posix()}: directly in tools/, not in a kind's package"
        for path in sorted(tools.iterdir())
        if path.is_file() and path.name != "__init__.py"
    ]
    folders = [tools, *(p for p in tools.rglob("*") if p.is_dir() and p.name != "__pycache__")]
    for folder in sorted(folders):
        init = folder / "__init__.py"
        name = init.relative_to(root).as_posix()
        if not init.is_file():
            found.append(f"{name}: missing")
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if not doc.strip() or "\n" in doc.strip():
            found.append(f"{name}: no one-line docstring saying what belongs there")
    return found


def check_flags(root: Path) -> list[str]:
    """Every `add_argument("--check", ...)` of tools/ outside the shared command line."""
    found = []
    for path in python_files(root, ("tools",)):
        if path.relative_to(root).as_posix() == SHARED_MAIN:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
                and any(
                    isinstance(arg, ast.Constant) and arg.value == "--check" for arg in node.args
                )
            ):
                found.append(where(path, root, node.lineno))
    return found


def modules(root: Path) -> Iterator[str]:
    for path in python_files(root):
        parts = path.relative_to(root).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# --- the repository as it is -----------------------------------------------------------------


def test_no_tool_or_benchmark_edits_sys_path_but_for_a_given_ort_folder() -> None:
    assert sys_path_edits(REPO) == []


def test_the_exception_is_used_where_a_tool_is_told_where_onnxruntime_is() -> None:
    """The check is not vacuous: the two --ort-dir inserts are there, and pass as the exception."""
    found = []
    for path in python_files(REPO):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = sys_names(tree)
        found += [
            path.name
            for node in ast.walk(tree)
            if edits_sys_path(node, names) and names_the_ort_folder(node)
        ]
    assert sorted(found) == ["gpu_matrix.py", "gpu_probe.py"]


def test_every_script_of_tools_is_in_a_kind_package() -> None:
    assert misplaced(REPO) == []
    assert {kind.name for kind in kinds(REPO)} >= {"docs", "manifests", "evidence", "testing"}


def test_the_repository_page_names_every_kind() -> None:
    page = (REPO / "docs" / "repository.md").read_text(encoding="utf-8")
    missing = [kind.name for kind in kinds(REPO) if f"| `tools/{kind.name}/` |" not in page]
    assert missing == [], "docs/repository.md has no row for these packages of tools/"


def test_only_the_shared_command_line_declares_check() -> None:
    assert check_flags(REPO) == []


def test_every_module_imports_as_a_module_of_its_package() -> None:
    """What `python -m tools.KIND.NAME` does first, for every module at once: from the
    repository root, with nothing added to sys.path."""
    names = list(modules(REPO))
    assert "tools.evidence.gpu_probe" in names and "benchmarks.run" in names
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)"
    result = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


# --- and each checker on a planted violation --------------------------------------------------


def copy_of_the_tree(tmp_path: Path) -> Path:
    """tools/ and benchmarks/ as they are, under tmp_path: its root."""
    for folder in FOLDERS:
        shutil.copytree(
            REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    return tmp_path


def append(root: Path, name: str, text: str) -> None:
    path = root / name
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "planted"),
    [
        ("tools/docs/usage.py", "sys.path.insert(0, str(REPO / 'tools'))\n"),
        ("tools/evidence/probe_ops.py", "def f():\n    import sys\n    sys.path.append('tools')\n"),
        ("benchmarks/run.py", "sys.path[0:0] = [str(REPO)]\n"),
        ("benchmarks/deps.py", "import sys as system\nsystem.path += ['.']\n"),
        ("tools/testing/windows_python.py", "from sys import path\n"),
        ("tools/manifests/ep_facts.py", "import site\nsite.addsitedir('tools')\n"),
        (
            "tools/evidence/evidence_run.sh",
            "python3 -c 'import sys; sys.path.insert(0, \"tools\")'\n",
        ),
    ],
)
def test_a_planted_sys_path_edit_is_found(name: str, planted: str, tmp_path: Path) -> None:
    root = copy_of_the_tree(tmp_path)
    append(root, name, planted)
    lines = (root / name).read_text(encoding="utf-8").count("\n")
    assert sys_path_edits(root) == [f"{name}:{lines}"]


def test_a_planted_script_outside_a_kind_package_is_found(tmp_path: Path) -> None:
    root = copy_of_the_tree(tmp_path)
    files = {
        "tools/stray.py": '"""A script at the top."""\n',
        "tools/release/tag.py": '"""A kind without its __init__.py."""\n',
        "tools/reports/__init__.py": '"""Two lines.\n\nSay too much."""\n',
        "tools/reports/weekly.py": "",
    }
    write_tree(root, files)
    (root / "tools" / "docs" / "__init__.py").write_text("")
    assert misplaced(root) == [
        "tools/stray.py: directly in tools/, not in a kind's package",
        "tools/docs/__init__.py: no one-line docstring saying what belongs there",
        "tools/release/__init__.py: missing",
        "tools/reports/__init__.py: no one-line docstring saying what belongs there",
    ]


def test_a_planted_second_check_main_is_found(tmp_path: Path) -> None:
    root = copy_of_the_tree(tmp_path)
    append(
        root,
        "tools/manifests/record_files.py",
        "argparse.ArgumentParser().add_argument('--check')\n",
    )
    lines = (root / "tools/manifests/record_files.py").read_text(encoding="utf-8").count("\n")
    assert check_flags(root) == [f"tools/manifests/record_files.py:{lines}"]


# --- the one command line of the generators, on files of a tmp_path ---------------------------


def test_the_shared_command_line_prints_checks_and_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stale file fails --check with the command that mends it and is left alone; --write
    rewrites it alone and has the loader read it back; the print shows each file."""
    stale, fresh = tmp_path / "stale.toml", tmp_path / "fresh.toml"
    stale.write_text("old\n")
    fresh.write_text("same\n")
    loaded: list[Path] = []
    files = [
        Generated(stale, lambda: "new\n", loaded.append),
        Generated(fresh, lambda: "same\n", loaded.append),
    ]

    def main(*argv: str) -> int:
        return generated_main("tools.kind.tool", "a tool", lambda _: files, list(argv))

    assert main("--check") == 1
    out, err = capsys.readouterr()
    assert f"{stale} is out of date: run python -m tools.kind.tool --write" in err
    assert f"{fresh}: up to date" in out and stale.read_text() == "old\n"
    assert main() == 0
    assert capsys.readouterr().out == f"==> {stale} <==\nnew\n==> {fresh} <==\nsame\n"
    assert main("--write") == 0
    assert stale.read_text() == "new\n" and loaded == [stale]
    assert main("--check") == 0
