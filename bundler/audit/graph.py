"""Act layer, for `bundle audit --html`: the Plan's dependency graph, laid out for the page.

The page (render_html.py) writes the graph as inline SVG and does no arithmetic: this module
decides what is drawn and where. The Windows DLLs and API sets become one node (drawn one by
one they would bury the files that ship); a file loading another in several ways gets one edge,
the earliest load's; rows follow load order, each file below the files that load it
first, ordered to cross fewer edges; every box and curve is placed in pixels here, since node
text is monospace and its width known. The palette is here too, read by the graph, the legend
and the rest of the page, and so is the size text the nodes share with the page's size
breakdown. Pure and deterministic: the same Plan and findings give the same Graph (everything
sorted by key), no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bundler.findings import SEVERITY_ORDER, Finding, Severity, severity_rank
from bundler.plan import EDGE_LABELS, Edge, EdgeKind, Plan, PlanFile, Status

# --- what things look like: one palette, read by the graph, the legend, the page and the tests --

STATUS_FILL = {
    Status.APP: "#90caf9",
    Status.BUNDLED: "#a5d6a7",
    Status.MISSING: "#ef9a9a",
    Status.DRIVER: "#ce93d8",
    Status.REDIST: "#fff59d",
    Status.PRUNED: "#f5f5f5",
    Status.SYSTEM: "#e0e0e0",
    Status.API_SET: "#eeeeee",
}
STATUS_STROKE = {
    Status.APP: "#1565c0",
    Status.BUNDLED: "#2e7d32",
    Status.MISSING: "#c62828",
    Status.DRIVER: "#6a1b9a",
    Status.REDIST: "#f9a825",
    Status.PRUNED: "#bdbdbd",
    Status.SYSTEM: "#757575",
    Status.API_SET: "#9e9e9e",
}
STATUS_MEANING = {
    Status.APP: "the app",
    Status.BUNDLED: "in the folder, needed",
    Status.MISSING: "needed, missing",
    Status.DRIVER: "GPU driver: required on the target, never shipped",
    Status.REDIST: "installed by vc_redist.x64.exe",
    Status.PRUNED: "left out: the app's models never load it (--model)",
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
