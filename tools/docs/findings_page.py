"""The findings table of docs/auditing.md, generated from the audit's catalogue
(bundler.findings); tests/test_audit.py keeps the page equal to it.

    python -m tools.docs.findings_page    # print the table, to paste between the page's rows
"""

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


if __name__ == "__main__":
    print(catalogue_markdown())
