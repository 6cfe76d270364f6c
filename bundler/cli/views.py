"""Talk layer: text views of a Plan and of what the commands wrote, for people, and their JSON.
Pure: they return strings; the CLI prints. The profiles' views are in bundler.cli.profile_views.

The dependency tree shows what ships (bundled), what must exist on the target (driver) and what
is missing; system DLLs and API sets would repeat under every node, so they are summarised once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.lock import LOCK_NAME
from bundler.plan import EDGE_LABELS, Edge, EdgeKind, Plan, PlanFile, Status
from bundler.render.postbuild import PLACEHOLDER

if TYPE_CHECKING:  # type hints only: importing views must not import every command's modules
    from bundler.acquire.acquired import Acquired
    from bundler.acquire.cache import CacheEntry
    from bundler.prune import Pruning
    from bundler.render.iss import IssResult
    from bundler.render.postbuild import PostbuildResult
    from bundler.rules.scan import ScanResult
    from bundler.ship.msbuild import MsbuildResult
    from bundler.ship.output_folder import Counters
    from bundler.ship.pipeline import BuildResult

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
    if item.managed:
        parts.append("managed (.NET)")
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


def cache_json(root: Path, entries: Sequence[CacheEntry]) -> str:
    """`bundle cache list --json`: the verified archives, as cache_table lists them."""
    archives = [
        {
            "sha256": entry.sha256,
            "path": str(entry.path),
            "size": entry.size,
            "names": list(entry.names),
            "origins": list(entry.origins),
            "added": entry.added,
        }
        for entry in entries
    ]
    total = sum(entry.size for entry in entries)
    document = {"schema_version": 1, "cache": str(root), "archives": archives, "size": total}
    return json.dumps(document, indent=2)


def cache_clean_json(root: Path, freed: int) -> str:
    return json.dumps({"schema_version": 1, "cache": str(root), "freed_bytes": freed}, indent=2)


def counters_lines(c: Counters) -> list[str]:
    """What a deployment did: bytes copied, files cloned (no bytes written) or hard-linked,
    and --link's fall-back to copies, which the user asked not to get."""
    cloned = f", cloned {c.cloned} (blocks shared, no bytes written)" if c.cloned else ""
    lines = [
        f"  copied {c.copied} ({human_size(c.bytes_written)}){cloned}, linked {c.linked}, "
        f"unchanged {c.skipped}, removed {c.removed}; hashed {c.hashed} files"
    ]
    if c.link_fallbacks:
        lines.append(
            f"  --link: {c.link_fallbacks} files copied instead of linked: the cache is on "
            "another volume than the output folder (or its filesystem has no hard links)"
        )
    return lines


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
        lines += counters_lines(c)
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
    if result.pruning is not None:
        lines += pruning_lines(result.pruning, result.dry_run)
    if result.iss is not None:
        lines += ["  " + line for line in iss_report(result.iss).splitlines()]
    if result.postbuild is not None:
        lines += ["  " + line for line in postbuild_report(result.postbuild).splitlines()]
    if result.archive is not None:
        archive = result.archive
        lines.append(
            f"  archive: {archive.path} ({archive.members} files, "
            f"{human_size(archive.archive_size)}, sha256 {archive.sha256})"
        )
    return "\n".join(lines)


def msbuild_report(result: MsbuildResult) -> str:
    """What the folder holds, what this run did, and how a project uses it."""
    files, c = result.lock.files, result.counters
    dlls = sum(1 for item in files if item.kind == "bundled")
    headers = sum(1 for item in files if item.kind == "sdk" and item.name.startswith("include/"))
    libraries = [item.name for item in files if item.kind == "sdk" and item.name.startswith("lib/")]
    props, targets = (path.name for path in result.files.paths)
    lines = [
        f"Laid out {result.out} for {result.plan.profile}: {dlls} DLLs in bin/, {headers} "
        f"headers in include/, {', '.join(libraries)}",
        *counters_lines(c),
        f"  lock file: {result.out / LOCK_NAME}",
        f"  MSBuild: {props}, {targets} ({len(result.files.changed)} written, "
        f"{len(result.files.paths) - len(result.files.changed)} unchanged)",
        f"  in a .vcxproj: import {props} near the top and {targets} near the end",
        f"  or a post-build event: {result.postbuild.event.name} calls "
        f"{result.postbuild.script.name} ({result.postbuild.dlls} DLLs)",
    ]
    drivers = result.lock.driver_requirements
    if drivers:
        lines.append(f"  required on the target, never shipped: {', '.join(drivers)} (GPU driver)")
    return "\n".join(lines)


def msbuild_json(result: MsbuildResult) -> str:
    """`bundle msbuild --json`: what msbuild_report says, and the lock file in full."""
    data = {
        "schema_version": 1,
        "out": str(result.out),
        "profile": result.plan.profile,
        "counters": dataclasses.asdict(result.counters),
        "removed": list(result.removed),
        "lock_file": str(result.out / LOCK_NAME),
        "msbuild_files": [str(path) for path in result.files.paths],
        "changed": [str(path) for path in result.files.changed],
        "postbuild": _paths(dataclasses.asdict(result.postbuild)),
        "driver_requirements": list(result.lock.driver_requirements),
        "lock": json.loads(result.lock.to_json()),
    }
    return json.dumps(data, indent=2)


def iss_json(result: IssResult) -> str:
    """`bundle render iss --json`: the script written, and how to compile it."""
    data = {"schema_version": 1, **_paths(dataclasses.asdict(result))}
    return json.dumps(data | {"compile": f'iscc "{result.path}"'}, indent=2)


def postbuild_json(result: PostbuildResult) -> str:
    """`bundle render postbuild --json`: both files written, and what the event still needs."""
    data = {"schema_version": 1, **_paths(dataclasses.asdict(result))}
    placeholder = None if result.project_relative else PLACEHOLDER
    return json.dumps(data | {"placeholder": placeholder}, indent=2)


def _paths(data: dict[str, object]) -> dict[str, object]:
    """A result's fields with its paths as the strings the text view prints."""
    return {key: str(value) if isinstance(value, Path) else value for key, value in data.items()}


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


def postbuild_report(result: PostbuildResult) -> str:
    """Where the post-build step is, how to run it, and what the event still needs."""
    lines = [
        f"post-build step: {result.script} ({result.dlls} DLLs; {result.licenses} licence "
        "files with /LICENSES)",
        f'  run it as: "{result.script}" TARGET_DIR [/LICENSES]',
        f"  MSBuild post-build event: {result.event}",
    ]
    if not result.project_relative:
        lines += [
            f"  note: replace {PLACEHOLDER} in the event with this folder's path relative to "
            "your project,",
            "    or give bundle the project's folder ([render] project_dir, or bundle render "
            "postbuild --project-dir)",
        ]
    return "\n".join(lines)


def pruning_lines(pruning: Pruning, dry_run: bool) -> list[str]:
    """--model: what was left out and the size saved, or why nothing was."""
    models = ", ".join(model.path.name for model in pruning.models)
    if not pruning.pruned:
        return [f"  models {models}: nothing pruned ({pruning.reason})"]
    verb = "would leave out" if dry_run else "left out"
    names = ", ".join(item.name for item in pruning.pruned)
    lines = [f"  models {models}: {verb} {names}, saving {human_size(pruning.saved)}"]
    if pruning.kept:
        lines.append(f"  kept, their ops load them: {', '.join(pruning.kept)}")
    if pruning.evidence is not None:
        lines.append(f"  evidence: {pruning.evidence} (docs/pruning.md)")
    return lines


def pruning_json(pruning: Pruning | None) -> dict[str, object] | None:
    if pruning is None:
        return None
    return {
        "models": [
            {"name": m.path.name, "sha256": m.sha256, "ops": sorted(m.ops)} for m in pruning.models
        ],
        "evidence": pruning.evidence,
        "pruned": [dataclasses.asdict(item) for item in pruning.pruned],
        "kept": list(pruning.kept),
        "unknown_ops": list(pruning.unknown_ops),
        "saved_bytes": pruning.saved,
        "reason": pruning.reason or None,
    }


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
        "postbuild": dataclasses.asdict(result.postbuild) if result.postbuild else None,
        "settings": result.settings,
        "pruning": pruning_json(result.pruning),
        "plan": result.plan.to_dict(),
    }
    return json.dumps(data, indent=2, default=str)


# --- bundle scan -------------------------------------------------------------------------------


def scan_table(results: Sequence[ScanResult]) -> str:
    """Per DLL: the runtime loads first (what a profile rule must cover), then the names kept
    apart, each with its confidence and first evidence."""
    lines: list[str] = []
    for result in results:
        loaders = ", ".join(result.loader_imports) or "none (no LoadLibrary import)"
        lines += [f"{result.path.name}", f"  loader imports: {loaders}"]
        for candidate in result.candidates:
            first = candidate.evidence[0]
            via = f" via {candidate.pattern!r}" if candidate.pattern else ""
            more = f" (+{len(candidate.evidence) - 1})" if len(candidate.evidence) > 1 else ""
            lines.append(
                f"  {candidate.kind.value:<8} {candidate.name:<40} {candidate.confidence.value:<6}"
                f" {first.encoding} @{first.offset:#x}{more}{via}"
            )
        lines += [f"  pattern  {item.text!r} matches no DLL" for item in result.unmatched_patterns]
        lines.append("")
    return "\n".join(lines).rstrip()


def scan_json(results: Sequence[ScanResult]) -> str:
    return json.dumps({"schema_version": 1, "files": [r.to_dict() for r in results]}, indent=2)
