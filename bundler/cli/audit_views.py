"""Talk layer: the audit's text and JSON views (the findings table, the restore list, the
--explain verdict). Pure: they return strings; the CLI prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler.cli.dry_run_views import settings_part
from bundler.cli.sizes import human_size
from bundler.closure.plan import Status
from bundler.findings import SEVERITY_ORDER, Finding, Severity

if TYPE_CHECKING:  # type hints only: importing views must not import every command's modules
    from bundler.audit.explain import Explanation
    from bundler.audit.report import AuditReport
    from bundler.config.options import Options


AUDIT_DETAIL_LINES = 5


def audit_table(report: AuditReport) -> str:
    """Findings grouped by severity, errors first, each with its code, message, the first
    detail lines (--json has them all) and its fix; then the verdict."""
    lines = _audit_heading(report)
    for severity in SEVERITY_ORDER:
        found = [item for item in report.findings if item.severity is severity]
        if found:
            lines += ["", f"{severity.value.upper()} ({len(found)})"]
            for item in found:
                lines += _finding_lines(item)
    if report.suppressed:
        lines += ["", f"SUPPRESSED by --ignore ({len(report.suppressed)}, not counted)"]
        lines += [f"  {item.code}  {item.message}" for item in report.suppressed]
    if report.load_proof is not None:
        lines += ["", *report.load_proof.summary_lines()]
    lines += _gpu_lines(report.gpu)
    lines += _pack_lines(report.packs)
    counts = ", ".join(_count(report.count(severity), severity) for severity in SEVERITY_ORDER)
    lines += ["", f"{len(report.findings)} finding(s): {counts}"]
    lines += _restore_lines(report)
    return "\n".join(lines)


def _restore_lines(report: AuditReport) -> list[str]:
    """The exact files to put back, each with where it comes from; last, so it is what a
    user reads first at the bottom of a long report."""
    if not report.restore:
        return []
    lines = [
        "",
        f"RESTORE ({len(report.restore)} file(s); `bundle build` into this folder puts them back):",
    ]
    for item in report.restore:
        where = f"artifact {item.artifact}" if item.artifact else "no artifact of the profile"
        if item.version:
            where += f" {item.version}"
        if item.origin:
            where += f", taken from {item.origin}"
        known = f"; need inferred from {item.known_from}" if item.known_from else ""
        note = f" ({item.note})" if item.note else ""
        lines.append(f"  {item.name}{note}  [{where}{known}]")
    return lines


def _pack_lines(packs: tuple[dict[str, Any], ...]) -> list[str]:
    """Each EP pack's folder and size here, against the lock's."""
    if not packs:
        return []
    lines = ["", f"EP PACKS ({len(packs)})"]
    for pack in packs:
        state = (
            "left out by the setup"
            if pack["left_out"]
            else f"{human_size(pack['size'])}, {pack['files']} of {pack['locked_files']} files"
        )
        lines.append(f"  {pack['name']} ({pack['folder']}/): {state}")
    return lines


def _gpu_lines(gpu: dict[str, Any] | None) -> list[str]:
    """The compute capabilities the bundle's CUDA code serves, as ranges of NVIDIA's list."""
    if not gpu:
        return []
    lines = ["", f"GPU CODE ({len(gpu['dlls'])} DLL(s) with CUDA code)"]
    for state, label in (
        ("native", "native (SASS)"),
        ("jit", "PTX JIT at first use"),
        ("none", "no code"),
    ):
        if gpu[state]:
            lines.append(f"  {label}: compute capability {' '.join(gpu[state])}")
    if gpu["targets"]:
        lines.append(f"  targets: {' '.join(gpu['targets'])}")
    return lines


def _count(number: int, severity: Severity) -> str:
    plural = "s" if number != 1 and severity is not Severity.INFO else ""
    return f"{number} {severity.value}{plural}"


def _audit_heading(report: AuditReport) -> list[str]:
    plan = report.plan
    bundled = plan.with_status(Status.BUNDLED)
    size = human_size(sum(item.size or 0 for item in bundled))
    if report.lock is None:
        lock = "no lock file to check against"
    elif report.verified:
        lock = f"hashes verified against {report.lock.name}"
    else:
        lock = f"sizes and times checked against {report.lock.name} (--verify hashes)"
    unpacked = " (unpacked from the archive)" if report.archive else ""
    lines = [
        f"Audit of {report.folder}{unpacked} for {plan.profile} ({plan.architecture}, "
        f"Windows >= {plan.min_windows})",
        f"  {report.files} PE files read; {len(bundled)} DLLs needed and present ({size}), "
        f"{len(plan.missing)} missing; {lock}",
    ]
    if report.choice is not None:
        lines.append(f"  profile {report.choice.detail}")
        lines += [f"  note: {note}" for note in report.choice.notes]
    drivers = sorted(item.name for item in plan.with_status(Status.DRIVER))
    if drivers:
        lines.append(f"  required on the target, never shipped: {', '.join(drivers)}")
    pruned = sorted(item.name for item in plan.with_status(Status.PRUNED))
    if pruned:
        lines.append(f"  pruned for the app's models (--model): {', '.join(pruned)}")
    return lines


def _finding_lines(item: Finding) -> list[str]:
    indent = " " * 9
    shown = item.details[:AUDIT_DETAIL_LINES]
    lines = [f"  {item.code}  {item.message}"] + [indent + line for line in shown]
    if len(item.details) > len(shown):
        lines.append(f"{indent}... and {len(item.details) - len(shown)} more (--json lists all)")
    lines.append(f"{indent}fix: {item.fix}")
    return lines


def audit_json(report: AuditReport, picked: Options | None = None) -> str:
    """The report; with --run or --html, also `settings`: the cache folder those used, with
    its origin, as --dry-run --json gives settings."""
    return json.dumps(report.to_dict() | settings_part(picked), indent=2)


def explain_json(explanation: Explanation, folder: Path) -> str:
    return json.dumps({"folder": str(folder), **explanation.to_dict()}, indent=2)


def explain_text(explanation: Explanation, folder: Path) -> str:
    """The error-126 explainer: the verdict, the chain to the first missing link, who supplies
    it, and what the target itself must provide."""
    dll, missing = explanation.dll, explanation.missing
    if explanation.pruned_why is not None:
        lines = [f"{dll} is absent from {folder} by design: the build pruned it"]
        lines.append(f"  why: {explanation.pruned_why}")
        lines.append("  fix: if the app does load it, build without --model (or add the model)")
        return "\n".join(lines)
    if missing is None:
        lines = [f"{dll} would load from {folder}: its whole closure is there"]
    elif explanation.at_start:
        lines = [f"{dll} would fail to load from {folder} (error 126): {missing} is missing"]
    else:
        lines = [
            f"{dll} would load from {folder}, but the first operation that loads {missing} "
            "fails: it is missing (loaded at run time, no import table shows it)"
        ]
    if missing is not None:
        lines += _explain_missing(explanation, missing)
    if explanation.driver:
        lines.append(f"  the GPU driver must provide: {', '.join(explanation.driver)}")
    if explanation.system:
        lines.append(f"  Windows provides: {', '.join(explanation.system)}")
    if explanation.redist:
        lines.append(f"  vc_redist provides: {', '.join(explanation.redist)}")
    if explanation.pruned:
        shown = ", ".join(explanation.pruned)
        lines.append(f"  left out for the app's models (--model; never loaded by them): {shown}")
    return "\n".join(lines)


def _explain_missing(explanation: Explanation, missing: str) -> list[str]:
    lines = [f"  chain: {explanation.chain}"]
    if explanation.note:
        lines.append(f"  a file of that name is there but unusable: {explanation.note}")
    supplier = explanation.supplier
    if supplier is None:
        lines.append(f"  supplied by: no artifact of {explanation.profile} provides {missing}")
    else:
        lines.append(
            f"  supplied by: artifact {supplier.artifact} {supplier.version} of "
            f"{explanation.profile}, pinned sources:"
        )
        lines += [f"    {source}" for source in supplier.sources]
    if explanation.also_missing:
        lines.append(f"  also missing in its closure: {', '.join(explanation.also_missing)}")
    lines.append(
        f"  fix: put {missing} next to {explanation.dll} "
        f"(bundle build --profile {explanation.profile} does)"
    )
    return lines
