"""Decide layer of the audit: the import closure's checks (BA1xx), what it lacks and who needs it.

Beside the checks: the chains from a root to a DLL, its direct users, and the records (an absent
DLL's import table, a pattern's recorded file name) a need rests on, which the findings show and
bundler.audit.restore reads. Each check is one small function over `Audited` returning findings
of one catalogue code; bundler.audit.checks lists them all in CHECKS."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from bundler.audit.report import Audited
from bundler.closure.plan import EDGE_LABELS, Edge, EdgeKind, Status
from bundler.findings import Finding, finding
from bundler.target.profiles import is_pattern

PROVIDER_PREFIX = "onnxruntime_providers_"
PROVIDERS_SHARED = "onnxruntime_providers_shared.dll"
# ORT 1.19.2 imports both; the deployment how-tos forget them (docs/field-notes.md#vc-runtime).
VC_RUNTIME_PARTS = ("vcruntime140_1.dll", "msvcp140_1.dll")


def chains(audited: Audited, key: str) -> tuple[str, ...]:
    """Every chain from a root (an exe, or a DLL loaded at run time) to `key`, as text."""
    plan = audited.plan
    return tuple(plan.chain_text(chain, key) for chain in audited.chains_to(key))


def needed_by(
    audited: Audited, key: str, kinds: Iterable[EdgeKind] | None = None, labels: bool = False
) -> str:
    """The direct users of `key` (through edges of `kinds`), display names, once each; with
    `labels`, each with how it loads `key` ("cudnn64_9.dll (runtime)")."""
    wanted = set(kinds) if kinds is not None else set(EdgeKind)
    names = set()
    for edge in audited.plan.parents(key):
        if edge.kind in wanted:
            name = audited.name(edge.parent) if edge.parent else "the profile (a root)"
            names.add(f"{name} ({EDGE_LABELS[edge.kind]})" if labels else name)
    return ", ".join(sorted(names, key=str.lower))


def inferred(audited: Audited, key: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the records a need of `key` rests on, one detail line saying so) when every chain to
    it passes a record (an absent DLL's import table, a pattern's recorded file name); the
    folder alone then cannot show the need. ((), ()) when some chain is all in the folder."""
    chains = audited.chains_to(key)
    if not chains or not all(any(edge.inferred for edge in chain) for chain in chains):
        return (), ()
    origins = tuple(sorted({edge.inferred for c in chains for edge in c if edge.inferred}))
    reasons = []
    for edge in (edge for edge in chains[0] if edge.inferred):
        if edge.kind is EdgeKind.RUNTIME:
            pattern = (edge.detail or "").rpartition("[")[2].rstrip("]")
            reasons.append(f"{audited.name(edge.child)} is the file recorded for {pattern}")
        else:
            reasons.append(f"{audited.name(edge.parent or '')} is absent, its imports recorded")
    line = f"inferred from {' and '.join(origins)}: " + "; ".join(dict.fromkeys(reasons))
    return origins, (line,)


def back_chain(chain: list[Edge], audited: Audited, start: str) -> str:
    """`cublasLt64_12.dll ← cublas64_12.dll ← onnxruntime_providers_cuda.dll`."""
    keys = [start] + [edge.child for edge in chain]
    return " ← ".join(audited.name(key) for key in reversed(keys))


def missing_at_start(audited: Audited) -> Iterator[Finding]:
    """Missing from the import closure of a root: the loader itself reports these."""
    for item in audited.plan.missing:
        if item.key in audited.load_time:
            users = needed_by(audited, item.key, [EdgeKind.IMPORT])
            how = (
                f"imported by {users}, which cannot load"
                if users
                else f"loaded by {needed_by(audited, item.key)} as the app starts"
            )
            message = f"{item.name} is missing: {how}"
            origins, note = inferred(audited, item.key)
            details = (*note, *chains(audited, item.key))
            yield finding("BA101", (item.name,), message, details, origins)


def missing_later(audited: Audited) -> Iterator[Finding]:
    """Missing, but only loaded after start-up (runtime rules, delay imports): no loader
    check at start-up sees it; the first operation that needs it fails, possibly hours in."""
    for item in audited.plan.missing:
        if item.key not in audited.load_time:
            users = needed_by(audited, item.key, labels=True)
            name = item.name
            if is_pattern(name):
                name = (
                    f"a file matching {name} (no concrete name is known: neither a lock file nor "
                    "the profile's [[files]] records one)"
                )
            message = (
                f"{name} is missing, and nothing needs it at start-up: the first operation "
                f"that loads it fails; needed by {users}"
            )
            origins, note = inferred(audited, item.key)
            details = (*note, *chains(audited, item.key))
            yield finding("BA102", (item.name,), message, details, origins)


def provider_fails(audited: Audited) -> Iterator[Finding]:
    """An execution provider whose own import closure is incomplete: ORT's LoadLibrary of it
    fails with error 126, and ORT quietly runs on the CPU."""
    for provider in audited.plan.with_status(Status.BUNDLED):
        if not provider.key.startswith(PROVIDER_PREFIX) or provider.key == PROVIDERS_SHARED:
            continue
        closure = audited.plan.import_closure(provider.key)
        lost = {key: chain for key, chain in closure.items() if is_missing(audited, key)}
        if lost:
            shown = [back_chain(chain, audited, provider.key) for chain in lost.values()]
            message = (
                f"{provider.name} will fail with error 126 and ORT falls back to CPU: "
                f"missing {'; '.join(shown)}"
            )
            files = (provider.name, *(audited.name(key) for key in lost))
            yield finding("BA103", files, message, file=provider.name)


def is_missing(audited: Audited, key: str) -> bool:
    item = audited.plan.file(key)
    return item is not None and item.status is Status.MISSING


def providers_shared_missing(audited: Audited) -> Iterator[Finding]:
    if is_missing(audited, PROVIDERS_SHARED):
        users = needed_by(audited, PROVIDERS_SHARED)
        message = (
            f"{audited.name(PROVIDERS_SHARED)} is missing: needed by {users}; ORT loads no "
            "execution provider DLL without it"
        )
        yield finding("BA104", (audited.name(PROVIDERS_SHARED),), message)


def vc_runtime_part_missing(audited: Audited) -> Iterator[Finding]:
    for key in VC_RUNTIME_PARTS:
        if is_missing(audited, key):
            users = needed_by(audited, key)
            message = f"{audited.name(key)} is missing: {users} import it and cannot load"
            yield finding("BA105", (audited.name(key),), message)
