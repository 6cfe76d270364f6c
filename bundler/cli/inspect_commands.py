"""Talk layer: `bundle deps` and `bundle scan`, the commands that look at binaries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler.cli import session
from bundler.cli.app import app
from bundler.cli.flags import option
from bundler.cli.groups import ANY_SOURCE, Sources, takes
from bundler.cli.origins import pick_given, say_dry_run
from bundler.config.options import Options
from bundler.errors import ExitCode, InputFileError
from bundler.reporter import SILENT, Reporter
from bundler.target.profiles import DEFAULT_PROFILE

if TYPE_CHECKING:
    from bundler.acquire.artifacts import AcquireOptions
    from bundler.closure.plan import Plan


@app.command()
@takes
def deps(
    ctx: typer.Context,
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE...", help="The app's .exe (and any plugin DLLs).")
    ],
    profile: Annotated[str, option("profile")] = DEFAULT_PROFILE,
    search: Annotated[list[Path] | None, option("search")] = None,
    as_json: Annotated[bool, option("json")] = False,
    why: Annotated[str | None, option("why")] = None,
    show_system: Annotated[bool, option("all")] = False,
    fetch_artifacts: Annotated[
        bool,
        option("fetch"),
    ] = False,
    source: Annotated[str, option("source")] = "auto",
    sources: Sources = ANY_SOURCE,
    dry_run: Annotated[bool, option("dry-run")] = False,
) -> None:
    """Resolve the complete DLL closure of FILES; exit 3 when anything is missing. With
    --fetch, the profile's artifacts come from the same sources as `bundle fetch`'s (--offline,
    --mirror, --source)."""
    from bundler.cli import inspect_views
    from bundler.config.settings import lock_timeout

    acquiring = sources.acquire(mode=source)
    if dry_run:
        picked = Options()
        pick_given(ctx, picked, profile=profile, search=search, fetch_artifacts=fetch_artifacts)
        pick_given(ctx, picked, source=source)
        steps = _deps_steps(files, profile, fetch_artifacts, sources.pick(ctx, picked))
        say_dry_run("deps", steps, picked, as_json)
        return
    reporter = session.of(ctx).reporter
    fetching = Fetching(sources.root(), acquiring, lock_timeout()) if fetch_artifacts else None
    plan = _resolve(files, profile, search or [], fetching, reporter)
    if why is not None:
        _print_why(plan, why)
    elif as_json:
        typer.echo(plan.to_json())
    else:
        typer.echo(inspect_views.TreeView(plan, show_system).render())
        typer.echo("")
        typer.echo(inspect_views.summary(plan))
    if plan.missing:
        raise typer.Exit(ExitCode.MISSING)


def _deps_steps(files: list[Path], profile_name: str, fetch: bool, cache: Path) -> list[str]:
    """What `bundle deps` would do: with --fetch, acquire the profile's artifacts first."""
    from bundler.cli.dry_run_views import acquire_step
    from bundler.target.profiles import load_profile

    profile = load_profile(profile_name)
    names = ", ".join(str(path) for path in files)
    unused = "" if fetch else " (the cache is used only with --fetch)"
    resolving = f"resolve the DLL closure of {names} for {profile.name}{unused}"
    return [acquire_step(profile, cache), resolving] if fetch else [resolving]


@dataclass(frozen=True)
class Fetching:
    """deps --fetch: the cache folder, and where the artifacts may come from."""

    cache_dir: Path
    options: AcquireOptions
    lock_timeout: float | None  # $BUNDLE_LOCK_TIMEOUT, read once by the command


def _resolve(
    files: list[Path],
    profile_name: str,
    search: list[Path],
    fetching: Fetching | None = None,
    reporter: Reporter = SILENT,
) -> Plan:
    """Inputs are read before any fetch, so a wrong exe fails at once, not after a download."""
    from bundler.acquire.artifacts import acquire_profile
    from bundler.acquire.cache import Cache
    from bundler.closure.resolve import read_inputs
    from bundler.ship.shipped import shipped_closure
    from bundler.target.profiles import load_profile

    profile = load_profile(profile_name)
    apps = read_inputs(files, profile, search)
    acquired = []
    if fetching is not None:
        cache = Cache(fetching.cache_dir, reporter, lock_timeout=fetching.lock_timeout)
        acquired = acquire_profile(profile, cache, fetching.options, reporter)
    return shipped_closure(apps, profile, acquired, search)


def _print_why(plan: Plan, name: str) -> None:
    from bundler.cli import inspect_views

    if plan.file(name) is None:
        raise typer.BadParameter(
            f"{name} is not in the closure of these files for {plan.profile}.", param_hint="--why"
        )
    typer.echo(inspect_views.why(plan, name))


@app.command()
def scan(
    dlls: Annotated[list[Path], typer.Argument(metavar="DLL...", help="The DLLs to scan.")],
    pool: Annotated[
        list[Path] | None,
        option("pool"),
    ] = None,
    profile: Annotated[str | None, option("profile", "scan")] = None,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Find the DLLs a binary may load at run time (LoadLibrary), with the evidence."""
    from bundler.cli import inspect_views
    from bundler.rules.scan import Pool
    from bundler.rules.scan import scan as scan_file
    from bundler.target.profiles import load_profile
    from bundler.target.system import load_system_policy

    for dll in dlls:
        if not dll.is_file():
            raise InputFileError(f"{dll}: not a file; give the DLLs to scan.")
    folders = dict.fromkeys([*(dll.parent for dll in dlls), *(pool or ())])
    drivers = load_profile(profile or DEFAULT_PROFILE).driver_dlls
    known = Pool.of(list(folders), drivers)
    policy = load_system_policy()
    results = [scan_file(dll, known, policy) for dll in dlls]
    typer.echo(inspect_views.scan_json(results) if as_json else inspect_views.scan_table(results))
