"""One table of the environment variables bundle reads (issue 39): bundler.config.variables
holds it, its names derived from the options they stand in for (bundler.config.option_table)
or from the setting's name, and docs/building.md's "Environment variables" shows it
(python -m tools.docs.environment_table --write). No module spells a name of bundle's
(`BUNDLE_*`) or pip's index variable: a variable added outside the table fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from bundler.config.variables import VARIABLES
from tests.support.paths import REPO
from tools.docs.environment_table import BUILDING_MD, page

NAME = re.compile(r"^(BUNDLE_[A-Z][A-Z0-9_]*|PIP_INDEX_URL)$")
NOT_A_VARIABLE = {"BUNDLE_FOLDER"}  # the post-build event's placeholder, a folder's name
# Every variable users set today (docs/building.md, issue 38's table): each keeps its name.
TODAY = {"BUNDLE_CACHE_DIR", "BUNDLE_HTTP_TIMEOUT", "BUNDLE_HTTP_RETRIES", "BUNDLE_HTTP_BACKOFF"}
TODAY |= {"BUNDLE_LOCK_TIMEOUT", "BUNDLE_EVIDENCE_DIR", "BUNDLE_DEBUG", "PIP_INDEX_URL"}
TODAY |= {"WINEPREFIX", "SYSTEMROOT"}


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


def test_the_names_users_have_today_are_kept() -> None:
    assert {variable.name for variable in VARIABLES} >= TODAY


def test_the_page_shows_the_table() -> None:
    mend = "python -m tools.docs.environment_table --write"
    assert page() == BUILDING_MD.read_text(encoding="utf-8"), f"docs/building.md: {mend}"
    assert listed(page()) == {variable.name for variable in VARIABLES if variable.name}


def test_no_module_spells_a_variable_of_bundle_s() -> None:
    assert spelt(REPO / "bundler") == set()


def test_a_spelt_variable_is_found(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text('LIMIT_ENV = "BUNDLE_NEW_LIMIT"\n')
    assert spelt(tmp_path) == {"BUNDLE_NEW_LIMIT"}
