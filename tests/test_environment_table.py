"""One table of the environment variables bundle reads (issue 39): docs/building.md's
"Environment variables" lists every `BUNDLE_*` name the package spells, and pip's index
variable; a variable added without a row fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import REPO

PAGE = REPO / "docs" / "building.md"
NAME = re.compile(r"^(BUNDLE_[A-Z][A-Z0-9_]*|PIP_INDEX_URL)$")
NOT_A_VARIABLE = {"BUNDLE_FOLDER"}  # the post-build event's placeholder, a folder's name


def spelt(root: Path) -> set[str]:
    """The variable names the package's string constants spell, whole."""
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and NAME.match(text):
                found.add(text)
    return found - NOT_A_VARIABLE


def listed(text: str) -> set[str]:
    section = text.split("\n### Environment variables\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Z_]+)` \|", section, re.MULTILINE))


def test_every_variable_has_its_row() -> None:
    names = spelt(REPO / "bundler")
    assert {"BUNDLE_CACHE_DIR", "BUNDLE_HTTP_TIMEOUT", "PIP_INDEX_URL"} <= names  # it reads
    assert names - listed(PAGE.read_text(encoding="utf-8")) == set()


def test_a_variable_without_a_row_is_found(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text('LIMIT_ENV = "BUNDLE_NEW_LIMIT"\n')
    page = "# x\n\n### Environment variables\n\n| `BUNDLE_CACHE_DIR` | the cache | |\n"
    assert spelt(tmp_path) - listed(page) == {"BUNDLE_NEW_LIMIT"}
