"""Keep docs/index.md's shared parts equal to README.md's, so the two cannot drift.

README.md marks each part the site's front page shares with `<!-- shared:NAME -->` ...
`<!-- /shared:NAME -->`; docs/index.md holds the same markers. This copies each part from the
README into the index, rewriting the README's links into docs/ (`](docs/quickstart.md)`) into
the site's (`](quickstart.md)`). The rest of docs/index.md (its own sections) is left alone.
A shared part may link only into docs/: any other relative link would not resolve on the site,
and is refused.

    python -m tools.docs.docs_index            # print the index as it should be
    python -m tools.docs.docs_index --write    # write it to docs/index.md
    python -m tools.docs.docs_index --check    # exit 1 when docs/index.md differs

tests/test_docs_site.py keeps docs/index.md equal to what this renders.
"""

from __future__ import annotations

import re
import sys

from tools.generated.command import REPO, Generated, GenerationError, generated_main

README = REPO / "README.md"
INDEX = REPO / "docs" / "index.md"

SHARED = re.compile(
    r"^<!-- shared:(?P<name>[a-z-]+) -->\n(?P<body>.*?)^<!-- /shared:(?P=name) -->$",
    re.MULTILINE | re.DOTALL,
)
# A Markdown link target: ](target) with no blanks (the README's links have none).
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


class SharedPartError(Exception):
    """README.md or docs/index.md lacks a marker, or a shared part links outside docs/."""


def shared_parts(text: str, where: str) -> dict[str, str]:
    """Name -> body of every shared part of `text`, in order; names are unique."""
    parts: dict[str, str] = {}
    for match in SHARED.finditer(text):
        if match["name"] in parts:
            raise SharedPartError(f"{where}: shared part {match['name']!r} appears twice")
        parts[match["name"]] = match["body"]
    return parts


def for_the_site(body: str, name: str) -> str:
    """The README's part as docs/index.md shows it: links into docs/ made site-relative."""

    def rewrite(match: re.Match[str]) -> str:
        target = match["target"]
        if target.startswith("docs/"):
            return f"]({target.removeprefix('docs/')})"
        if re.match(r"[a-z]+:|#", target):  # https://..., mailto:, an anchor of the page
            return match[0]
        raise SharedPartError(
            f"README.md: shared part {name!r} links to {target!r}, which is not in docs/ and "
            "would not resolve on the site; link into docs/ or use a full URL"
        )

    return LINK.sub(rewrite, body)


def render(readme: str, index: str) -> str:
    """docs/index.md with each shared part replaced by the README's."""
    source = shared_parts(readme, "README.md")
    target = shared_parts(index, "docs/index.md")
    if set(source) != set(target):
        raise SharedPartError(
            f"README.md shares {sorted(source)}, docs/index.md has markers for {sorted(target)}"
        )

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        return f"<!-- shared:{name} -->\n{for_the_site(source[name], name)}<!-- /shared:{name} -->"

    return SHARED.sub(replace, index)


def main(argv: list[str] | None = None) -> int:
    def page() -> str:
        try:
            return render(README.read_text(encoding="utf-8"), INDEX.read_text(encoding="utf-8"))
        except SharedPartError as exc:
            raise GenerationError(str(exc)) from exc

    index = Generated(INDEX, page)
    return generated_main(__spec__.name, __doc__.splitlines()[0], lambda _: [index], argv)


if __name__ == "__main__":
    sys.exit(main())
