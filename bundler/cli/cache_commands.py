"""Talk layer: `bundle fetch` and `bundle cache`: the pinned artifacts and the download cache."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler.cli import session
from bundler.cli.app import app, cache_app
from bundler.cli.flags import option
from bundler.cli.groups import ANY_SOURCE, Sources, takes
from bundler.cli.origins import cache_folder, pick_given, say_dry_run
from bundler.config.options import Options
from bundler.target.profiles import DEFAULT_PROFILE


@app.command()
@takes
def fetch(
    ctx: typer.Context,
    profile: Annotated[str, option("profile")] = DEFAULT_PROFILE,
    source: Annotated[str, option("source")] = "auto",
    sources: Sources = ANY_SOURCE,
    verify: Annotated[bool, option("verify", "fetch")] = False,
    search: Annotated[list[Path] | None, option("search")] = None,
    to: Annotated[
        Path | None,
        option("to"),
    ] = None,
    dry_run: Annotated[bool, option("dry-run")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Acquire and verify every artifact of a profile; print what came from where."""
    from bundler.acquire.artifacts import acquire_profile, export_archives
    from bundler.cli import cache_views
    from bundler.cli.dry_run_views import acquire_step
    from bundler.target.profiles import load_profile

    options = sources.acquire(mode=source, verify=verify, search=tuple(search or ()))
    chosen = load_profile(profile)
    if dry_run:
        picked = Options()
        pick_given(ctx, picked, profile=profile, source=source, verify=verify, search=search, to=to)
        exported = [f"put every archive into {to}"] if to else []
        steps = [acquire_step(chosen, sources.pick(ctx, picked)), *exported]
        say_dry_run("fetch", steps, picked, as_json)
        return
    reporter = session.of(ctx).reporter
    cache = sources.cache(reporter)
    acquired = acquire_profile(chosen, cache, options, reporter)
    if to is not None:
        export_archives(acquired, cache, to)
    shown = cache_views.acquired_json if as_json else cache_views.acquired_table
    typer.echo(shown(acquired))


@cache_app.command("list")
def cache_list(
    cache_dir: Annotated[Path | None, option("cache-dir")] = None,
    dry_run: Annotated[bool, option("dry-run")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """List the verified archives and the compiled runtime packs in the cache."""
    from bundler.acquire.cache import Cache
    from bundler.cli import cache_views
    from bundler.config.settings import lock_timeout

    picked = Options()
    root = cache_folder(cache_dir, picked)
    if dry_run:
        step = f"list the verified archives and compiled runtime packs in {root}"
        say_dry_run("cache list", [step], picked, as_json)
        return
    cache = Cache(root, lock_timeout=lock_timeout())  # an old packs/ folder is moved under lock
    shown = cache_views.cache_json if as_json else cache_views.cache_table
    typer.echo(shown(cache.root, cache.entries(), cache.packs()))


@cache_app.command("clean")
def cache_clean(
    ctx: typer.Context,
    cache_dir: Annotated[Path | None, option("cache-dir")] = None,
    everything: Annotated[
        bool,
        option("all", "clean"),
    ] = False,
    dry_run: Annotated[bool, option("dry-run")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Remove partial downloads, extracted trees and kept templates (--all: the archives and
    runtime packs too)."""
    from bundler.acquire.cache import Cache
    from bundler.cli import cache_views

    picked = Options()
    root = cache_folder(cache_dir, picked)
    cache = Cache(root, lock_timeout=None)  # clean takes no lock
    if dry_run:
        pick_given(ctx, picked, everything=everything)
        step = cache_views.clean_step(root, everything, cache.cleanable(everything))
        say_dry_run("cache clean", [step], picked, as_json)
        return
    freed = cache.clean(everything)
    shown = cache_views.cache_clean_json if as_json else cache_views.cache_clean_report
    typer.echo(shown(cache.root, freed))
