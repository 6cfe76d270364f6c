"""Decide layer, for `bundle audit --html`: the dependency graph's rows, in load order. A file
loading another in several ways is one edge, the earliest load's; each file sits below the
files that load it first; each row is ordered by its parents' positions above, to cross fewer
edges. Pure and deterministic: the same Plan gives the same rows (everything sorted by key).
"""

from __future__ import annotations

from collections.abc import Sequence

from bundler.closure.plan import Edge, EdgeKind, Plan, PlanFile, Status

# The edge kind drawn when one parent reaches one child in several ways: the earliest load wins.
EDGE_PRECEDENCE = (EdgeKind.IMPORT, EdgeKind.DELAY_IMPORT, EdgeKind.RUNTIME)


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
