"""Read layer: Windows system policy: which DLL names the OS provides, so they are never bundled.

Loaded from manifests/windows/system.toml (API-set prefixes, KnownDLLs, and groups of DLLs
present on every install since a given Windows build). The set that applies to a target is the
union of the groups whose `since` is not newer than the profile's minimum Windows version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundler.target import resources
from bundler.target.manifest import Table, load_toml
from bundler.target.profiles import dll_key
from bundler.target.values import parse_windows_version


@dataclass(frozen=True)
class SystemGroup:
    since: tuple[int, ...]
    source: str
    names: frozenset[str]


@dataclass(frozen=True)
class SystemPolicy:
    api_set_prefixes: tuple[str, ...]
    known_dlls: frozenset[str]
    groups: tuple[SystemGroup, ...]
    app_local_ignored: frozenset[str] = frozenset()  # never loaded from an app folder either
    system32_copies: frozenset[str] = frozenset()  # shipped by apps, also in some System32s

    def is_api_set(self, name: str) -> bool:
        return dll_key(name).startswith(self.api_set_prefixes)

    def is_system(self, name: str, min_windows: tuple[int, ...]) -> bool:
        key = dll_key(name)
        if key in self.known_dlls:
            return True
        return any(key in group.names for group in self.groups if group.since <= min_windows)

    def since(self, name: str) -> tuple[int, ...] | None:
        """The first Windows version whose every install has `name` (None: not a system DLL,
        or a KnownDLL, which every supported Windows has)."""
        key = dll_key(name)
        if key in self.known_dlls:
            return None
        found = [group.since for group in self.groups if key in group.names]
        return min(found) if found else None

    def source(self, name: str) -> str | None:
        key = dll_key(name)
        return next((group.source for group in self.groups if key in group.names), None)

    def ignores_app_local(self, name: str) -> bool:
        """A copy of `name` in the app folder is never what Windows 10+ loads: an API-set
        name, a KnownDLL, or an OS component like the UCRT."""
        key = dll_key(name)
        return self.is_api_set(key) or key in self.known_dlls or key in self.app_local_ignored


def load_system_policy(path: Path | None = None) -> SystemPolicy:
    table = load_toml(path or resources.system_policy_file())
    api_sets = table.table("api_sets")
    known = table.table("known_dlls")
    policy = SystemPolicy(
        api_set_prefixes=tuple(dll_key(prefix) for prefix in api_sets.strings("prefixes")),
        known_dlls=frozenset(dll_key(name) for name in known.strings("names")),
        groups=tuple(_group(item) for item in table.tables("system_dlls")),
        app_local_ignored=_names(table, "app_local_ignored"),
        system32_copies=_names(table, "system32_copies"),
    )
    for part in (api_sets, known, table):
        part.done()
    return policy


def _names(parent: Table, key: str) -> frozenset[str]:
    """The `names` of an optional [key] table: lists the audit uses, not the resolver."""
    table = parent.table(key, None)
    if table is None:
        return frozenset()
    names = frozenset(dll_key(name) for name in table.strings("names"))
    table.done()
    return names


def _group(table: Table) -> SystemGroup:
    group = SystemGroup(
        since=parse_windows_version(table, "since"),
        source=table.string("source"),
        names=frozenset(dll_key(name) for name in table.strings("names")),
    )
    table.done()
    return group
