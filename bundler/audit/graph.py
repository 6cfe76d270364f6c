"""Act layer, for `bundle audit --html`: the Plan's dependency graph, laid out for the page.

The page (bundler.audit.html) writes the graph as inline SVG and does no arithmetic: this module
decides what is drawn and where. The Windows DLLs and API sets become one node (drawn one by
one they would bury the files that ship); the rows follow load order (bundler.audit.loadorder);
every box and curve is placed in pixels here, since node text is monospace and its width known.
The colours are the palette's (bundler.audit.palette); the legend is here, and so is the size
text the nodes share with the page's size breakdown. Pure and deterministic: the same Plan and
findings give the same Graph (everything sorted by key), no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bundler.audit.loadorder import graph_edges, layer_order
from bundler.audit.palette import (
    EDGE_STYLE,
    MISSING_EDGE_COLOUR,
    SEVERITY_COLOUR,
    STATUS_FILL,
    STATUS_MEANING,
    STATUS_STROKE,
)
from bundler.closure.plan import EDGE_LABELS, Edge, Plan, PlanFile, Status
from bundler.findings import SEVERITY_ORDER, Finding, severity_rank

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
        Status.PRUNED: "pruned for the models",
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


# --- sizes as text: the nodes' notes, and the page's size breakdown -----------------------------


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
