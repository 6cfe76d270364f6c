"""Windows system policy: which DLL names the OS provides, so they are never bundled.

Loaded from manifests/windows/system.toml (API-set prefixes, KnownDLLs, and groups of DLLs
present on every install since a given Windows build). The set that applies to a target is the
union of the groups whose `since` is not newer than the profile's minimum Windows version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundler import resources
from bundler.manifest import Table, load_toml
from bundler.profiles import dll_key, parse_windows_version


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

    def is_api_set(self, name: str) -> bool:
        return dll_key(name).startswith(self.api_set_prefixes)

    def is_system(self, name: str, min_windows: tuple[int, ...]) -> bool:
        key = dll_key(name)
        if key in self.known_dlls:
            return True
        return any(key in group.names for group in self.groups if group.since <= min_windows)


def load_system_policy(path: Path | None = None) -> SystemPolicy:
    table = load_toml(path or resources.system_policy_file())
    api_sets = table.table("api_sets")
    known = table.table("known_dlls")
    policy = SystemPolicy(
        api_set_prefixes=tuple(dll_key(prefix) for prefix in api_sets.strings("prefixes")),
        known_dlls=frozenset(dll_key(name) for name in known.strings("names")),
        groups=tuple(_group(item) for item in table.tables("system_dlls")),
    )
    for part in (api_sets, known, table):
        part.done()
    return policy


def _group(table: Table) -> SystemGroup:
    group = SystemGroup(
        since=parse_windows_version(table, "since"),
        source=table.string("source"),
        names=frozenset(dll_key(name) for name in table.strings("names")),
    )
    table.done()
    return group
