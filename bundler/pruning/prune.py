"""Decide layer: model-aware pruning: which run-time-loaded libraries (cuDNN's sub-libraries,
cuFFT, NVRTC) a bundle may leave out, given the ONNX models the app runs and evidence of what
they load (bundler.pruning.evidence: a table measured per op; bundler.pruning.app_evidence: the
app's own
measurement, `bundle measure`).

Conservative by design (docs/pruning.md):
- candidates are DLLs that only run-time loads reach: cuDNN's sub-libraries, cuFFT and NVRTC
  (with its builtins); never cudnn64_9, cudnn_graph64_9, the CUDA runtime, cuBLAS, ORT's own
  DLLs, or any DLL another shipped DLL imports (statically or delay-loaded);
- a table speaks only for libraries it saw some op load, and never for what every session
  loads: the Linux build it was measured on may link a library the Windows build loads lazily;
- a candidate is left out only when every op of every model, and every op the session's
  fusions may make of them, has a row, and no row shows it loading; with the app's own
  measurement, when no measured model loaded it;
- an op without a row, a profile without evidence, other provider options than the evidence
  was measured with, or no models: nothing is pruned, and the result says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from bundler.closure.lock import PrunedFile
from bundler.closure.plan import EdgeKind, Plan, PlanFile, Status
from bundler.pruning.app_evidence import AppEvidence
from bundler.pruning.evidence import Evidence
from bundler.pruning.onnx_models import ModelOps
from bundler.target.profiles import Profile

CANDIDATE = re.compile(
    r"cudnn_(adv|cnn|ops|engines_precompiled|engines_runtime_compiled|heuristic)64_\d+\.dll"
    r"|cufft64_\d+\.dll|nvrtc64_\d+_0\.dll|nvrtc-builtins64_\d+\.dll",
    re.IGNORECASE,
)
SUB_LIBRARY = re.compile(
    r"cudnn_(adv|cnn|ops|engines_precompiled|engines_runtime_compiled|heuristic)64_\d+\.dll",
    re.IGNORECASE,
)
_STATIC = (EdgeKind.IMPORT, EdgeKind.DELAY_IMPORT)
# NVRTC loads its builtins whenever it compiles: they ship together, or not at all
_COMPANIONS = (
    (
        re.compile(r"nvrtc64_\d+_0\.dll", re.IGNORECASE),
        re.compile(r"nvrtc-builtins64_\d+\.dll", re.I),
    ),
)


class LoadSource(Protocol):
    """What a model loads, from one kind of evidence."""

    @property
    def name(self) -> str: ...

    def speaks_for(self, dll: str) -> bool:
        """Whether this evidence can tell if `dll` (a lower-case DLL name) is loaded."""
        ...

    def describe(self) -> str: ...

    def loads(self, models: Sequence[ModelOps]) -> tuple[frozenset[str], tuple[str, ...]]:
        """(what the models load, lower-case DLL names; ops without evidence)."""
        ...

    def why_missing(self, ops: Sequence[str]) -> str:
        """Why the evidence has no row for the first of `ops` it records a reason for, as
        " (OP: REASON)"; "" when it records none."""
        ...


@dataclass(frozen=True)
class TableSource:
    """A measured per-op table (manifests/evidence/)."""

    evidence: Evidence

    @property
    def name(self) -> str:
        return self.evidence.name

    def speaks_for(self, dll: str) -> bool:
        return dll in self.evidence.prunable

    def describe(self) -> str:
        return self.evidence.describe()

    def loads(self, models: Sequence[ModelOps]) -> tuple[frozenset[str], tuple[str, ...]]:
        ops = {op for model in models for op in model.ops}
        return self.evidence.loads_for(ops, _types(models, ops))

    def why_missing(self, ops: Sequence[str]) -> str:
        recorded = self.evidence.unmeasured
        first = next((op for op in ops if op in recorded), None)
        return f" ({first}: {recorded[first]})" if first else ""


def _types(models: Sequence[ModelOps], ops: set[str]) -> dict[str, frozenset[str]]:
    """Each op's element types over all the models; empty (unknown) where one model has none."""
    found: dict[str, frozenset[str]] = {}
    for op in ops:
        kinds = [model.types.get(op, frozenset()) for model in models if op in model.ops]
        found[op] = frozenset().union(*kinds) if all(kinds) else frozenset()
    return found


@dataclass(frozen=True)
class MeasuredSource:
    """The app's own measurement (`bundle measure`): what each of its models loaded, read from
    the whole process, so it speaks for every candidate. Check it against the build first
    (bundler.pruning.app_evidence.problems)."""

    app: AppEvidence

    @property
    def name(self) -> str:
        return self.app.name

    def speaks_for(self, dll: str) -> bool:
        return True

    def describe(self) -> str:
        return self.app.describe()

    def loads(self, models: Sequence[ModelOps]) -> tuple[frozenset[str], tuple[str, ...]]:
        given = {model.path.name.lower() for model in models}
        measured = [model for model in self.app.models if model.name.lower() in given]
        return frozenset(name.lower() for m in measured for name in m.loaded), ()

    def why_missing(self, ops: Sequence[str]) -> str:
        return ""  # an app's measurement has no rows: it never lacks one


@dataclass(frozen=True)
class Pruning:
    """The decision: what is left out (none, with the reason, where nothing may be)."""

    models: tuple[ModelOps, ...]
    evidence: str | None  # the evidence's name (a table or an app evidence file)
    pruned: tuple[PrunedFile, ...] = ()
    kept: tuple[str, ...] = ()  # candidates the evidence shows loading
    unknown_ops: tuple[str, ...] = ()
    reason: str = ""  # why nothing was pruned, when nothing was

    @property
    def saved(self) -> int:
        return sum(item.size for item in self.pruned)


def evidence_for(profile: Profile, ort: str | None, found: Sequence[Evidence]) -> Evidence | None:
    """The evidence measured for this ORT release with this cuDNN major.minor, if any."""
    cudnn = cudnn_version(profile)
    for evidence in found:
        if evidence.ort == ort and cudnn and _major_minor(cudnn) == evidence.cudnn_major_minor():
            return evidence
    return None


def cudnn_version(profile: Profile) -> str | None:
    for artifact in profile.artifacts:
        if any(name.lower().startswith("cudnn64_") for name in artifact.provides):
            return artifact.version
    return None


def options_mismatch(evidence: Evidence, declared: Mapping[str, str]) -> str:
    """Why `evidence` does not apply to an app with these CUDA EP options ('' when it does)."""
    if dict(declared) == evidence.provider_options:
        return ""
    measured = _options_text(evidence.provider_options)
    return (
        f"{evidence.name} was measured with {measured}, and the app declares "
        f"{_options_text(declared)}: measure the app itself (bundle measure, then --evidence); "
        "nothing is pruned"
    )


def _options_text(options: Mapping[str, str]) -> str:
    if not options:
        return "the CUDA EP's default options"
    return ", ".join(f"{key}={value}" for key, value in sorted(options.items()))


def decide(
    plan: Plan, models: Sequence[ModelOps], source: LoadSource | None, why_none: str
) -> Pruning:
    """What to leave out of `plan` for `models` (why_none: what to say without evidence)."""
    models = tuple(models)
    candidates = [item for item in plan.with_status(Status.BUNDLED) if _candidate(item)]
    if not models or not candidates:
        reason = "no models given" if not models else "the bundle has no run-time-loaded candidates"
        return Pruning(models, source.name if source else None, reason=reason)
    if source is None:
        return Pruning(models, None, reason=why_none)
    loaded, unknown = source.loads(models)
    if unknown:
        why = source.why_missing(unknown)
        reason = f"{source.name} has no row for {', '.join(unknown)}{why}: nothing is pruned"
        return Pruning(models, source.name, unknown_ops=unknown, reason=reason)
    free = {i.key for i in candidates if source.speaks_for(i.key) and i.key not in loaded}
    chosen = _without_companions(candidates, _without_imported(plan, free))
    kept = tuple(sorted(i.name for i in candidates if i.key not in chosen))
    pruned = tuple(_pruned(item, models, source) for item in candidates if item.key in chosen)
    reason = "" if pruned else "every candidate is loaded, or the evidence cannot speak for it"
    return Pruning(models, source.name, pruned, kept, reason=reason)


def apply_pruning(plan: Plan, pruning: Pruning) -> Plan:
    """The plan with each pruned DLL's status PRUNED and its reason as the note."""
    why = {item.name.lower(): item.why for item in pruning.pruned}
    files = tuple(
        replace(item, status=Status.PRUNED, note=why[item.key]) if item.key in why else item
        for item in plan.files
    )
    return replace(plan, files=files)


def _candidate(item: PlanFile) -> bool:
    return CANDIDATE.fullmatch(item.name) is not None


def _without_imported(plan: Plan, chosen: set[str]) -> set[str]:
    """`chosen` less every DLL that a DLL staying in the bundle imports (until none does)."""
    while True:
        imported = {
            key
            for key in chosen
            for edge in plan.parents(key)
            if edge.kind in _STATIC and edge.parent is not None and edge.parent not in chosen
        }
        if not imported:
            return chosen
        chosen = chosen - imported


def _without_companions(candidates: Sequence[PlanFile], chosen: set[str]) -> set[str]:
    """`chosen` less the companions of a DLL that stays (NVRTC's builtins, with NVRTC)."""
    staying = {item.key for item in candidates} - chosen
    for lead, companion in _COMPANIONS:
        if any(lead.fullmatch(key) for key in staying):
            chosen = {key for key in chosen if not companion.fullmatch(key)}
    return chosen


def _pruned(item: PlanFile, models: Sequence[ModelOps], source: LoadSource) -> PrunedFile:
    names = ", ".join(model.path.name for model in models)
    why = f"no op of {names} loads it: {source.describe()} shows none doing so"
    return PrunedFile(item.name, item.size or 0, why)


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])
