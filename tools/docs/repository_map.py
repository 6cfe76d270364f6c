"""The package map of docs/repository.md, generated from bundler/ itself.

Every module's docstring opens with its layer and its job ("Act layer: `bundle build`: ...";
tests/test_layers.py keeps that true). This reads those openings with `ast` and renders one table
per group (the core, then each wing), between the markers `<!-- modules -->` and
`<!-- /modules -->` of docs/repository.md; the rest of the page is left alone. A module added,
renamed or removed, or a docstring changed, shows up here by running the tool, and
tests/test_docs_site.py fails until it has been run.

    python -m tools.docs.repository_map            # print the page as it should be
    python -m tools.docs.repository_map --write    # write docs/repository.md
    python -m tools.docs.repository_map --check    # exit 1 when docs/repository.md differs
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tools.generated.command import REPO, Generated, GenerationError, generated_main

PAGE = REPO / "docs" / "repository.md"
# The core's packages, lowest first (tests/test_layers.py's CORE_PACKAGES, which a test keeps
# equal): listed after the modules at the top, before the wings.
CORE_PACKAGES = ("target", "config", "disk", "binary", "closure", "pruning", "eps")
PACKAGE = REPO / "bundler"
MARKED = re.compile(r"^<!-- modules -->\n.*?^<!-- /modules -->$", re.MULTILINE | re.DOTALL)
LAYERS = "Read/decide|Read|Decide|Act|Talk"
OPENING = re.compile(rf"^(?P<layer>{LAYERS}) layer[^:]*:\s*(?P<job>.*)$", re.DOTALL)


def opening(path: Path) -> tuple[str, str]:
    """(layer, job) from a module's docstring: the job is its first sentence, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    match = OPENING.match(doc)
    if match is None and path.name == "__init__.py":  # a package says what it holds
        return "package", first_sentence(doc)
    if match is None:
        where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        raise GenerationError(
            f"{where.as_posix()}: the docstring does not open with 'Read|Decide|Act|Talk layer:'"
        )
    return match["layer"].lower(), first_sentence(match["job"])


def first_sentence(text: str) -> str:
    """The text's first sentence (its first paragraph, up to a full stop or question
    mark followed by a blank), on one line."""
    paragraph = " ".join(text.split("\n\n", 1)[0].split())
    sentence = re.split(r"(?<=[.?])\s", paragraph, maxsplit=1)[0]
    return sentence.rstrip(".;:") if not sentence.endswith("?") else sentence


def groups(package: Path) -> dict[str, list[Path]]:
    """The core (modules at the top, then its packages, lowest first) and each wing (a folder,
    its subfolders with it), sorted."""
    found: dict[str, list[Path]] = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if path.name in ("__init__.py", "__main__.py") and not ast.get_docstring(
            ast.parse(path.read_text(encoding="utf-8"))
        ):
            continue  # an empty package marker, or `python -m bundler`
        group = relative.parts[0] if len(relative.parts) > 1 else "core"
        found.setdefault(group, []).append(path)

    def place(group: str) -> tuple[int, int, str]:
        if group == "core":
            return (0, 0, group)
        if group in CORE_PACKAGES:
            return (1, CORE_PACKAGES.index(group), group)
        return (2, 0, group)

    return dict(sorted(found.items(), key=lambda item: place(item[0])))


def module_table(package: Path) -> str:
    """One Markdown table per group: module, layer, job."""
    lines: list[str] = []
    for group, paths in groups(package).items():
        title = "The core" if group == "core" else f"`{group}/`"
        title = f"The core: `{group}/`" if group in CORE_PACKAGES else title
        lines += [f"### {title}", "", "| module | layer | job |", "|---|---|---|"]
        for path in paths:
            layer, job = opening(path)
            name = path.relative_to(package).with_suffix("").as_posix().removesuffix("/__init__")
            cell = job.replace("|", r"\|")
            lines.append(f"| `{name}` | {layer} | {cell} |")
        lines.append("")
    return "\n".join(lines)


def render(page: str, package: Path = PACKAGE) -> str:
    """The page with its marked part replaced by the module tables of `package`."""
    if not MARKED.search(page):
        raise GenerationError(
            "docs/repository.md lacks its markers <!-- modules --> <!-- /modules -->"
        )
    body = f"<!-- modules -->\n{module_table(package)}<!-- /modules -->"
    return MARKED.sub(lambda _: body, page)


def main(argv: list[str] | None = None) -> int:
    page = Generated(PAGE, lambda: render(PAGE.read_text("utf-8")))
    return generated_main(__spec__.name, __doc__.splitlines()[0], lambda _: [page], argv)


if __name__ == "__main__":
    sys.exit(main())
