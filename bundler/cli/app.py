"""Talk layer: the typer app of the `bundle` command line, its general options and the BUNDLE
argument its render commands share; every option comes from the one option table
(bundler.config.option_table, through bundler.cli.flags). bundler.cli is the only package
that prints or exits.

Each command is a short script: read inputs, decide (resolve into a Plan), show a view of it.
Errors from the library arrive as BundleError and leave as one line plus a documented exit code
(docs/exit-codes.md); --debug (or BUNDLE_DEBUG=1) shows the traceback instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler import __version__
from bundler.cli.flags import option
from bundler.cli.session import Session

app = typer.Typer(
    help="Ship Windows apps that embed ONNX Runtime (1.19.2 on; CPU, CUDA 12/13, DirectML) with "
    "every DLL they need.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
profiles_app = typer.Typer(help="List the target profiles, or show one.", add_completion=False)
app.add_typer(profiles_app, name="profiles")
cache_app = typer.Typer(help="Inspect or clean the download cache.", add_completion=False)
app.add_typer(cache_app, name="cache")
render_app = typer.Typer(
    help="Render an output of a built bundle again from its lock file.", add_completion=False
)
app.add_typer(render_app, name="render")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bundle {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    context: typer.Context,
    debug: Annotated[bool, option("debug")] = False,
    version: Annotated[bool, option("version", callback=_version, is_eager=True)] = False,
    as_json: Annotated[bool, option("json", "root")] = False,
) -> None:
    # --json: bundler.cli.failures moves a --json given here behind the command's words, so
    # this one is only seen without a command (and then there is nothing to print).
    if debug:
        context.ensure_object(Session).debug = True


BundleArgument = Annotated[
    Path | None,
    typer.Argument(
        metavar="[BUNDLE]",
        help="The bundle folder or its bundle.lock.json, as `bundle audit` takes it (default: "
        "--lock, else from bundle.toml, else ./).",
        show_default=False,
    ),
]
