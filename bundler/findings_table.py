"""Talk layer: the findings table of docs/auditing.md, generated from the catalogue (a test
keeps the page equal to it): python -c "from bundler.findings_table import catalogue_markdown as
t; print(t())"."""

from __future__ import annotations

from bundler.findings import CATALOGUE


class _Placeholders(dict[str, str]):
    """A fix template's fields shown as their names in capitals: {file} -> FILE."""

    def __missing__(self, key: str) -> str:
        return key.upper()


def catalogue_markdown() -> str:
    """One row a code: code, severity, name, finding and fix."""
    rows = ["| code | severity | name | finding | fix |", "|---|---|---|---|---|"]
    for check in CATALOGUE.values():
        fix = check.fix.format_map(_Placeholders())
        rows.append(
            f"| `{check.code}` | {check.severity.value} | `{check.name}` | {check.title} | {fix} |"
        )
    return "\n".join(rows)
