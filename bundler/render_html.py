"""`bundle audit --html FILE`: the audit as one self-contained web page.

The page is for the people who never run the CLI: a release manager deciding whether a bundle
ships, a support engineer reading it on a customer's machine. So it is one file that needs
nothing else: the dependency graph is laid out here, in Python, and written as inline SVG; the
styles and the one small script are inline; and its Content-Security-Policy (`default-src
'none'`) forbids the browser to load anything at all, so a resource that slipped in would fail
visibly instead of phoning home. It reads only the AuditReport (the Plan, the findings from the
catalogue, the profile's artifacts): every fact it shows is one the other views show too.

The template (`templates/audit.html.j2`) turns on Jinja's autoescaping for itself, so every
value is HTML-escaped on its way in; the shared environment stays as the other renderers need
it. Output is deterministic: the same report gives the same bytes (no time stamps, everything
sorted by key).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bundler.audit import AuditReport
from bundler.errors import ExitCode
from bundler.findings import SEVERITY_ORDER, Finding, Severity, severity_rank
from bundler.plan import EDGE_LABELS, Edge, EdgeKind, Plan, PlanFile, Status
from bundler.profiles import Artifact, Profile, matches
from bundler.render import render, write_text

TEMPLATE = "audit.html.j2"

# --- what things look like: one palette, read by the graph, the legend and the tests ------------

STATUS_FILL = {
    Status.APP: "#90caf9",
    Status.BUNDLED: "#a5d6a7",
    Status.MISSING: "#ef9a9a",
    Status.DRIVER: "#ce93d8",
    Status.REDIST: "#fff59d",
    Status.SYSTEM: "#e0e0e0",
    Status.API_SET: "#eeeeee",
}
STATUS_STROKE = {
    Status.APP: "#1565c0",
    Status.BUNDLED: "#2e7d32",
    Status.MISSING: "#c62828",
    Status.DRIVER: "#6a1b9a",
    Status.REDIST: "#f9a825",
    Status.SYSTEM: "#757575",
    Status.API_SET: "#9e9e9e",
}
STATUS_MEANING = {
    Status.APP: "the app",
    Status.BUNDLED: "in the folder, needed",
    Status.MISSING: "needed, missing",
    Status.DRIVER: "GPU driver: required on the target, never shipped",
    Status.REDIST: "installed by vc_redist.x64.exe",
    Status.SYSTEM: "part of Windows (system DLLs and API sets, one node)",
    Status.API_SET: "API set, resolved by Windows",
}
SEVERITY_COLOUR = {Severity.ERROR: "#c62828", Severity.WARNING: "#ef6c00", Severity.INFO: "#1565c0"}


@dataclass(frozen=True)
class EdgeStyle:
    colour: str
    dash: str | None  # SVG stroke-dasharray; None draws a solid line
    meaning: str


EDGE_STYLE = {
    EdgeKind.IMPORT: EdgeStyle("#455a64", None, "import: mapped with its parent at start-up"),
    EdgeKind.DELAY_IMPORT: EdgeStyle("#78909c", "2 3", "delay import: mapped at first call"),
    EdgeKind.RUNTIME: EdgeStyle("#8e24aa", "6 4", "runtime (LoadLibrary): in no import table"),
}
MISSING_EDGE_COLOUR = STATUS_STROKE[Status.MISSING]
# The edge kind drawn when one parent reaches one child in several ways: the earliest load wins.
EDGE_PRECEDENCE = (EdgeKind.IMPORT, EdgeKind.DELAY_IMPORT, EdgeKind.RUNTIME)

# --- the graph's geometry (px). Node text is monospace, so its width is known here. ---------------

NAME_CHAR_WIDTH = 7.3  # 12 px monospace
NOTE_CHAR_WIDTH = 6.1  # 10 px monospace
NODE_PADDING = 20
NODE_MIN_WIDTH = 110
NODE_HEIGHT = 38
NODE_GAP = 18
ROW_GAP = 52
MAX_ROW_WIDTH = 1200  # a wider layer wraps onto another row
MARGIN = 24

# System DLLs and API sets are needed by almost every node; drawn one by one they would bury
# the ~22 files that ship. They become one node, its tooltip naming them.
WINDOWS_NODE = "windows"
COLLAPSED = (Status.SYSTEM, Status.API_SET)


# --- the page ----------------------------------------------------------------------------------


def audit_html(report: AuditReport) -> str:
    """The page text (UTF-8 when written)."""
    return render(
        TEMPLATE,
        heading=heading(report),
        verdict=verdict(report),
        graph=dependency_graph(report.plan, report.findings),
        legend=legend(report.plan),
        findings=finding_groups(report.findings, report.plan),
        suppressed=[
            finding_view(item, report.plan, f"suppressed-{number}")
            for number, item in enumerate(report.suppressed, 1)
        ],
        sizes=size_breakdown(report.plan, report.profile),
        load_proof=proof_rows(report.load_proof),
        script=HIGHLIGHT_SCRIPT,  # written as is (|safe): its hash is in the policy
        csp=content_security_policy(HIGHLIGHT_SCRIPT),
    )


def write_html(report: AuditReport, path: Path) -> None:
    """Written atomically (write_text raises OutputError naming the file): a CI artefact
    upload never picks up half a page."""
    write_text(path, audit_html(report))


# Clicking a finding marks the graph nodes of its files; so does opening the page at a
# finding's anchor (audit.html#finding-3), a link a reviewer can share. ES5, logs nothing.
HIGHLIGHT_SCRIPT = """
(function () {
  var nodes = document.querySelectorAll("g.node");
  function mark(item) {
    var keys = item.getAttribute("data-nodes").split("|");
    for (var i = 0; i < nodes.length; i++) {
      var on = keys.indexOf(nodes[i].getAttribute("data-key")) >= 0;
      nodes[i].classList.toggle("highlight", on);
    }
  }
  var items = document.querySelectorAll(".finding[data-nodes]");
  for (var i = 0; i < items.length; i++) {
    items[i].addEventListener("click", function (event) {
      mark(event.currentTarget);
    });
  }
  var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
  if (target && target.hasAttribute("data-nodes")) {
    mark(target);
  }
})();
"""


def content_security_policy(script: str) -> str:
    """Nothing may be loaded; the inline styles may apply, and only this script may run (by
    its hash, so an injected one would not)."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


# --- heading and verdict -------------------------------------------------------------------------


def heading(report: AuditReport) -> dict[str, str]:
    plan = report.plan
    return {
        "folder": str(report.folder),
        "profile": report.profile.name,
        "description": report.profile.description,
        "architecture": plan.architecture,
        "min_windows": plan.min_windows,
        "lock": f"verified against {report.lock.name}" if report.lock else "not verified",
        "files": str(report.files),
        "tool_version": report.tool_version,
    }


@dataclass(frozen=True)
class Verdict:
    word: str  # "fails", "passes with warnings", "passes"
    css: str
    exit_code: int
    meaning: str
    counts: tuple[tuple[str, str, str], ...]  # (severity, "2 errors", colour)


def verdict(report: AuditReport) -> Verdict:
    """What `bundle audit` exits with for this report and why: the table a CI gate reads."""
    counts = tuple(
        (severity.value, _count_text(report.count(severity), severity), SEVERITY_COLOUR[severity])
        for severity in SEVERITY_ORDER
    )
    code = report.exit_code()
    if code is ExitCode.AUDIT_ERRORS:
        meaning = "errors: the app or an execution provider fails on the customer's machine"
        return Verdict("fails", "fail", int(code), meaning, counts)
    if report.exit_code(strict=True) is ExitCode.AUDIT_WARNINGS:
        meaning = (
            f"warnings only: nothing fails to load, but --strict exits "
            f"{int(ExitCode.AUDIT_WARNINGS)}"
        )
        return Verdict("passes with warnings", "warn", int(code), meaning, counts)
    return Verdict("passes", "pass", int(code), "no errors or warnings", counts)


def _count_text(number: int, severity: Severity) -> str:
    plural = "s" if number != 1 and severity is not Severity.INFO else ""
    return f"{number} {severity.value}{plural}"


# --- the dependency graph ------------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    width: int
    height: int = NODE_HEIGHT

    @property
    def centre(self) -> int:
        return self.x + self.width // 2

    @property
    def bottom(self) -> int:
        return self.y + self.height


@dataclass(frozen=True)
class GraphNode:
    key: str
    name: str
    status: str
    note: str  # the second line: size, "missing", ...
    title: str  # the tooltip
    box: Box
    fill: str
    stroke: str
    findings: str  # codes of the findings naming the file, space separated
    severity: str  # the worst of them, "" if none
    mark_colour: str


@dataclass(frozen=True)
class GraphEdge:
    parent: str
    child: str
    kind: str
    path: str  # SVG path data
    colour: str
    dash: str | None
    marker: str
    back: bool  # to a file on the same row or above: drawn lighter


@dataclass(frozen=True)
class Graph:
    width: int
    height: int
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    markers: tuple[tuple[str, str], ...]  # (id, colour) of the arrow heads


def dependency_graph(plan: Plan, findings: Sequence[Finding]) -> Graph:
    """The Plan as a layered picture, read top-down in load order: each file below the files
    that load it first (see `depths`), the Windows DLLs as one node. No layering can point
    every edge down: cuDNN's libraries load each other both ways (graph loads cnn at run time,
    cnn imports graph). The edges that go up or sideways are drawn as lighter arcs."""
    items = [item for item in plan.files if item.status not in COLLAPSED]
    edges = graph_edges(plan, {item.key for item in items})
    widths = {item.key: node_width(item) for item in items} | {WINDOWS_NODE: windows_width()}
    rows = layout_rows(layer_order(plan, items, edges), widths)
    collapsed = plan.with_status(*COLLAPSED)
    if collapsed:
        rows.append([WINDOWS_NODE])
    boxes = place(rows, widths)
    marks = findings_by_node(findings, plan)
    nodes = [file_node(item, boxes[item.key], marks.get(item.key, []), plan) for item in items]
    if collapsed:
        nodes.append(windows_node(collapsed, boxes[WINDOWS_NODE], marks.get(WINDOWS_NODE, [])))
    drawn = tuple(graph_edge(edge, boxes, plan) for edge in edges)
    width = max((box.x + box.width for box in boxes.values()), default=0) + MARGIN
    height = max((box.bottom for box in boxes.values()), default=0) + MARGIN + ROW_GAP // 2
    markers = tuple(sorted({(edge.marker, edge.colour) for edge in drawn}))
    return Graph(width, height, tuple(nodes), drawn, markers)


def graph_edges(plan: Plan, keys: set[str]) -> list[Edge]:
    """One edge per (parent, child) pair between drawn files, the earliest load kind winning.
    Profile-root edges are left out: a root with no other parent simply starts at the top."""
    chosen: dict[tuple[str, str], Edge] = {}
    for edge in plan.edges:
        if edge.parent is None or edge.parent not in keys or edge.child not in keys:
            continue
        pair = (edge.parent, edge.child)
        old = chosen.get(pair)
        if old is None or EDGE_PRECEDENCE.index(edge.kind) < EDGE_PRECEDENCE.index(old.kind):
            chosen[pair] = edge
    return sorted(chosen.values(), key=lambda edge: (edge.parent or "", edge.child))


def load_depths(plan: Plan, items: Sequence[PlanFile], edges: Sequence[Edge]) -> dict[str, int]:
    """When each file is first loaded, counted in loads from the app (breadth first). Profile
    roots the app does not reach (a C# or Python host imports no ORT DLL) start one row below
    it; a file reached from nothing at all goes last."""
    children: dict[str, list[str]] = {}
    for edge in edges:
        children.setdefault(edge.parent or "", []).append(edge.child)
    apps = [item.key for item in items if item.status is Status.APP]
    found = _breadth_first({key: 0 for key in apps}, children)
    unreached_roots = [key for key in plan.roots if key not in found and plan.file(key)]
    found = _breadth_first({**found, **{k: 1 if apps else 0 for k in unreached_roots}}, children)
    last = max(found.values(), default=-1) + 1
    return {item.key: found.get(item.key, last) for item in items}


def _breadth_first(start: dict[str, int], children: dict[str, list[str]]) -> dict[str, int]:
    found = dict(start)
    queue = sorted(start, key=lambda key: (start[key], key))
    while queue:
        key = queue.pop(0)
        for child in children.get(key, []):
            if child not in found:
                found[child] = found[key] + 1
                queue.append(child)
    return found


def downward_edges(first: dict[str, int], edges: Sequence[Edge]) -> list[Edge]:
    """The edges the layering puts downward: not those to a file loaded earlier (the engines'
    import of cudnn_graph, which loaded them), and, of the rest, imports before delay imports
    before runtime loads, each kept only if it closes no cycle (cudnn_graph loads cnn, which
    imports it: the import wins)."""
    candidates = [edge for edge in edges if first[edge.child] >= first[edge.parent or ""]]
    candidates.sort(key=lambda e: (EDGE_PRECEDENCE.index(e.kind), e.parent or "", e.child))
    children: dict[str, set[str]] = {}
    kept = []
    for edge in candidates:
        parent = edge.parent or ""
        if not _reaches(edge.child, parent, children):
            children.setdefault(parent, set()).add(edge.child)
            kept.append(edge)
    return kept


def _reaches(start: str, goal: str, children: dict[str, set[str]]) -> bool:
    seen, stack = {start}, [start]
    while stack:
        key = stack.pop()
        if key == goal:
            return True
        fresh = children.get(key, set()) - seen
        seen |= fresh
        stack.extend(fresh)
    return False


def depths(plan: Plan, items: Sequence[PlanFile], edges: Sequence[Edge]) -> dict[str, int]:
    """Longest-path layering over the downward edges, never above the first load: each file
    sits below every file that loads it first, so all those edges point down."""
    first = load_depths(plan, items, edges)
    incoming: dict[str, list[str]] = {}
    for edge in downward_edges(first, edges):
        incoming.setdefault(edge.child, []).append(edge.parent or "")
    depth: dict[str, int] = {}

    def settle(key: str) -> int:  # the downward edges are acyclic, so this recursion ends
        if key not in depth:
            above = [settle(parent) + 1 for parent in incoming.get(key, [])]
            depth[key] = max([first[key], *above])
        return depth[key]

    for item in items:
        settle(item.key)
    return depth


def layer_order(plan: Plan, items: Sequence[PlanFile], edges: Sequence[Edge]) -> list[list[str]]:
    """The files of each depth, left to right: the top row in the Plan's root order, each
    later one by the mean position of its parents above (fewer crossings), then by name."""
    depth = depths(plan, items, edges)
    parents: dict[str, list[str]] = {}
    for edge in edges:
        parents.setdefault(edge.child, []).append(edge.parent or "")
    position: dict[str, float] = {}
    layers: list[list[str]] = []
    rank = {key: number for number, key in enumerate(plan.roots)}
    for level in range(max(depth.values(), default=-1) + 1):
        keys = [key for key, value in depth.items() if value == level]
        keys.sort(key=lambda key: (_barycentre(key, parents, position, rank), key))
        position.update({key: (index + 0.5) / len(keys) for index, key in enumerate(keys)})
        layers.append(keys)
    return layers


def _barycentre(
    key: str, parents: dict[str, list[str]], position: dict[str, float], rank: dict[str, int]
) -> float:
    above = [position[parent] for parent in parents.get(key, []) if parent in position]
    if above:
        return sum(above) / len(above)
    return rank.get(key, len(rank)) / max(1, len(rank))


def layout_rows(layers: list[list[str]], widths: dict[str, int]) -> list[list[str]]:
    """Each layer as one row, or several when it is wider than MAX_ROW_WIDTH."""
    rows: list[list[str]] = []
    for layer in layers:
        row: list[str] = []
        used = 0
        for key in layer:
            if row and used + widths[key] > MAX_ROW_WIDTH:
                rows.append(row)
                row, used = [], 0
            row.append(key)
            used += widths[key] + NODE_GAP
        rows.append(row)
    return rows


def place(rows: list[list[str]], widths: dict[str, int]) -> dict[str, Box]:
    """Boxes for every key, each row centred on the widest one."""
    spans = [sum(widths[key] for key in row) + NODE_GAP * (len(row) - 1) for row in rows]
    widest = max(spans, default=0)
    boxes: dict[str, Box] = {}
    for number, (row, span) in enumerate(zip(rows, spans, strict=True)):
        x = MARGIN + (widest - span) // 2
        y = MARGIN + number * (NODE_HEIGHT + ROW_GAP)
        for key in row:
            boxes[key] = Box(x, y, widths[key])
            x += widths[key] + NODE_GAP
    return boxes


def node_width(item: PlanFile) -> int:
    return _text_width(item.name, node_note(item))


def windows_width() -> int:
    return _text_width("Windows", "999 DLLs, not shipped")


def _text_width(name: str, note: str) -> int:
    text = max(len(name) * NAME_CHAR_WIDTH, len(note) * NOTE_CHAR_WIDTH)
    return max(NODE_MIN_WIDTH, round(text) + NODE_PADDING)


def node_note(item: PlanFile) -> str:
    if item.status in (Status.APP, Status.BUNDLED):
        return size_text(item.size)
    return {
        Status.MISSING: "MISSING",
        Status.DRIVER: "GPU driver, not shipped",
        Status.REDIST: "from vc_redist.x64.exe",
    }.get(item.status, item.status.value)


def findings_by_node(findings: Sequence[Finding], plan: Plan) -> dict[str, list[Finding]]:
    """The findings naming each node's file; a Windows DLL's count for the Windows node.
    Files the Plan does not hold (a stray DLL) have no node: the findings list shows them."""
    marks: dict[str, list[Finding]] = {}
    for item in findings:
        for key in sorted(node_keys(item.files, plan)):
            marks.setdefault(key, []).append(item)
    return marks


def node_keys(files: Iterable[str], plan: Plan) -> set[str]:
    keys = set()
    for name in files:
        item = plan.file(name)
        if item is not None:
            keys.add(WINDOWS_NODE if item.status in COLLAPSED else item.key)
    return keys


def file_node(item: PlanFile, box: Box, marks: Sequence[Finding], plan: Plan) -> GraphNode:
    lines = [item.name, f"status: {item.status.value} ({STATUS_MEANING[item.status]})"]
    if item.size is not None:
        lines.append(f"size: {item.size:,} bytes ({size_text(item.size)})")
    lines.append(f"version: {item.file_version or 'none'}")
    if item.note:
        lines.append(f"note: {item.note}")
    windows = [e for e in plan.children(item.key) if _collapsed(plan, e.child)]
    if windows:
        lines.append(f"uses {len(windows)} Windows DLLs (system, API sets)")
    return _node(item.key, item.name, item.status, node_note(item), lines, box, marks)


def _collapsed(plan: Plan, key: str) -> bool:
    item = plan.file(key)
    return item is not None and item.status in COLLAPSED


def windows_node(collapsed: Sequence[PlanFile], box: Box, marks: Sequence[Finding]) -> GraphNode:
    system = sorted((i.name for i in collapsed if i.status is Status.SYSTEM), key=str.lower)
    api_sets = sorted((i.name for i in collapsed if i.status is Status.API_SET), key=str.lower)
    lines = [
        f"Windows provides {len(collapsed)} DLLs, none shipped",
        f"system ({len(system)}): {', '.join(system) or 'none'}",
        f"API sets ({len(api_sets)}): {', '.join(api_sets) or 'none'}",
    ]
    note = f"{len(collapsed)} DLLs, not shipped"
    return _node(WINDOWS_NODE, "Windows", Status.SYSTEM, note, lines, box, marks)


def _node(
    key: str,
    name: str,
    status: Status,
    note: str,
    lines: list[str],
    box: Box,
    marks: Sequence[Finding],
) -> GraphNode:
    worst = min((item.severity for item in marks), key=severity_rank, default=None)
    if marks:
        lines.append("findings: " + ", ".join(f"{m.code} ({m.severity.value})" for m in marks))
    return GraphNode(
        key=key,
        name=name,
        status=status.value,
        note=note,
        title="\n".join(lines),
        box=box,
        fill=STATUS_FILL[status],
        stroke=SEVERITY_COLOUR[worst] if worst else STATUS_STROKE[status],
        findings=" ".join(dict.fromkeys(item.code for item in marks)),
        severity=worst.value if worst else "",
        mark_colour=SEVERITY_COLOUR[worst] if worst else "",
    )


def graph_edge(edge: Edge, boxes: dict[str, Box], plan: Plan) -> GraphEdge:
    style = EDGE_STYLE[edge.kind]
    child = plan.file(edge.child)
    missing = child is not None and child.status is Status.MISSING
    colour = MISSING_EDGE_COLOUR if missing else style.colour
    marker = "arrow-missing" if missing else f"arrow-{edge.kind.value}"
    parent, child_box = boxes[edge.parent or ""], boxes[edge.child]
    path = edge_path(parent, child_box)
    back = child_box.y <= parent.y
    return GraphEdge(
        edge.parent or "", edge.child, edge.kind.value, path, colour, style.dash, marker, back
    )


def edge_path(parent: Box, child: Box) -> str:
    """A cubic curve: down from the parent's bottom to the child's top; to a child on the
    same row or above, an arc ending at its bottom."""
    if child.y > parent.y:
        start, end = (parent.centre, parent.bottom), (child.centre, child.y)
        bend = (end[1] - start[1]) // 2
        c1, c2 = (start[0], start[1] + bend), (end[0], end[1] - bend)
    elif child.y == parent.y:
        start, end = (parent.centre, parent.bottom), (child.centre, child.bottom)
        c1, c2 = (start[0], start[1] + ROW_GAP // 2), (end[0], end[1] + ROW_GAP // 2)
    else:
        start, end = (parent.centre, parent.y), (child.centre, child.bottom)
        bend = (start[1] - end[1]) // 2
        c1, c2 = (start[0], start[1] - bend), (end[0], end[1] + bend)
    points = " ".join(f"{x},{y}" for x, y in (c1, c2, end))
    return f"M{start[0]},{start[1]} C{points}"


@dataclass(frozen=True)
class LegendEntry:
    label: str
    meaning: str
    fill: str
    stroke: str


def legend(plan: Plan) -> dict[str, Any]:
    """Node colours (those of statuses this Plan holds, API sets counted with Windows), line
    styles and the finding mark."""
    present = {Status.SYSTEM if i.status in COLLAPSED else i.status for i in plan.files}
    statuses = [status for status in Status if status in present]
    return {
        "statuses": [
            LegendEntry(s.value, STATUS_MEANING[s], STATUS_FILL[s], STATUS_STROKE[s])
            for s in statuses
        ],
        "edges": [
            (EDGE_LABELS[kind], style.meaning, style.colour, style.dash)
            for kind, style in EDGE_STYLE.items()
        ],
        "severities": [(s.value, SEVERITY_COLOUR[s]) for s in SEVERITY_ORDER],
        "missing_edge": MISSING_EDGE_COLOUR,
    }


# --- findings ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FindingView:
    code: str
    name: str
    title: str
    severity: str
    colour: str
    message: str
    files: tuple[str, ...]
    fix: str
    details: tuple[str, ...]
    nodes: str  # graph node keys, "|"-separated (no Windows file name holds "|")
    anchor: str  # the element id: "finding-3", "suppressed-1"


def finding_view(item: Finding, plan: Plan, anchor: str) -> FindingView:
    check = item.check
    return FindingView(
        anchor=anchor,
        code=item.code,
        name=check.name,
        title=check.title,
        severity=item.severity.value,
        colour=SEVERITY_COLOUR[item.severity],
        message=item.message,
        files=item.files,
        fix=item.fix,
        details=item.details,
        nodes="|".join(sorted(node_keys(item.files, plan))),
    )


def finding_groups(findings: Sequence[Finding], plan: Plan) -> list[tuple[str, list[FindingView]]]:
    """(severity, its findings) in severity order, empty severities left out; anchors number
    the findings in the report's order (errors first), so a link stays valid for one audit."""
    views = [finding_view(item, plan, f"finding-{n}") for n, item in enumerate(findings, 1)]
    groups = []
    for severity in SEVERITY_ORDER:
        found = [view for view in views if view.severity == severity.value]
        if found:
            groups.append((severity.value, found))
    return groups


# --- the size breakdown --------------------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """A part of the bundle a reader budgets for. `files`: DLL name patterns of the vendor's
    naming convention (FIELD_NOTES §2-4); `artifacts`: profile artifact name patterns."""

    label: str
    colour: str
    files: tuple[str, ...]
    artifacts: tuple[str, ...]


COMPONENTS = (
    Component("ONNX Runtime", "#1e88e5", ("onnxruntime*.dll",), ("onnxruntime*",)),
    Component(
        "CUDA",
        "#43a047",
        ("cudart*.dll", "cublas*.dll", "cufft*.dll", "curand*.dll", "cusparse*.dll", "nvrtc*.dll"),
        ("cuda*", "cublas*", "cufft*", "curand*", "cusparse*", "nvrtc*"),
    ),
    Component("cuDNN", "#7cb342", ("cudnn*.dll",), ("cudnn*",)),
    Component(
        "VC++ runtime",
        "#8e24aa",
        ("msvcp140*.dll", "vcruntime140*.dll", "concrt140.dll", "vcomp140.dll"),
        ("msvc*", "vc*"),
    ),
    Component("DirectML", "#f4511e", ("directml*.dll",), ("directml*",)),
)
APP = Component("App", STATUS_STROKE[Status.APP], (), ())
OTHER = Component("Other", "#757575", (), ())
BAR_WIDTH = 560


@dataclass(frozen=True)
class ComponentSize:
    label: str
    colour: str
    size: int
    size_text: str
    share: str  # "61.3 %"
    bar: int  # px, relative to the largest component
    files: tuple[tuple[str, str], ...]  # (name, size text), largest first
    artifacts: str  # "cudnn 9.1.0.70", the profile artifacts that provide them


@dataclass(frozen=True)
class SizeBreakdown:
    components: tuple[ComponentSize, ...]
    total: int
    total_text: str
    files: int
    bar_width: int = BAR_WIDTH


def size_breakdown(plan: Plan, profile: Profile) -> SizeBreakdown:
    """Bytes the folder ships (the app and the bundled DLLs), by component."""
    shipped = plan.with_status(Status.APP, Status.BUNDLED)
    groups: dict[str, list[PlanFile]] = {}
    for item in shipped:
        groups.setdefault(component_of(item, profile).label, []).append(item)
    total = sum(item.size or 0 for item in shipped)
    order = [*COMPONENTS, APP, OTHER]
    sizes = {label: sum(item.size or 0 for item in files) for label, files in groups.items()}
    largest = max(sizes.values(), default=0)
    rows = tuple(
        _component_size(part, groups[part.label], total, largest, profile)
        for part in order
        if part.label in groups
    )
    return SizeBreakdown(rows, total, size_text(total), len(shipped))


def component_of(item: PlanFile, profile: Profile) -> Component:
    """The app; else the vendor family its name says (one artifact may carry another vendor's
    DLL: the DirectML wheel of ORT carries DirectML.dll); else the family of the profile
    artifact that provides it (a DLL whose name does not tell); else Other."""
    if item.status is Status.APP:
        return APP
    for part in COMPONENTS:
        if any(matches(pattern, item.name) for pattern in part.files):
            return part
    for artifact in artifacts_providing(item.name, profile):
        for part in COMPONENTS:
            if any(matches(pattern, artifact.name) for pattern in part.artifacts):
                return part
    return OTHER


def artifacts_providing(name: str, profile: Profile) -> list[Artifact]:
    return [a for a in profile.artifacts if any(matches(p, name) for p in a.provides)]


def _component_size(
    part: Component, files: list[PlanFile], total: int, largest: int, profile: Profile
) -> ComponentSize:
    size = sum(item.size or 0 for item in files)
    ordered = sorted(files, key=lambda item: (-(item.size or 0), item.key))
    artifacts = {
        f"{artifact.name} {artifact.version}": None
        for item in ordered
        for artifact in artifacts_providing(item.name, profile)
    }
    return ComponentSize(
        label=part.label,
        colour=part.colour,
        size=size,
        size_text=size_text(size),
        share=share_text(size, total),
        bar=max(1, round(BAR_WIDTH * size / largest)) if largest else 0,
        files=tuple((item.name, size_text(item.size)) for item in ordered),
        artifacts=", ".join(sorted(artifacts)),
    )


def share_text(size: int, total: int) -> str:
    if not total:
        return "-"
    share = 100 * size / total
    return "< 0.1 %" if 0 < share < 0.05 else f"{share:.1f} %"


def size_text(size: int | None) -> str:
    """Decimal units, as Explorer's neighbours (pip, the CUDA redist manifests) count."""
    if size is None:
        return "size unknown"
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.2f} GB"


# --- the load proof (bundle audit --run) ---------------------------------------------------------


class LoadProofLike(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


def proof_rows(proof: LoadProofLike | None) -> list[tuple[str, str, bool]]:
    """(key, text, is_block) for each entry of what the real loader said: scalars as text,
    lists and tables as indented JSON. Generic, so the page follows the proof's format."""
    if proof is None:
        return []
    rows = []
    for key, value in proof.to_dict().items():
        if isinstance(value, dict | list | tuple):
            rows.append((str(key), json.dumps(value, indent=2, default=str), True))
        else:
            rows.append((str(key), "-" if value is None else str(value), False))
    return rows
