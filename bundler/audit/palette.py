"""Decide layer, for `bundle audit --html`: the page's palette, one meaning per colour.

A fill, a stroke and a meaning per file status, a colour per finding severity, a colour, a dash
and a meaning per load kind: read by the graph, the legend, the rest of the page and the tests,
so that a colour means one thing everywhere. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass

from bundler.closure.plan import EdgeKind, Status
from bundler.findings import Severity

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
