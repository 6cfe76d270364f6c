"""docs/repository.md's glossary (issue 39): one word, one idea, and each names where it lives;
a place that moved or went leaves the glossary wrong, so every place it names must exist, and
no word is defined twice."""

from __future__ import annotations

import re

from tests.support.paths import REPO

PAGE = REPO / "docs" / "repository.md"
ROW = re.compile(r"^\| (?P<word>[^|]+?) \| (?P<meaning>[^|]+?) \| `(?P<where>[^`]+)` \|$", re.M)


def glossary(text: str | None = None) -> list[re.Match[str]]:
    text = PAGE.read_text(encoding="utf-8") if text is None else text
    section = text.split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0]
    return list(ROW.finditer(section))


def missing_places(rows: list[re.Match[str]]) -> list[str]:
    return [row["where"] for row in rows if not (REPO / row["where"]).is_file()]


def test_every_place_the_glossary_names_exists() -> None:
    rows = glossary()
    assert len(rows) >= 15  # the section is read, not skipped
    assert missing_places(rows) == []


def test_no_word_is_defined_twice() -> None:
    words = [row["word"].lower() for row in glossary()]
    assert len(words) == len(set(words)), words


def test_a_place_that_moved_is_found() -> None:
    page = "# x\n\n## Glossary\n\n| lock | its content | `bundler/lock.py` |\n\n## Next\n"
    assert missing_places(glossary(page)) == ["bundler/lock.py"]  # before issue 39's moves
