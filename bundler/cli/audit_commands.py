"""Talk layer: `bundle audit` and its views (--json, --junit, --html, --explain, --run)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler.cli import session
from bundler.cli.app import app
from bundler.cli.flags import option
from bundler.config.options import Options
from bundler.errors import ExitCode

if TYPE_CHECKING:
    from bundler.audit.report import AuditReport


@app.command()
def audit(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            metavar="PATH", help="A bundle folder, its bundle.lock.json, or a .zip/.7z of it."
        ),
    ],
    profile: Annotated[str | None, option("profile", "audit")] = None,
    as_json: Annotated[bool, option("json", "findings")] = False,
    strict: Annotated[bool, option("strict")] = False,
    ignore: Annotated[
        list[str] | None,
        option("ignore"),
    ] = None,
    junit: Annotated[
        Path | None,
        option("junit"),
    ] = None,
    html: Annotated[
        Path | None,
        option("html"),
    ] = None,
    run: Annotated[
        bool,
        option("run"),
    ] = False,
    signatures: Annotated[
        bool,
        option("signatures"),
    ] = False,
    trust: Annotated[
        Path | None,
        option("trust"),
    ] = None,
    run_args: Annotated[
        list[str] | None,
        option("run-arg"),
    ] = None,
    explain_dll: Annotated[
        str | None,
        option("explain"),
    ] = None,
    verify: Annotated[
        bool,
        option("verify"),
    ] = False,
    cache_dir: Annotated[Path | None, option("cache-dir")] = None,
) -> None:
    """Check a shipped folder as the target machine will see it; exit 17 on errors."""
    from bundler.audit.request import AuditRequest, perform
    from bundler.cli import audit_views
    from bundler.config.settings import lock_timeout

    if trust is not None:
        if not signatures:
            raise typer.BadParameter("--trust needs --signatures.", param_hint="--trust")
        if path.is_file() and path.suffix.lower() in (".exe", ".dll"):
            _audit_one_signature(path, trust)
            return
        raise typer.BadParameter(
            "--trust checks one signed .exe or .dll for now (a folder: not yet).",
            param_hint="--trust",
        )
    picked = Options()  # the cache folder, for --run's Wine prefix and --html's templates
    cache = _cache_folder(cache_dir, picked) if run or html is not None else None
    request = AuditRequest(
        path, profile, ignore=tuple(ignore or ()), verify=verify, signatures=signatures,
        run=run, run_args=tuple(run_args or ()), junit=junit, html=html, strict=strict,
        cache_dir=cache, lock_timeout=lock_timeout() if run else None,
    )  # fmt: skip
    report = perform(request, session.of(ctx).reporter.note)
    if explain_dll is not None:
        _print_explanation(report, explain_dll, as_json)
        return
    shown = audit_views.audit_json(report, picked) if as_json else audit_views.audit_table(report)
    typer.echo(shown)
    code = report.exit_code(strict)
    if code:
        raise typer.Exit(code)


def _cache_folder(flag: Path | None, picked: Options) -> Path:
    from bundler.cli.origins import cache_folder

    return cache_folder(flag, picked)


def _audit_one_signature(path: Path, trust: Path) -> None:
    """--signatures --trust CA.pem on one file: its signature verifies and CA.pem issued its
    signer (exit 0), or not (exit 17)."""
    from bundler.binary.signatures import SignatureState, check_signature, load_trust

    signature = check_signature(path, load_trust(trust))
    by = f" by {signature.signer}" if signature.signer else ""
    typer.echo(f"{path.name}: {signature.state.value}{by} ({signature.detail})")
    if signature.state is not SignatureState.VALID:
        raise typer.Exit(ExitCode.AUDIT_ERRORS)


def _print_explanation(report: AuditReport, dll: str, as_json: bool) -> None:
    """0 when DLL's whole closure is in the folder, the audit-error code when not."""
    from bundler.audit.explain import explain
    from bundler.cli import audit_views

    explanation = explain(report.plan, report.profile, dll)
    if explanation is None:
        raise typer.BadParameter(
            f"{dll} is neither in {report.folder} nor needed by what is there "
            f"({report.profile.name}).",
            param_hint="--explain",
        )
    shown = audit_views.explain_json if as_json else audit_views.explain_text
    typer.echo(shown(explanation, report.folder))
    if not explanation.loads:
        raise typer.Exit(ExitCode.AUDIT_ERRORS)
