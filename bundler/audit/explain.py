"""Decide layer: `bundle audit PATH --explain DLL`: why this DLL would fail to load here (error
126).

Decide layer: a pure function over the audit's Plan and profile, no I/O. The search order is
the loader's: first the DLL's static import closure (what LoadLibrary maps at once; a gap there
is error 126), breadth first so the shortest chain wins; only when that is complete, what it
loads later (delay imports and the profile's runtime rules), which fails at the first operation
that needs it. The supplier of a missing link is the profile artifact that `provides` it, with
its pinned sources, as `bundle build` would fetch it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bundler.closure.plan import Edge, Plan, PlanFile, Status
from bundler.target.profiles import (
    Artifact,
    DirSource,
    PipSource,
    Profile,
    Source,
    dll_key,
    matches,
)


@dataclass(frozen=True)
class Supplier:
    """The profile artifact that provides a DLL, and its pinned sources as text."""

    artifact: str
    version: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Explanation:
    """The verdict on one DLL of an audited folder. `missing` is None when its whole closure
    is there; `at_start` tells error 126 (a static import) from a later failure."""

    dll: str  # display spelling
    profile: str
    missing: str | None = None
    at_start: bool = True
    chain: str | None = None  # `a.dll -import-> b.dll`, from the DLL (or a root) to `missing`
    note: str | None = None  # why a file present under that name cannot be used
    supplier: Supplier | None = None
    also_missing: tuple[str, ...] = ()  # the closure's other missing DLLs
    driver: tuple[str, ...] = ()  # what the GPU driver must provide
    system: tuple[str, ...] = ()  # what Windows must provide (API sets left out)
    redist: tuple[str, ...] = ()  # what vc_redist.x64.exe installs (--vc-runtime installer)
    pruned: tuple[str, ...] = ()  # left out by the build for the app's models (--model)
    pruned_why: str | None = None  # the build's reason, when `dll` itself was pruned

    @property
    def loads(self) -> bool:
        return self.missing is None

    def to_dict(self) -> dict[str, Any]:
        supplier = self.supplier
        return {
            "dll": self.dll,
            "profile": self.profile,
            "loads": self.loads,
            "missing": self.missing,
            "at_start": self.at_start if self.missing else None,
            "chain": self.chain,
            "note": self.note,
            "supplier": asdict(supplier) if supplier else None,
            "also_missing": list(self.also_missing),
            "driver": list(self.driver),
            "system": list(self.system),
            "redist": list(self.redist),
            "pruned": list(self.pruned),
            "pruned_why": self.pruned_why,
        }


def explain(plan: Plan, profile: Profile, dll: str) -> Explanation | None:
    """The first missing link of `dll`'s closure in the audited folder, or None when `dll` is
    not in the closure at all (neither needed by the folder's roots nor one of them)."""
    item = plan.file(dll)
    if item is None:
        return None
    closure = full_closure(plan, item.key)
    present = [found for key in closure if (found := plan.file(key)) is not None]
    driver = _named(present, Status.DRIVER)
    system = _named(present, Status.SYSTEM)
    redist = _named(present, Status.REDIST)
    pruned = _named(present, Status.PRUNED)
    why = item.note if item.status is Status.PRUNED else None
    lost = [entry for entry in present if entry.status is Status.MISSING]
    if not lost:
        return Explanation(
            item.name, plan.profile, driver=driver, system=system, redist=redist,
            pruned=pruned, pruned_why=why,
        )  # fmt: skip
    first, at_start, chain = _first_missing(plan, item, closure)
    return Explanation(
        item.name,
        plan.profile,
        missing=first.name,
        at_start=at_start,
        chain=chain,
        note=first.note,
        supplier=supplier(profile, first.name),
        also_missing=tuple(entry.name for entry in lost if entry.key != first.key),
        driver=driver,
        system=system,
        redist=redist,
        pruned=pruned,
        pruned_why=why,
    )


def full_closure(plan: Plan, start: str) -> dict[str, list[Edge]]:
    """Everything `start` loads sooner or later (every edge kind), breadth first, each with
    the shortest chain from `start`."""
    reached: dict[str, list[Edge]] = {start: []}
    queue = [start]
    while queue:
        key = queue.pop(0)
        for edge in plan.children(key):
            if edge.child not in reached:
                reached[edge.child] = [*reached[key], edge]
                queue.append(edge.child)
    return reached


def _first_missing(
    plan: Plan, item: PlanFile, closure: dict[str, list[Edge]]
) -> tuple[PlanFile, bool, str]:
    """(the first missing file, whether the loader misses it at once, the chain to it)."""
    if item.status is Status.MISSING:
        return item, True, plan.why(item.key) or item.name
    static = plan.import_closure(item.key)
    for phase, at_start in ((static, True), (closure, False)):
        for key, chain in phase.items():
            found = plan.file(key)
            if found is not None and found.status is Status.MISSING:
                return found, at_start, plan.chain_text(chain, key)
    raise AssertionError("a missing file of the closure was not reached")  # pragma: no cover


def _named(files: list[PlanFile], *statuses: Status) -> tuple[str, ...]:
    return tuple(sorted((f.name for f in files if f.status in statuses), key=dll_key))


def supplier(profile: Profile, name: str) -> Supplier | None:
    """The first artifact of the profile that provides `name` (names or glob patterns)."""
    for artifact in profile.artifacts:
        if any(matches(wanted, name) for wanted in artifact.provides):
            return _supplier(artifact)
    return None


def _supplier(artifact: Artifact) -> Supplier:
    return Supplier(artifact.name, artifact.version, tuple(map(source_text, artifact.sources)))


def source_text(source: Source) -> str:
    """`pip nvidia-cudnn-cu12==9.1.0.70 (wheel ..., sha256 ...)`, one line per pinned source."""
    if isinstance(source, PipSource):
        return f"pip {source.package}=={source.version} ({source.wheel}, sha256 {source.sha256})"
    if isinstance(source, DirSource):
        return f"dir %{source.env}%\\{source.subdir} (a local install)"
    return f"url {source.url} (sha256 {source.sha256})"
