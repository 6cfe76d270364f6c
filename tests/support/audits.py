"""`bundle audit` as the tests read it: `codes` (the finding codes of the library's audit),
`audit_cli` (the command's --json document and exit code, as a user runs it) and `found` (a
document's findings by code)."""

from __future__ import annotations

import json
from pathlib import Path

from bundler.audit.judge import audit
from tests.support.paths import GPU
from tests.support.runs import run_bundle


def codes(folder: Path, profile: str = GPU) -> list[str]:
    return [item.code for item in audit(folder, profile).findings]


def audit_cli(*args: str) -> tuple[dict[str, object], int]:
    """`bundle audit ... --json` as a user runs it: the document and the exit code."""
    result = run_bundle("audit", *args, "--json")
    assert result.stdout, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data, result.returncode


def found(data: dict[str, object]) -> dict[str, list[dict[str, object]]]:
    """Findings by code."""
    by_code: dict[str, list[dict[str, object]]] = {}
    for item in data["findings"]:  # type: ignore[attr-defined]
        by_code.setdefault(item["code"], []).append(item)
    return by_code
