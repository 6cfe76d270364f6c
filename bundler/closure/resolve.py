"""Decide layer: the complete DLL closure of an app for a target profile.

Pure apart from reading the files it inspects. Classification order for every name:
API set → driver DLL (profile) → Windows system DLL (policy, for the profile's minimum Windows)
→ the first usable file in the search folders (bundled) → missing. A candidate built for another
machine type is skipped, recorded as a finding, and the search goes on. A candidate that cannot be
read (not a PE file, truncated, corrupt) is never passed over in silence: with
`unreadable="error"` its InputFileError stops the resolution (a build must not ship around a
damaged file the user pointed it at); with "finding" (the default: audit and deps report every
problem at once) it is recorded as a finding, noted on the name, and the search goes on.

Edges come from three places: import tables, delay-import tables, and the profile's runtime rules
(what LoadLibrary pulls in at run time, which no import table shows). The closure does not
depend on what happens to be present: a missing DLL's import tables, when they were recorded
(the lock file, the profile's [[files]]), still give its edges, and a rule's pattern is
resolved to the recorded file name when no search folder has a match; such edges carry
`inferred` (where the record came from).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bundler.binary.pe import PEInfo, format_version, is_pe_candidate, read_pe
from bundler.closure.plan import Edge, EdgeKind, Finding, Plan, PlanFile, Status
from bundler.errors import InputFileError, MachineMismatchError
from bundler.target.profiles import Profile, dll_key, is_pattern, matches
from bundler.target.system import SystemPolicy

PEReader = Callable[[Path], PEInfo]
Unreadable = Literal["error", "finding"]


@dataclass(frozen=True)
class Recorded:
    """A DLL known without reading it: its import tables as recorded at build time (the lock
    file) or measured on the pinned artifact (the profile); `origin` says which."""

    name: str
    imports: tuple[str, ...]
    delay_imports: tuple[str, ...]
    origin: str  # "the lock file" | "the profile"


Records = Mapping[str, Recorded]  # by dll_key


class SearchPath:
    """Ordered, de-duplicated folders, each listed once and indexed by lower-case file name."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.folders: list[Path] = []
        for folder in folders:
            resolved = Path(os.path.abspath(folder))
            if resolved not in self.folders:
                self.folders.append(resolved)
        self._index = [self._list(folder) for folder in self.folders]

    @staticmethod
    def _list(folder: Path) -> dict[str, Path]:
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            return {}
        return {dll_key(e.name): Path(e.path) for e in entries if is_pe_candidate(e.name)}

    def candidates(self, name: str) -> list[Path]:
        key = dll_key(name)
        return [index[key] for index in self._index if key in index]

    def nested(self, name: str, depth: int = 3) -> Path | None:
        """A file of that name in a sub-folder of a search folder: the usual cause of a
        "missing" DLL is pointing --search at an install root instead of its bin folder."""
        key = dll_key(name)
        for folder in self.folders:
            for root, dirs, files in os.walk(folder):
                if Path(root) != folder and any(dll_key(f) == key for f in files):
                    return Path(root)
                if len(Path(root).relative_to(folder).parts) >= depth:
                    dirs.clear()
        return None

    def names_matching(self, pattern: str) -> list[str]:
        """File names (first spelling seen) in any folder that match a glob pattern."""
        found: dict[str, str] = {}
        for index in self._index:
            for key, path in index.items():
                if matches(pattern, key):
                    found.setdefault(key, path.name)
        return sorted(found.values(), key=dll_key)


@dataclass
class _Work:
    """Mutable state of one resolution; frozen into a Plan at the end."""

    files: dict[str, PlanFile] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    queue: deque[PEInfo] = field(default_factory=deque)


class Resolver:
    def __init__(
        self,
        profile: Profile,
        policy: SystemPolicy,
        search: SearchPath,
        reader: PEReader = read_pe,
        unreadable: Unreadable = "finding",
        records: Records | None = None,
    ) -> None:
        self.profile = profile
        self.policy = policy
        self.search = search
        self.read = reader
        self.unreadable = unreadable
        self.records = records or {}
        self.work = _Work()

    def resolve(self, apps: Sequence[PEInfo]) -> Plan:
        for app in apps:
            check_app_machine(app, self.profile)
            self.work.files[dll_key(app.name)] = _plan_file(app, Status.APP)
            self.work.queue.append(app)
        for root in self.profile.roots:
            self._need(root, None, EdgeKind.PROFILE_ROOT, "always shipped by the profile")
        while self.work.queue:
            self._expand(self.work.queue.popleft())
        return self._plan(apps)

    def _expand(self, info: PEInfo) -> None:
        parent = dll_key(info.name)
        for name in info.imports:
            self._need(name, parent, EdgeKind.IMPORT)
        for name in info.delay_imports:
            self._need(name, parent, EdgeKind.DELAY_IMPORT)
        self._runtime_loads(info.name)

    def _runtime_loads(self, name: str) -> None:
        """Runtime rules are keyed by name, so they apply to a missing trigger too: what it
        would load stays needed (and is reported when absent) instead of looking unused."""
        parent = dll_key(name)
        for rule in self.profile.rules_for(name):
            for target in rule.loads:
                if is_pattern(target):
                    self._need_pattern(target, parent, rule.why)
                else:
                    self._need(target, parent, EdgeKind.RUNTIME, rule.why)

    def _need_pattern(self, pattern: str, parent: str, why: str) -> None:
        """The files of the search folders that match; else the recorded file names that do
        (the concrete name a user restores); only else the pattern itself, with a finding."""
        detail = f"{why} [{pattern}]"
        names = self.search.names_matching(pattern)
        if names:
            for name in names:
                self._need(name, parent, EdgeKind.RUNTIME, detail)
            return
        recorded = [item for item in self.records.values() if matches(pattern, item.name)]
        for item in recorded:
            self._need(item.name, parent, EdgeKind.RUNTIME, detail, item.origin)
        if not recorded:
            self.work.findings.append(
                Finding(
                    "pattern-unmatched", pattern, f"no file in the search folders matches {pattern}"
                )
            )
            self._need(pattern, parent, EdgeKind.RUNTIME, detail)

    def _need(
        self,
        name: str,
        parent: str | None,
        kind: EdgeKind,
        detail: str | None = None,
        inferred: str | None = None,
    ) -> None:
        key = dll_key(name)
        self.work.edges.append(Edge(parent, key, kind, detail, inferred))
        if key not in self.work.files:
            self.work.files[key] = self._classify(name)
            if self.work.files[key].status is Status.MISSING:
                self._recorded_loads(key)
                self._runtime_loads(name)

    def _recorded_loads(self, key: str) -> None:
        """An absent DLL's recorded import tables stand in for its own."""
        recorded = self.records.get(key)
        if recorded is None:
            return
        for name in recorded.imports:
            self._need(name, key, EdgeKind.IMPORT, None, recorded.origin)
        for name in recorded.delay_imports:
            self._need(name, key, EdgeKind.DELAY_IMPORT, None, recorded.origin)

    def _classify(self, name: str) -> PlanFile:
        key = dll_key(name)
        if self.policy.is_api_set(name):
            return PlanFile(key, name, Status.API_SET)
        if self.profile.is_driver(name):
            return PlanFile(key, name, Status.DRIVER)
        if self.policy.is_system(name, self.profile.min_windows):
            return PlanFile(key, name, Status.SYSTEM)
        return self._find(name)

    def _find(self, name: str) -> PlanFile:
        skipped: list[str] = []
        for path in self.search.candidates(name):
            try:
                info = self.read(path)
            except InputFileError as exc:
                if self.unreadable == "error":
                    raise
                skipped.append(f"{path} is unreadable")
                self.work.findings.append(Finding("unreadable", name, str(exc), str(path)))
                continue
            if info.machine == self.profile.architecture:
                self.work.queue.append(info)
                return _plan_file(info, Status.BUNDLED)
            skipped.append(f"{path} is {info.machine}")
            self.work.findings.append(
                Finding(
                    "machine-mismatch",
                    info.name,
                    f"skipped {path}: built for {info.machine}, the profile targets "
                    f"{self.profile.architecture}",
                    str(path),
                )
            )
        nested = None if is_pattern(name) else self.search.nested(name)
        if nested is not None:
            skipped.append(f"a copy is in {nested}: add --search {nested}")
        note = "; ".join(skipped) if skipped else None
        return PlanFile(dll_key(name), name, Status.MISSING, note=note)

    def _plan(self, apps: Sequence[PEInfo]) -> Plan:
        app_keys = [dll_key(app.name) for app in apps]
        profile_roots = [dll_key(root) for root in self.profile.roots]
        return Plan(
            profile=self.profile.name,
            architecture=self.profile.architecture,
            min_windows=".".join(str(part) for part in self.profile.min_windows),
            search_folders=tuple(str(folder) for folder in self.search.folders),
            roots=tuple(dict.fromkeys(app_keys + profile_roots)),
            files=tuple(self.work.files.values()),
            edges=tuple(dict.fromkeys(self.work.edges)),
            findings=tuple(dict.fromkeys(self.work.findings)),
        )


def read_inputs(
    files: Sequence[Path],
    profile: Profile,
    search_folders: Sequence[Path],
    reader: PEReader = read_pe,
) -> list[PEInfo]:
    """Everything the user named, checked before any download: each file must be a PE of the
    profile's machine, each --search folder must exist."""
    for folder in search_folders:
        if not folder.is_dir():
            raise InputFileError(f"--search {folder}: no such folder.")
    apps = [reader(path) for path in files]
    for app in apps:
        check_app_machine(app, profile)
    return apps


def check_app_machine(app: PEInfo, profile: Profile) -> None:
    """An input built for another machine can never load the profile's DLLs: refuse it. A .NET
    AnyCPU exe (IL-only, PE32, machine x86) runs as x64 on 64-bit Windows and is accepted; one
    marked 32BITREQUIRED runs as x86 and is refused."""
    wanted = profile.architecture
    if app.managed and app.requires_32bit and wanted != "x86":
        raise MachineMismatchError(
            f"{app.path}: a .NET exe that must run as 32-bit (CLR header 32BITREQUIRED, from "
            f"/platform:x86 or 'Prefer 32-bit'), but profile '{profile.name}' targets {wanted}; "
            f"build it with /platform:{wanted} or AnyCPU without 'Prefer 32-bit'."
        )
    if not app.runs_as(wanted):
        raise MachineMismatchError(
            f"{app.path}: built for {app.machine}, but profile '{profile.name}' targets "
            f"{wanted}; {_machine_advice(app.machine, wanted)}"
        )


def _machine_advice(machine: str, wanted: str) -> str:
    """What to do about an app built for `machine`: a shipped profile for it, if one exists;
    else build the app for what the profiles target (ONNX Runtime's GPU and DirectML builds
    for Windows are x64 only)."""
    from bundler.target.profiles import available_profiles, load_profile

    for name in sorted(available_profiles()):
        if load_profile(name).architecture == machine:
            return f"build the app for {wanted}, or choose a profile for {machine} ({name})."
    return (
        f"build the app for {wanted}: no profile of bundle targets {machine}, and "
        "`bundle profiles new` derives profiles of the same builds."
    )


def _plan_file(info: PEInfo, status: Status) -> PlanFile:
    return PlanFile(
        key=dll_key(info.name),
        name=info.name,
        status=status,
        source=str(info.path),
        size=info.size,
        machine=info.machine,
        file_version=format_version(info.file_version) if info.file_version else None,
        linker_version=format_version(info.linker_version),
        signed=info.signed,
        product_name=info.product_name,
        managed=info.managed or None,
    )


def resolve(
    apps: Sequence[PEInfo],
    profile: Profile,
    policy: SystemPolicy,
    search_folders: Sequence[Path],
    reader: PEReader = read_pe,
    app_folders_first: bool = True,
    unreadable: Unreadable = "finding",
    records: Records | None = None,
) -> Plan:
    """The closure of `apps` + the profile's roots. App folders are searched first, as the
    Windows loader does, then `search_folders` in the order given. A build deploying into the
    app folder searches it last instead: what an earlier build put there is its output, not a
    source (the app's own DLLs are still found there). `unreadable`: see the module doc."""
    app_folders = [app.path.parent for app in apps]
    ordered = (
        app_folders + list(search_folders)
        if app_folders_first
        else list(search_folders) + app_folders
    )
    search = SearchPath(ordered)
    return Resolver(profile, policy, search, reader, unreadable, records).resolve(apps)
