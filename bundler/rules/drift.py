"""Decide layer: `bundle profiles check`: do a profile's runtime rules still match its binaries?

The rules were written from `strings` output for one set of binaries; the next release moves a
name, drops one or adds one. The check scans every DLL the profile's artifacts provide
(bundler.rules.scan) and compares the runtime loads found with the rules, in both directions:

- a rule with no evidence: the trigger's bytes no longer name what the rule says it loads;
- evidence with no rule: the trigger names a DLL of the profile that no rule (and no import)
  covers, so a bundle could lack it.

A driver DLL (nvcuda.dll ...) needs no rule to be named: it is required on the target by the
profile's `driver_dlls`, never shipped, so a rule for it changes no bundle. A rule that names
one still needs its evidence. A documented exception in the profile ([[scan_exceptions]]: the
file, the name, why) accepts one pair either way; an exception that matches nothing is stale
and reported too, so the list cannot rot.

Decide layer: it takes the scan results and the profile, reads nothing itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bundler.rules.scan import Kind, ScanResult
from bundler.target.loads import ScanException
from bundler.target.profiles import Profile, dll_key, is_pattern, matches


class DriftKind(StrEnum):
    RULE_WITHOUT_EVIDENCE = "rule-without-evidence"
    EVIDENCE_WITHOUT_RULE = "evidence-without-rule"
    STALE_EXCEPTION = "stale-exception"
    EXCEPTED = "excepted"  # accepted by a documented exception: listed, never a failure


@dataclass(frozen=True)
class Drift:
    kind: DriftKind
    trigger: str
    name: str
    detail: str

    @property
    def fails(self) -> bool:
        return self.kind is not DriftKind.EXCEPTED

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "trigger": self.trigger,
            "name": self.name,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class DriftReport:
    profile: str
    scanned: tuple[str, ...]  # the DLLs scanned, display names
    drifts: tuple[Drift, ...]

    @property
    def failures(self) -> list[Drift]:
        return [item for item in self.drifts if item.fails]

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "scanned": list(self.scanned),
            "ok": not self.failures,
            "drifts": [item.to_dict() for item in self.drifts],
        }


Pair = tuple[str, str]  # (trigger key, loaded key)


def check_profile(
    profile: Profile,
    results: Mapping[str, ScanResult],
    exceptions: Iterable[ScanException] = (),
) -> DriftReport:
    """Compare `profile`'s runtime rules with the scans of its DLLs (key -> result)."""
    pool = {key: result.path.name for key, result in results.items()}
    drivers = {dll_key(name) for name in profile.driver_dlls}
    ruled = _rule_pairs(profile, pool, drivers)
    found = _evidence_pairs(results)
    accepted = {(dll_key(item.file), dll_key(item.name)): item for item in exceptions}
    drifts: list[Drift] = []
    used: set[Pair] = set()
    for pair, why in sorted(ruled.items()):
        if pair[0] in results and pair not in found:
            drifts.append(_judged(pair, DriftKind.RULE_WITHOUT_EVIDENCE, why, accepted, used))
        elif pair[0] not in results:
            detail = f"{why} (no artifact of the profile provides {pair[0]})"
            drifts.append(_judged(pair, DriftKind.RULE_WITHOUT_EVIDENCE, detail, accepted, used))
    for pair, evidence in sorted(found.items()):
        if pair not in ruled and pair[1] not in drivers:
            drifts.append(_judged(pair, DriftKind.EVIDENCE_WITHOUT_RULE, evidence, accepted, used))
    for pair, item in sorted(accepted.items()):
        if pair not in used:
            detail = f"matches no rule and no evidence any more: {item.why}"
            drifts.append(Drift(DriftKind.STALE_EXCEPTION, item.file, item.name, detail))
    scanned = tuple(sorted(pool.values(), key=dll_key))
    return DriftReport(profile.name, scanned, tuple(drifts))


def _judged(
    pair: Pair,
    kind: DriftKind,
    detail: str,
    accepted: Mapping[Pair, ScanException],
    used: set[Pair],
) -> Drift:
    exception = accepted.get(pair)
    if exception is None:
        return Drift(kind, pair[0], pair[1], detail)
    used.add(pair)
    return Drift(DriftKind.EXCEPTED, pair[0], pair[1], f"{kind.value}: {exception.why}")


def _rule_pairs(profile: Profile, pool: Mapping[str, str], drivers: set[str]) -> dict[Pair, str]:
    """(trigger, loaded) for every rule entry; a glob entry stands for the pool DLLs it
    matches (or for itself when none does: then it has no evidence either)."""
    pairs: dict[Pair, str] = {}
    for rule in profile.runtime_rules:
        for entry in rule.loads:
            names = [name for name in (*pool, *drivers) if matches(entry, name)]
            if not is_pattern(entry):
                names = [dll_key(entry)]
            for name in names or [dll_key(entry)]:
                pairs[(dll_key(rule.trigger), name)] = rule.why
    return pairs


def _evidence_pairs(results: Mapping[str, ScanResult]) -> dict[Pair, str]:
    """(scanned DLL, runtime candidate) -> the evidence, as text."""
    pairs: dict[Pair, str] = {}
    for key, result in results.items():
        for candidate in result.of_kind(Kind.RUNTIME):
            first = candidate.evidence[0]
            shown = candidate.pattern or first.text
            pairs[(key, candidate.key)] = (
                f"{result.path.name} names {shown!r} at offset {first.offset:#x} "
                f"({first.encoding}, {candidate.confidence.value} confidence)"
            )
    return pairs
