"""Decide layer: does a profile fit the DLLs it pins? One check for `profiles new`, `profiles
check` and `bundle build`, so a profile that cannot work is refused before anything is written.

Two ways a profile misfits its ORT build:
- a pin under another version than the DLLs import: `onnxruntime_providers_cuda.dll` (1.31.1)
  imports `cublas64_13.dll` while the profile pins `cublas64_12.dll` (a CUDA 12 component set
  for a CUDA 13 build). The missing name and a pinned name of the same family under another
  version prove it (`versioned`: family and version from NVIDIA's naming);
- a name the closure needs that neither the pinned DLLs nor the Windows system list know (a
  new Windows DLL such as `dxcore.dll` before the minimum Windows allows it, or a vendor DLL no
  artifact provides).
Both read a Plan resolved against the pinned DLLs only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bundler.closure.plan import EdgeKind, Plan, PlanFile, Status
from bundler.errors import BuildMismatchError
from bundler.target.profiles import Profile, dll_key, matches, versioned


@dataclass(frozen=True)
class Misfit:
    """A needed name the pins do not give: who needs it, and the pinned name of the same
    library under another version, if there is one."""

    name: str
    importers: tuple[str, ...]  # static or delay imports: the proof
    loaders: tuple[str, ...]  # runtime rules
    pinned_instead: str | None = None
    artifact: str | None = None

    def text(self) -> str:
        if self.importers:
            line = f"{', '.join(self.importers)} imports {self.name}"
        elif self.loaders:
            line = f"{', '.join(self.loaders)} loads {self.name} at run time"
        else:
            line = f"the profile's roots name {self.name}"
        if self.pinned_instead:
            return f"{line}, but the profile pins {self.pinned_instead} (artifact {self.artifact})"
        return f"{line}, which no pinned artifact provides and Windows does not have"


def misfits(plan: Plan, profile: Profile) -> list[Misfit]:
    """Every missing name of `plan` (resolved against the profile's pinned DLLs), with the
    pinned name of the same library under another version where one exists."""
    pinned = _pinned_names(plan, profile)
    found = []
    for item in plan.missing:
        edges = [edge for edge in plan.parents(item.key) if edge.parent]
        importers = _names(plan, (e.parent for e in edges if e.kind is not EdgeKind.RUNTIME))
        loaders = _names(plan, (e.parent for e in edges if e.kind is EdgeKind.RUNTIME))
        other = _other_version(item, pinned)
        found.append(Misfit(item.name, importers, loaders, *(other or (None, None))))
    return found


def _names(plan: Plan, keys: Iterable[str | None]) -> tuple[str, ...]:
    return tuple(sorted({_name(plan, key) for key in keys if key}, key=str.lower))


def require_fit(plan: Plan, profile: Profile) -> None:
    """BuildMismatchError naming the import that proves a pin of another version."""
    _refuse(
        [item for item in misfits(plan, profile) if item.pinned_instead],
        f"profile {profile.name} does not fit its ORT build",
        "Use a profile for the CUDA major the DLLs import (bundle profiles new --ort VERSION "
        "--flavour gpu-cudaN); nothing was written.",
    )


def _pinned_names(plan: Plan, profile: Profile) -> dict[str, tuple[str, str]]:
    """Versioned family -> (a pinned DLL name, its artifact), from the plan's bundled files
    and the profile's concrete `provides` names."""
    pinned: dict[str, tuple[str, str]] = {}
    for item in plan.with_status(Status.BUNDLED):
        parsed = versioned(item.name)
        if parsed:
            pinned.setdefault(parsed[0], (item.name, item.artifact or "?"))
    for artifact in profile.artifacts:
        for name in artifact.provides:
            parsed = versioned(name) if "*" not in name else None
            if parsed:
                pinned.setdefault(parsed[0], (name, artifact.name))
    return pinned


def _other_version(item: PlanFile, pinned: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    parsed = versioned(item.name)
    if parsed is None or parsed[0] not in pinned:
        return None
    name, artifact = pinned[parsed[0]]
    if matches(name, item.name) or dll_key(name) == item.key:
        return None
    return name, artifact


def _name(plan: Plan, key: str) -> str:
    item = plan.file(key)
    return item.name if item else key


def require_resolved(plan: Plan, profile: Profile, what: str) -> None:
    """Every name of the closure resolves (pinned, system or driver): `profiles new` checks
    its result before writing it, naming what it does not know."""
    _refuse(
        misfits(plan, profile),
        f"{what} does not resolve against its pinned DLLs and the Windows system list",
        "Nothing was written. A Windows DLL needs a row in manifests/windows/system.toml (with "
        "the first Windows version that has it); a vendor DLL, a component set that provides it.",
    )


def _refuse(problems: list[Misfit], head: str, remedy: str) -> None:
    if problems:
        raise BuildMismatchError(f"{head}: {'; '.join(item.text() for item in problems)}. {remedy}")
