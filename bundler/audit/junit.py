"""Act layer: `bundle audit --junit FILE`: the audit as a JUnit XML report, for CI test-report
pages.

One test case per code of the findings catalogue, every code, so a check that passed shows as a
passed case and a suppression-free history per code builds up in the CI. A code with error
findings (and, with --strict, warnings) is a `<failure>` whose message is the first finding's
and whose text lists them all with their details and fix; warnings without --strict and info
findings pass and are told in `<system-out>`. The structure is the one GitLab, Jenkins, Azure
Pipelines and GitHub's test reporters read: testsuites/testsuite/testcase/failure@message.
No timestamps and times of 0: the same audit writes the same bytes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from bundler.audit.loadproof import FINDING_CODES as LOAD_PROOF_CODES
from bundler.audit.report import AuditReport
from bundler.binary.signatures import FINDING_CODES as SIGNATURE_CODES
from bundler.findings import CATALOGUE, Check, Finding, Severity
from bundler.render.engine import write_text

SUITE = "bundle audit"


def junit_xml(report: AuditReport, strict: bool = False) -> str:
    """The report as JUnit XML text (UTF-8, with its declaration)."""
    checks = [
        check
        for check in CATALOGUE.values()
        if (report.load_proof is not None or check.code not in LOAD_PROOF_CODES)
        and (report.signatures or check.code not in SIGNATURE_CODES)
    ]  # the load proof's checks ran only with --run, the signatures' with --signatures
    cases = [_testcase(check, report, strict) for check in checks]
    failures = sum(1 for case in cases if case.find("failure") is not None)
    counts = {
        "tests": str(len(cases)),
        "failures": str(failures),
        "errors": "0",
        "skipped": "0",
        "time": "0",
    }
    root = ET.Element("testsuites", {"name": SUITE, **counts})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **counts})
    properties = ET.SubElement(suite, "properties")
    for name, value in _properties(report).items():
        ET.SubElement(properties, "property", {"name": name, "value": value})
    suite.extend(cases)
    ET.indent(root)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{ET.tostring(root, encoding="unicode")}\n'


def write_junit(report: AuditReport, path: Path, strict: bool = False) -> None:
    """Written atomically: a CI step never reads half a report."""
    write_text(path, junit_xml(report, strict))


def _properties(report: AuditReport) -> dict[str, str]:
    return {
        "folder": str(report.folder),
        "lock": str(report.lock) if report.lock else "",
        "profile": report.profile.name,
        "profile_origin": report.choice.origin if report.choice else "",
        "profile_origin_detail": report.choice.detail if report.choice else "",
        "profile_missing": (report.choice.missing or "") if report.choice else "",
        "tool_version": report.tool_version,
        "files": str(report.files),
    }


def _testcase(check: Check, report: AuditReport, strict: bool) -> ET.Element:
    found = [item for item in report.findings if item.code == check.code]
    case = ET.Element(
        "testcase",
        {"classname": f"{SUITE}.{report.profile.name}", "name": _name(check), "time": "0"},
    )
    if not found:
        return case
    text = "\n\n".join(_finding_text(item) for item in found)
    if check.severity is Severity.ERROR or (strict and check.severity is Severity.WARNING):
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        message = _xml_safe(found[0].message) + more
        failure = ET.SubElement(case, "failure", {"message": message, "type": check.code})
        failure.text = text
    else:
        ET.SubElement(case, "system-out").text = f"{check.severity.value}: {text}"
    return case


def _name(check: Check) -> str:
    return f"{check.code} {check.name}: {check.title}"


def _finding_text(item: Finding) -> str:
    lines = [item.message, *(f"  {line}" for line in item.details), f"fix: {item.fix}"]
    return _xml_safe("\n".join(lines))


def _xml_safe(text: str) -> str:
    """XML 1.0 has no way to write most control characters (a file name may hold one)."""
    return "".join(c if c >= " " or c in "\t\n\r" else f"\\x{ord(c):02x}" for c in text)
