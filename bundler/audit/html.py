"""Act layer: `bundle audit --html FILE`: the audit as one self-contained web page.

The page is for the people who never run the CLI: a release manager deciding whether a bundle
ships, a support engineer reading it on a customer's machine. So it is one file that needs
nothing else: the dependency graph is laid out in Python (render_graph.py) and written as inline
SVG; the styles and the one small script are inline; and its Content-Security-Policy
(`default-src 'none'`) forbids the browser to load anything at all, so a resource that slipped
in would fail visibly instead of phoning home. It reads only the AuditReport (the Plan, the
findings from the catalogue, the profile's artifacts): every fact it shows is one the other
views show too.

The template (`templates/audit.html.j2`) turns on Jinja's autoescaping for itself, so every
value is HTML-escaped on its way in; the shared environment stays as the other renderers need
it. Output is deterministic: the same report gives the same bytes (no time stamps, everything
sorted by key).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bundler.audit.graph import dependency_graph, legend, node_keys, size_text
from bundler.audit.palette import SEVERITY_COLOUR, STATUS_STROKE
from bundler.audit.report import AuditReport
from bundler.closure.plan import Plan, PlanFile, Status
from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.errors import ExitCode
from bundler.findings import SEVERITY_ORDER, Finding, Severity
from bundler.render.engine import Templates, write_text
from bundler.target.profiles import Artifact, Profile, matches

TEMPLATE = "audit.html.j2"


# --- the page ----------------------------------------------------------------------------------


def audit_html(templates: Templates, report: AuditReport) -> str:
    """The page text (UTF-8 when written)."""
    return templates.render(
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


def write_html(templates: Templates, report: AuditReport, path: Path) -> None:
    """Written atomically (write_text raises OutputError naming the file): a CI artefact
    upload never picks up half a page."""
    write_text(path, audit_html(templates, report))


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
        "origin": report.choice.detail if report.choice else "",
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


# --- findings ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FindingView:
    """One finding as the HTML report shows it."""

    code: str
    name: str
    title: str
    severity: str
    colour: str
    message: str
    fix: str
    files: tuple[str, ...]
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
    """A part of the bundle a reader budgets for. `files`: DLL name patterns of the vendor's naming
    convention (docs/field-notes.md#import-graph to #vc-runtime); `artifacts`: profile artifact name
    patterns."""

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
        tuple(sorted(VC_RUNTIME_DLLS)),
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
