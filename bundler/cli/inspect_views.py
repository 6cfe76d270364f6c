"""Talk layer: the views of `bundle deps` and `bundle scan`: a Plan's dependency tree, its
summary and why a DLL is in it; the DLLs a binary may load at run time. Pure: they return
strings; the CLI prints.

The dependency tree shows what ships (bundled), what must exist on the target (driver) and what
is missing; system DLLs and API sets would repeat under every node, so they are summarised once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bundler.cli.sizes import human_size
from bundler.closure.plan import EDGE_LABELS, Edge, EdgeKind, Plan, PlanFile, Status

if TYPE_CHECKING:  # type hints only: importing views must not import every command's modules
    from bundler.rules.scan import ScanResult

TREE_STATUSES = (Status.APP, Status.BUNDLED, Status.DRIVER, Status.MISSING)


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
