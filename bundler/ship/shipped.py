"""Decide layer: the one closure `bundle build`, `bundle msbuild` and `bundle deps` compute: the
profile's roots and the apps resolved in the acquired artifacts' folders (after any folders
the user gave), each bundled file tied to the archive it came from, and, for what ships, the
profile's or the build's VC++ runtime policy applied. The commands then check it their own way
(build and msbuild refuse an incomplete closure, deps shows it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bundler.acquire.acquired import Acquired, dll_search_path
from bundler.acquire.provenance import attach_provenance
from bundler.binary.pe import PEInfo
from bundler.closure.plan import Plan
from bundler.closure.resolve import Unreadable, resolve
from bundler.closure.vcruntime import apply_vc_runtime_policy
from bundler.target.profiles import Profile
from bundler.target.system import load_system_policy


def shipped_closure(
    apps: Sequence[PEInfo],
    profile: Profile,
    acquired: Sequence[Acquired] = (),
    search: Sequence[Path] = (),
    vc_runtime: str | None = None,
    *,
    app_folders_first: bool = True,
    unreadable: Unreadable = "finding",
) -> Plan:
    """The closure of `apps` and `profile`'s roots; with `vc_runtime` (a mode of the VC++
    runtime), as it ships."""
    folders = [*search, *dll_search_path(acquired)]
    plan = resolve(
        apps, profile, load_system_policy(), folders, app_folders_first=app_folders_first,
        unreadable=unreadable,
    )  # fmt: skip
    if acquired:
        plan = attach_provenance(plan, acquired)
    return apply_vc_runtime_policy(plan, vc_runtime) if vc_runtime else plan
