"""The documentation: README.md opens with the two commands, docs/usage.md is the CLI's own
--help (tools/docs/usage.py), and the MkDocs site (mkdocs.yml, docs/) builds with --strict."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.docs_site import built_site
from tests.support.paths import REPO

INSTALL_AND_BUILD = 'pip install -e ".[test]" && bundle build examples/hello/hello.exe'
RUN_THE_TESTS = "python -m pytest"


def test_usage_page_is_the_clis_help() -> None:
    """A changed --help (a new option, command or help text) needs
    python -m tools.docs.usage --write."""
    result = subprocess.run(
        [sys.executable, "-m", "tools.docs.usage"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    written = (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
    mend = "python -m tools.docs.usage --write"
    assert written == result.stdout, f"docs/usage.md is out of date: {mend}"
    for command in ("bundle", "bundle build", "bundle audit", "bundle profiles new"):
        assert f"## `{command}`\n\n```text\nUsage: {command} " in written, command


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """Every page in the nav exists, every link between pages resolves, nothing warns."""
    site = built_site(tmp_path)
    assert (site / "index.html").is_file()
    assert (site / "usage" / "index.html").is_file()


def test_the_readme_starts_with_the_two_commands() -> None:
    """Before any section: install and build the example, then run the tests."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    before_sections = readme.split("\n## ", 1)[0]
    blocks = re.findall(r"^```(\w*)\n(.*?)\n```$", before_sections, flags=re.MULTILINE | re.DOTALL)
    assert blocks[:2] == [("bash", INSTALL_AND_BUILD), ("bash", RUN_THE_TESTS)]


def test_rich_help_wraps_whole_paragraphs() -> None:
    """The terminal help (rich) breaks lines only at the terminal's width: on a 300-column
    terminal every command's summary in `bundle --help` and every paragraph of `bundle build
    --help` stands on one line, so no sentence is cut where its docstring's source wraps."""
    env = {**os.environ, "COLUMNS": "300", "TERM": "xterm", "TYPER_USE_RICH": "1"}
    env.pop("NO_COLOR", None)
    top = subprocess.run(
        [sys.executable, "-m", "bundler", "--help"], capture_output=True, text=True, env=env
    ).stdout
    commands = top[top.index("─ Commands ─") :]
    panel = [line for line in commands.splitlines() if line.startswith("│ ")]
    listed = [line.split()[1] for line in panel]
    assert {"build", "msbuild", "audit"} <= set(listed), top
    assert all(re.match(r"│ [a-z]+ ", line) for line in panel), "a summary spans two lines"
    msbuild = next(line for line in panel if line.startswith("│ msbuild "))
    assert "with ort-bundle.props" in msbuild  # its docstring breaks the source line before it
    detail = subprocess.run(
        [sys.executable, "-m", "bundler", "build", "--help"],
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert "with a lock file and an Inno Setup script." in detail


def test_paragraphs_keeps_blank_lines_and_click_verbatim_blocks() -> None:
    from bundler.cli.commands import paragraphs

    text = "One line\n    and its tail.\n\n    Second\n    paragraph.\n\n\b\nkept\nas is"
    assert paragraphs(text) == "One line and its tail.\n\nSecond paragraph.\n\n\b\nkept\nas is"
