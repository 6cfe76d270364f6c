"""Talk layer: where a command's settings came from (its flag, an environment variable such as
$BUNDLE_CACHE_DIR, or the default), picked through the one resolver, bundler.config.options, so that
every command's --dry-run can say it as `bundle build --dry-run --json` does.

The cache folder's order is bundler.config.cache_root's: --cache-dir, else $BUNDLE_CACHE_DIR, else
the
platform's per-user cache folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer

from bundler.config.options import Options


def cache_folder(flag: Path | None, picked: Options) -> Path:
    """The command's cache folder, resolved once, with its origin kept in `picked`."""
    from bundler.config.cache_root import CACHE_ENV, env_cache_dir, platform_cache_dir

    variable = (CACHE_ENV, env_cache_dir())
    chosen = picked.pick("cache_dir", flag, env=variable, default_factory=platform_cache_dir)
    assert chosen is not None  # the platform always has a per-user cache folder
    return chosen


def pick_given(ctx: typer.Context, picked: Options, **values: object) -> None:
    """Settings whose default typer fills in (`--profile`'s, `--source auto`, a flag's False):
    each comes from its flag only when the command line gave it (the command's context keeps
    each parameter's source), else from the default, which is then the value."""
    for name, value in values.items():
        source = ctx.get_parameter_source(name)
        given = source is not None and source.name == "COMMANDLINE"
        picked.pick(name, value if given else None, default=value)


def say_dry_run(command: str, steps: Sequence[str], picked: Options, as_json: bool) -> None:
    """A command's --dry-run: what it would do and the settings it would do it with, each
    with its origin; nothing is done."""
    from bundler.cli.dry_run_views import dry_run_json, dry_run_report

    shown = dry_run_json if as_json else dry_run_report
    typer.echo(shown(command, steps, picked.report()))
