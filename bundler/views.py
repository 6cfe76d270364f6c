"""Text views of a Plan and of profiles, for people. Pure: they return strings; the CLI prints.

The dependency tree shows what ships (bundled), what must exist on the target (driver) and what
is missing; system DLLs and API sets would repeat under every node, so they are summarised once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from bundler.acquire import Acquired
from bundler.build import BuildResult
from bundler.cache import CacheEntry
from bundler.lock import LOCK_NAME
from bundler.plan import EDGE_LABELS, Edge, EdgeKind, Plan, PlanFile, Status
from bundler.profiles import Profile
from bundler.render_iss import IssResult

TREE_STATUSES = (Status.APP, Status.BUNDLED, Status.DRIVER, Status.MISSING)


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


def _label(item: PlanFile, edge: Edge | None) -> str:
    parts = [item.name, item.status.value]
    if item.status in (Status.APP, Status.BUNDLED):
        parts += [human_size(item.size), item.file_version or "no version"]
    if edge is not None:
        parts.append(f"({EDGE_LABELS[edge.kind]})")
    if item.note:
        parts.append(f"- {item.note}")
    return "  ".join(parts)


class TreeView:
    """Depth-first tree from each root; a DLL is expanded once and referenced afterwards."""

    def __init__(self, plan: Plan, show_system: bool = False) -> None:
        self.plan = plan
        self.statuses = set(Status) if show_system else set(TREE_STATUSES)
        self.expanded: set[str] = set()
        self.lines: list[str] = []

    def render(self) -> str:
        for root in self.plan.roots:
            item = self.plan.file(root)
            if item is None:
                continue
            root_edge = next(
                (e for e in self.plan.edges if e.child == root and e.parent is None), None
            )
            repeat = " (see above)" if root in self.expanded else ""
            self.lines.append(_label(item, root_edge) + repeat)
            self._children(root, "")
        return "\n".join(self.lines)

    def _children(self, key: str, indent: str) -> None:
        if key in self.expanded:
            return
        self.expanded.add(key)
        edges = [e for e in self.plan.children(key) if self._shown(e.child)]
        for number, edge in enumerate(edges):
            last = number == len(edges) - 1
            child = self.plan.file(edge.child)
            assert child is not None
            repeat = (
                " (see above)"
                if edge.child in self.expanded and self.plan.children(edge.child)
                else ""
            )
            self.lines.append(f"{indent}{'└─ ' if last else '├─ '}{_label(child, edge)}{repeat}")
            self._children(edge.child, indent + ("   " if last else "│  "))

    def _shown(self, key: str) -> bool:
        item = self.plan.file(key)
        return item is not None and item.status in self.statuses


def summary(plan: Plan) -> str:
    bundled = plan.with_status(Status.BUNDLED)
    total = sum(item.size or 0 for item in bundled)
    lines = [f"Profile {plan.profile} ({plan.architecture}, Windows >= {plan.min_windows})"]
    lines.append(f"Bundled: {len(bundled)} DLLs, {human_size(total)}")
    for item in sorted(bundled, key=lambda i: i.key):
        lines.append(f"  {item.name:<42} {human_size(item.size):>10}  {item.source}")
    lines.append(_names("System (part of Windows, not shipped)", plan, Status.SYSTEM))
    api_sets = plan.with_status(Status.API_SET)
    lines.append(f"API sets (resolved by Windows, not shipped): {len(api_sets)} names")
    lines.append(_names("Driver (required on the target, never shipped)", plan, Status.DRIVER))
    lines.append(_names("Missing", plan, Status.MISSING))
    lines += [f"Note: {finding.message}" for finding in plan.findings]
    return "\n".join(lines)


def _names(title: str, plan: Plan, status: Status) -> str:
    names = sorted(item.name for item in plan.with_status(status))
    return f"{title}: {', '.join(names) if names else 'none'}"


def why(plan: Plan, name: str) -> str:
    item = plan.file(name)
    assert item is not None
    chains = plan.chains_to(name)
    where = f" (from {item.source})" if item.source and item.status == Status.BUNDLED else ""
    lines = [f"{item.name} is {item.status.value}{where}; {len(chains)} chain(s) need it:"]
    for chain in chains:
        lines.append("  " + plan.chain_text(chain, item.key))
    rules = {edge.detail for chain in chains for edge in chain if edge.kind == EdgeKind.RUNTIME}
    lines += [f"  runtime rule: {detail}" for detail in sorted(d for d in rules if d)]
    return "\n".join(lines)


def profile_table(profiles: list[Profile]) -> str:
    width = max((len(p.name) for p in profiles), default=10)
    return "\n".join(f"{p.name:<{width}}  {p.architecture:<5}  {p.description}" for p in profiles)


def profile_json(profile: Profile) -> str:
    data = dataclasses.asdict(profile)
    data["path"] = str(profile.path)
    return json.dumps({"schema_version": 1, **data}, indent=2)


def profile_detail(profile: Profile) -> str:
    lines = [
        f"{profile.name}: {profile.description}",
        f"  file:         {profile.path}",
        f"  architecture: {profile.architecture}",
        f"  min Windows:  {'.'.join(str(p) for p in profile.min_windows)}",
        f"  VC runtime:   {profile.vc_runtime}",
        f"  roots:        {', '.join(profile.roots)}",
        f"  driver DLLs:  {', '.join(profile.driver_dlls) or 'none'}",
        "  runtime rules (LoadLibrary at run time):",
    ]
    for rule in profile.runtime_rules:
        lines.append(f"    {rule.trigger} -> {', '.join(rule.loads)}")
        lines.append(f"      why: {rule.why}")
    lines.append("  artifacts:")
    for artifact in profile.artifacts:
        kinds = ", ".join(source.kind for source in artifact.sources)
        lines.append(
            f"    {artifact.name} {artifact.version} [{kinds}]: {', '.join(artifact.provides)}"
        )
    return "\n".join(lines)


def acquired_table(acquired: Sequence[Acquired]) -> str:
    rows = [("artifact", "source", "size", "sha256", "state")]
    for item in acquired:
        state = "cached" if item.cached else "fresh"
        digest = item.sha256 or "-"
        rows.append(
            (f"{item.artifact} {item.version}", item.source, human_size(item.size), digest, state)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    for item in acquired:
        lines.append(f"{item.artifact}: from {item.origin}")
        lines += [f"  skipped {reason}" for reason in item.skipped]
    return "\n".join(line.rstrip() for line in lines)


def acquired_json(acquired: Sequence[Acquired]) -> str:
    def plain(item: Acquired) -> dict[str, object]:
        data = dataclasses.asdict(item)
        data["folder"] = str(item.folder)
        data["dll_folders"] = [str(folder) for folder in item.dll_folders]
        return data

    return json.dumps({"schema_version": 1, "artifacts": [plain(a) for a in acquired]}, indent=2)


def cache_table(root: Path, entries: Sequence[CacheEntry]) -> str:
    lines = [f"cache: {root}"]
    for entry in entries:
        names = ", ".join(entry.names) or "?"
        lines.append(f"  {entry.sha256[:16]}  {human_size(entry.size):>10}  {names}")
    total = sum(entry.size for entry in entries)
    lines.append(f"{len(entries)} archive(s), {human_size(total)}")
    return "\n".join(lines)


def build_report(result: BuildResult) -> str:
    c = result.counters
    verb = "Would deploy" if result.dry_run else "Deployed"
    lines = [
        f"{verb} {len(result.deployment.steps)} files for {result.plan.profile} into {result.out}"
    ]
    if result.dry_run:
        for step in result.deployment.steps:
            reason = f" ({step.reason})" if step.reason else ""
            lines.append(f"  {step.action:<7} {step.placement.name}{reason}")
        lines += [f"  remove  {name} (--clean)" for name in result.deployment.removals]
    else:
        lines.append(
            f"  copied {c.copied} ({human_size(c.bytes_written)}), linked {c.linked}, "
            f"unchanged {c.skipped}, removed {c.removed}; hashed {c.hashed} files"
        )
        lines.append(f"  lock file: {result.out / LOCK_NAME}")
    if result.deployment.stale:
        names = ", ".join(result.deployment.stale)
        lines.append(
            f"  no longer needed (an earlier build wrote them; --clean removes them): {names}"
        )
    drivers = result.lock.driver_requirements
    if drivers:
        lines.append(f"  required on the target, never shipped: {', '.join(drivers)} (GPU driver)")
    redist = result.plan.with_status(Status.REDIST)
    if redist:
        lines.append(f"  installed by vc_redist.x64.exe: {', '.join(i.name for i in redist)}")
    if result.iss is not None:
        lines += ["  " + line for line in iss_report(result.iss).splitlines()]
    if result.archive is not None:
        archive = result.archive
        lines.append(
            f"  archive: {archive.path} ({archive.members} files, "
            f"{human_size(archive.archive_size)}, sha256 {archive.sha256})"
        )
    return "\n".join(lines)


def iss_report(result: IssResult) -> str:
    spanning = ", split into slices (DiskSpanning)" if result.disk_spanning else ""
    lines = [f"Inno Setup script: {result.path} ({result.files} files{spanning})"]
    if result.app_version is None:
        lines.append(
            "  note: the app has no version resource and none was given (--app-version or "
            "[render] app_version in bundle.toml): the setup shows no version"
        )
    lines.append(f'  compile it with: iscc "{result.path}"')
    return "\n".join(lines)


def build_json(result: BuildResult) -> str:
    data = {
        "schema_version": 1,
        "out": str(result.out),
        "dry_run": result.dry_run,
        "counters": dataclasses.asdict(result.counters),
        "steps": [
            {"name": s.placement.name, "action": s.action, "reason": s.reason}
            for s in result.deployment.steps
        ],
        "removed_by_clean": list(result.deployment.removals),
        "stale": list(result.deployment.stale),
        "lock": json.loads(result.lock.to_json()),
        "iss": dataclasses.asdict(result.iss) if result.iss else None,
        "archive": dataclasses.asdict(result.archive) if result.archive else None,
        "plan": result.plan.to_dict(),
    }
    return json.dumps(data, indent=2, default=str)
