"""Act layer: `bundle audit` as one request: the folder (or its lock file, or a .zip/.7z of
it) audited, its signatures checked and its load proved where asked, and the JUnit and HTML
reports written; the CLI maps its flags onto an AuditRequest and shows the report."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bundler.audit.judge import (
    as_archived,
    audit,
    is_archive,
    refuse_source_folder,
    unpacked,
    with_signatures,
)
from bundler.audit.junit import write_junit
from bundler.audit.report import AuditReport
from bundler.audit.suppressions import Suppression, parse_suppression
from bundler.reporter import SILENT, Note


@dataclass(frozen=True)
class AuditRequest:
    """What one `bundle audit` asks for."""

    path: Path  # a bundle folder, its bundle.lock.json, or a .zip/.7z of it
    profile: str | None = None  # None: the lock's
    ignore: tuple[str, ...] = ()  # --ignore CODE[:FILE-PATTERN]
    verify: bool = False  # hash every file the lock lists
    signatures: bool = False
    run: bool = False  # the load proof
    run_args: tuple[str, ...] = ()
    junit: Path | None = None
    html: Path | None = None
    strict: bool = False  # warnings fail too (the JUnit report's verdict)
    cache_dir: Path | None = None  # --run's Wine prefix and --html's templates live there
    lock_timeout: float | None = None  # the command's $BUNDLE_LOCK_TIMEOUT (None: wait on)


def perform(request: AuditRequest, note: Note = SILENT.note) -> AuditReport:
    """The report of `request`, with the JUnit and HTML reports written where it asks."""
    rules = [parse_suppression(text) for text in request.ignore]
    if not is_archive(request.path):
        refuse_source_folder(request.path, request.profile)  # the hint first, not 24 findings
    with _target(request.path) as (target, inner):
        report = audit(target, request.profile, rules, verify=request.verify)
        report = _checked_further(report, request, rules, note)
        if inner is not None:
            report = as_archived(report, request.path, inner)
    if request.junit is not None:
        write_junit(report, request.junit, request.strict)
    if request.html is not None:
        from bundler.audit.html import write_html
        from bundler.render.engine import Templates

        write_html(Templates(request.cache_dir), report, request.html)
    return report


def _checked_further(
    report: AuditReport, request: AuditRequest, rules: list[Suppression], note: Note
) -> AuditReport:
    """The report with the signatures and the load proof the request asks for."""
    if request.signatures:
        report = with_signatures(report, rules)
    if request.run:
        from bundler.audit.loadrun import prove_load

        report = prove_load(
            report,
            request.run_args,
            ignore=rules,
            cache_dir=request.cache_dir,
            note=note,
            lock_timeout=request.lock_timeout,
        )
    return report


@contextmanager
def _target(path: Path) -> Iterator[tuple[Path, str | None]]:
    """`path` itself, or for an archive its unpacked folder (and the folder's path inside)."""
    if not is_archive(path):
        yield path, None
        return
    with unpacked(path) as (target, inner):
        yield target, inner
