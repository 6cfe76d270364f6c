"""Decide layer of the audit: `--ignore CODE[:FILE-PATTERN]` suppressions, and the order
findings are reported in (errors first, then by code and file)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bundler.errors import ConfigError
from bundler.findings import CATALOGUE, Finding, severity_rank

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class Suppression:
    """One --ignore rule: a catalogue code (or its name), optionally only for findings that
    involve a file matching `pattern` (fnmatch, case-insensitive as Windows names are)."""

    code: str
    pattern: str | None = None

    def matches(self, item: Finding) -> bool:
        if item.code != self.code:
            return False
        if self.pattern is None:
            return True
        return any(fnmatch.fnmatch(name.lower(), self.pattern.lower()) for name in item.files)

    def __str__(self) -> str:
        return self.code if self.pattern is None else f"{self.code}:{self.pattern}"


def parse_suppression(text: str) -> Suppression:
    """`BA303`, `unreferenced-dll` or `BA303:onnxruntime_providers_*.dll`."""
    code, _, pattern = text.strip().partition(":")
    by_name = {check.name: check.code for check in CATALOGUE.values()}
    code = by_name.get(code, code.upper())
    if code not in CATALOGUE:
        raise ConfigError(
            f"--ignore {text!r}: {code!r} is not a finding code or name; "
            "the codes are listed in docs/auditing.md and in --json output."
        )
    return Suppression(code, pattern or None)


def suppress(
    findings: Iterable[Finding], rules: Sequence[Suppression]
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """(kept, suppressed), each in the order given."""
    kept: list[Finding] = []
    suppressed: list[Finding] = []
    for item in findings:
        (suppressed if any(rule.matches(item) for rule in rules) else kept).append(item)
    return tuple(kept), tuple(suppressed)


def ordered(found: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(found, key=lambda f: (severity_rank(f.severity), f.code, f.files)))
