"""Decide layer: a profile's roots, runtime rules, provided DLLs and VC++ runtime floor, from
the facts of a release's DLLs (import tables and `bundle scan` results). Pure functions.

Search order and invariants:
- roots: the ORT front DLL, plus the DLLs its scan finds it loading at run time that the
  flavour wants (the shared provider bridge always, `onnxruntime_providers_<ep>.dll` for each of
  the flavour's execution providers); other providers it names are left out, with the reason;
- the closure: from the roots, breadth first, along import and delay-import tables and along
  the runtime loads the scan finds (kind RUNTIME: a DLL of the release that the file names and
  does not import), never into a left-out provider;
- rules: every such runtime load inside the closure, grouped by the DLL that loads it; a load
  of a GPU driver DLL becomes a rule only for the driver API DLL (the flavour's
  [gpu_driver].dll, nvcuda.dll) loaded from its `driver_rules_from` artifacts (every CUDA
  library names nvcuda.dll; a driver is never shipped, so the others change no bundle and
  `bundle profiles check` accepts them);
- provides: the closure's DLLs, by the artifact whose wheel holds them (the first wins);
- VC++ floor: the newest MSVC linker version (major.minor) among the closure's binaries that
  import the VC++ runtime, which the shipped runtime must reach (onnxruntime#26599).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bundler.binary.pe import PEInfo
from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.rules.scan import Candidate, Kind, ScanResult
from bundler.target.loads import RecordedFile
from bundler.target.profiles import dll_key
from bundler.target.system import SystemPolicy

PROVIDER_PREFIX = "onnxruntime_providers_"


@dataclass(frozen=True)
class Load:
    """`trigger` loads `name` at run time, as the scan of `trigger` shows."""

    trigger: str  # display names
    name: str
    evidence: str  # "scan: cudnn64_9.dll names 'cudnn_ops64_9.dll' at offset 0x420b8 ..."


@dataclass(frozen=True)
class Floor:
    version: tuple[int, int]  # (14, 40)
    binary: str  # the binary with that linker


@dataclass(frozen=True)
class Facts:
    roots: tuple[Load, ...]  # (front, root, evidence); the front itself has trigger ""
    left_out: tuple[Load, ...]  # providers the front names that the flavour does not want
    closure: tuple[str, ...]  # display names, in discovery order
    rules: tuple[Load, ...]  # in discovery order
    driver_loads: tuple[Load, ...]  # driver names found, no rule needed
    owners: Mapping[str, str]  # closure key -> artifact name
    floor: Floor | None


def evidence_text(result: ScanResult, candidate: Candidate) -> str:
    first = candidate.evidence[0]
    shown = candidate.pattern or first.text
    return (
        f"scan: {result.path.name} names {shown!r} at offset {first.offset:#x} "
        f"({first.encoding}, {candidate.confidence.value} confidence)"
    )


def derive_facts(
    front: str,
    providers: Sequence[str],
    drivers: Sequence[str],
    driver_rules_from: Sequence[str],
    driver_api: str | None,
    owners: Mapping[str, str],
    infos: Mapping[str, PEInfo],
    scans: Mapping[str, ScanResult],
) -> Facts:
    """`owners`: key -> artifact for every DLL of the release; `infos` and `scans` by key.
    `driver_api`: the driver DLL a rule records (the one the installer's preflight checks)."""
    front_key = dll_key(front)
    if front_key not in scans:
        raise ValueError(f"{front} is in none of the release's wheels")
    wanted = [dll_key(f"{PROVIDER_PREFIX}{ep}.dll") for ep in ("shared", *providers)]
    roots, left_out = _roots(front_key, scans[front_key], wanted)
    excluded = {dll_key(load.name) for load in left_out}
    driver_keys = {dll_key(name) for name in drivers}
    closure, rules, driver_loads = _walk(
        [front_key, *(dll_key(load.name) for load in roots)],
        excluded,
        driver_keys,
        (set(driver_rules_from), dll_key(driver_api) if driver_api else None),
        owners,
        infos,
        scans,
    )
    return Facts(
        roots=(Load("", scans[front_key].path.name, "the ORT front DLL an app links"), *roots),
        left_out=tuple(left_out),
        closure=tuple(scans[key].path.name for key in closure),
        rules=tuple(rules),
        driver_loads=tuple(driver_loads),
        owners={key: owners[key] for key in closure},
        floor=vc_floor([infos[key] for key in closure]),
    )


def _roots(front: str, result: ScanResult, wanted: list[str]) -> tuple[list[Load], list[Load]]:
    """The providers the front DLL loads, the flavour's (shared bridge first) and the rest."""
    roots: list[Load] = []
    left_out: list[Load] = []
    for candidate in result.of_kind(Kind.RUNTIME):
        if not candidate.key.startswith(PROVIDER_PREFIX):
            continue
        load = Load(result.path.name, candidate.name, evidence_text(result, candidate))
        (roots if candidate.key in wanted else left_out).append(load)
    roots.sort(key=lambda load: wanted.index(dll_key(load.name)))
    return roots, left_out


def _walk(
    start: list[str],
    excluded: set[str],
    drivers: set[str],
    driver_rule: tuple[set[str], str | None],
    owners: Mapping[str, str],
    infos: Mapping[str, PEInfo],
    scans: Mapping[str, ScanResult],
) -> tuple[list[str], list[Load], list[Load]]:
    closure: list[str] = []
    rules: list[Load] = []
    driver_loads: list[Load] = []
    queue = list(dict.fromkeys(start))
    seen = set(queue)
    while queue:
        key = queue.pop(0)
        closure.append(key)
        info, result = infos[key], scans[key]
        children = [dll_key(name) for name in (*info.imports, *info.delay_imports)]
        for candidate in result.of_kind(Kind.RUNTIME):
            load = Load(result.path.name, candidate.name, evidence_text(result, candidate))
            if candidate.key in drivers:
                wanted = owners[key] in driver_rule[0] and candidate.key == driver_rule[1]
                (rules if wanted else driver_loads).append(load)
            elif candidate.key not in excluded:
                rules.append(load)
                children.append(candidate.key)
        for child in children:
            if child in owners and child not in seen and child not in excluded:
                seen.add(child)
                queue.append(child)
    return closure, rules, driver_loads


def vc_floor(infos: Sequence[PEInfo]) -> Floor | None:
    """The newest MSVC linker among the binaries importing the VC++ runtime (not the runtime
    DLLs themselves)."""
    users = [
        info
        for info in infos
        if dll_key(info.path.name) not in VC_RUNTIME_DLLS
        and any(dll_key(name) in VC_RUNTIME_DLLS for name in info.imports)
    ]
    if not users:
        return None
    newest = max(users, key=lambda info: info.linker_version)  # the first of equals
    return Floor(newest.linker_version, newest.path.name)


def as_pattern(name: str, patterns: Sequence[str]) -> str:
    """`name`, or the flavour's pattern it matches (a name that carries a version)."""
    for pattern in patterns:
        if fnmatch.fnmatchcase(dll_key(name), dll_key(pattern)):
            return pattern
    return name


def recorded_file(info: PEInfo, artifact: str, policy: SystemPolicy) -> RecordedFile:
    """A pinned DLL's [[files]] entry: its import tables as the file spells them, API sets left
    out (they are never files), so the audit knows what it loads when it is absent."""

    def names(found: Sequence[str]) -> tuple[str, ...]:
        return tuple(name for name in found if not policy.is_api_set(name))

    return RecordedFile(
        info.name, artifact, info.size, names(info.imports), names(info.delay_imports)
    )


@dataclass(frozen=True)
class Windows:
    """The derived profile's minimum Windows: the flavour's, raised to the first Windows
    version that has every system DLL the closure imports (system.toml's `since`)."""

    version: tuple[int, ...]
    why: str  # "" when the flavour's minimum stands

    @property
    def text(self) -> str:
        return ".".join(map(str, self.version))


def required_windows(
    facts: Facts, infos: Mapping[str, PEInfo], policy: SystemPolicy, floor: tuple[int, ...]
) -> Windows:
    """Every system DLL the closure imports must exist on the oldest Windows the profile
    allows: a static import of dxcore.dll (ORT 1.22.0) makes the app fail to start on a
    Windows 10 older than 2004, so the minimum becomes 10.0.19041."""
    raised: dict[str, tuple[int, ...]] = {}
    for name in facts.closure:
        info = infos[dll_key(name)]
        for imported in (*info.imports, *info.delay_imports):
            since = policy.since(imported)
            if since is not None and since > floor:
                raised.setdefault(f"{info.name} imports {imported}", since)
    if not raised:
        return Windows(floor, "")
    version = max(raised.values())
    reasons = [
        f"{what} ({'.'.join(map(str, since))}+, manifests/windows/system.toml)"
        for what, since in raised.items()
        if since == version
    ]
    return Windows(version, "raised from the flavour's minimum: " + "; ".join(reasons))
