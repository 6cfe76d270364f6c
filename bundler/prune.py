"""Decide layer: model-aware pruning: which cuDNN sub-libraries a bundle may leave out, given
the ONNX models the app runs and the measured load evidence (bundler.evidence).

Conservative by design (docs/pruning.md):
- only cuDNN's run-time-loaded sub-libraries are candidates (adv, cnn, ops, the two engine
  libraries, heuristic); never cudnn64_9, cudnn_graph64_9 or any DLL another shipped DLL imports;
- a candidate is left out only when every op of every model has a row in evidence measured for
  this ORT release and cuDNN version, and no row shows it loading;
- an op the evidence lacks, a profile without evidence, or no models: nothing is pruned, and
  the result says why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bundler.evidence import Evidence
from bundler.lock import PrunedFile
from bundler.models import ModelOps
from bundler.plan import EdgeKind, Plan, PlanFile, Status
from bundler.profiles import Profile

SUB_LIBRARY = re.compile(
    r"cudnn_(adv|cnn|ops|engines_precompiled|engines_runtime_compiled|heuristic)64_\d+\.dll",
    re.IGNORECASE,
)
_STATIC = (EdgeKind.IMPORT, EdgeKind.DELAY_IMPORT)


@dataclass(frozen=True)
class Pruning:
    """The decision: what is left out (none, with the reason, where nothing may be)."""

    models: tuple[ModelOps, ...]
    evidence: Evidence | None
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


def decide(
    plan: Plan, models: Sequence[ModelOps], evidence: Evidence | None, why_none: str
) -> Pruning:
    """What to leave out of `plan` for `models` (why_none: what to say without evidence)."""
    models = tuple(models)
    candidates = [item for item in plan.with_status(Status.BUNDLED) if _candidate(item)]
    if not models or not candidates:
        reason = "no models given" if not models else "the bundle has no cuDNN sub-libraries"
        return Pruning(models, evidence, reason=reason)
    if evidence is None:
        return Pruning(models, None, reason=why_none)
    ops = sorted({op for model in models for op in model.ops})
    unknown = tuple(op for op in ops if op not in evidence.ops)
    if unknown:
        reason = f"{evidence.name} has no row for {', '.join(unknown)}: nothing is pruned"
        return Pruning(models, evidence, unknown_ops=unknown, reason=reason)
    loaded = {name.lower() for op in ops for name in evidence.ops[op].loads}
    chosen = _without_imported(plan, {i.key for i in candidates if i.key not in loaded})
    kept = tuple(sorted(i.name for i in candidates if i.key not in chosen))
    pruned = tuple(_pruned(item, models, evidence) for item in candidates if item.key in chosen)
    return Pruning(models, evidence, pruned, kept, reason="" if pruned else "every one is loaded")


def apply_pruning(plan: Plan, pruning: Pruning) -> Plan:
    """The plan with each pruned DLL's status PRUNED and its reason as the note."""
    why = {item.name.lower(): item.why for item in pruning.pruned}
    files = tuple(
        replace(item, status=Status.PRUNED, note=why[item.key]) if item.key in why else item
        for item in plan.files
    )
    return replace(plan, files=files)


def _candidate(item: PlanFile) -> bool:
    return SUB_LIBRARY.fullmatch(item.name) is not None


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


def _pruned(item: PlanFile, models: Sequence[ModelOps], evidence: Evidence) -> PrunedFile:
    names = ", ".join(model.path.name for model in models)
    why = (
        f"no op of {names} loads it: {evidence.name} (ORT {evidence.ort}, cuDNN "
        f"{evidence.cudnn}, measured on {evidence.gpu}, {evidence.platform}) shows none doing so"
    )
    return PrunedFile(item.name, item.size or 0, why)


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])
