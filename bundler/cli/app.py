"""Talk layer: the typer app of the `bundle` command line and the options its commands share.
bundler.cli is the only package that prints or exits.

Each command is a short script: read inputs, decide (resolve into a Plan), show a view of it.
Errors from the library arrive as BundleError and leave as one line plus a documented exit code
(docs/exit-codes.md); --debug (or BUNDLE_DEBUG=1) shows the traceback instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler import __version__
from bundler.cli.session import Session

if TYPE_CHECKING:
    pass


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
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="The command's result, or its error, as JSON: the same as the command's --json.",
        ),
    ] = False,
) -> None:
    # --json: bundler.cli.failures moves a --json given here behind the command's words, so
    # this one is only seen without a command (and then there is nothing to print).
    if debug:
        context.ensure_object(Session).debug = True


ProfileOption = Annotated[
    str,
    typer.Option(
        "--profile",
        "-p",
        help="Target profile: a name, a profile .toml file, or an ORT release (its GPU profile).",
    ),
]
SearchOption = Annotated[
    list[Path] | None,
    typer.Option("--search", "-s", help="Folder to search for DLLs (repeatable, in order)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Overwrite files bundle did not write.")]
LinkOption = Annotated[
    bool | None,
    typer.Option("--link/--copy", help="Hard-link files from the cache, or copy them."),
]
IndexUrlOption = Annotated[
    str | None,
    typer.Option("--index-url", help="PEP 691 package index (default: $PIP_INDEX_URL or PyPI)."),
]
LockOption = Annotated[
    Path | None,
    typer.Option(
        "--lock",
        help="The bundle's lock file, or its folder (default: from bundle.toml, or ./).",
    ),
]
BundleArgument = Annotated[
    Path | None,
    typer.Argument(
        metavar="[BUNDLE]",
        help="The bundle folder or its bundle.lock.json, as `bundle audit` takes it (default: "
        "--lock, else from bundle.toml, else ./).",
        show_default=False,
    ),
]
RenderConfigOption = Annotated[
    Path | None, typer.Option("--config", help="bundle.toml holding the render table.")
]
SourceOption = Annotated[
    str, typer.Option("--source", help="auto (url, then pip, then dir), url, pip or dir.")
]
# Declared once, here: a command takes them as these aliases, or in bundler.cli.groups' Sources.
ALLOW_HTTP = typer.Option("--allow-http", help="Allow plain-http:// mirrors.")
AllowHttpOption = Annotated[bool, ALLOW_HTTP]


CACHE_DIR = typer.Option(
    "--cache-dir", help="Download cache (default: $BUNDLE_CACHE_DIR or the user cache)."
)
CacheDirOption = Annotated[Path | None, CACHE_DIR]
