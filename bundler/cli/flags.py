"""Talk layer: the options that several commands declare, each flag's declarations side by side,
so that a flag is spelt, typed and defaulted alike in every command that takes it. Its help
stays the command's own: `--profile` of `build` falls back on bundle.toml, that of `audit` on
the lock file, that of `scan` only names the GPU driver's DLLs.

Options of one command alone are declared in its signature; the groups of options that several
commands take together (--cache-dir with --mirror, --offline, ...) are in bundler.cli.groups.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bundler.target.profiles import DEFAULT_PROFILE


def _profile(help: str) -> Any:
    """--profile, -p: a profile's name, a profile .toml file, or an ORT release."""
    return typer.Option("--profile", "-p", help=help)


def _out(help: str) -> Any:
    return typer.Option("--out", help=help)


BuildProfile = Annotated[
    str | None,
    _profile(
        "Target profile: a name, a .toml file, or an ORT release (default: bundle.toml's "
        f"[build] profile, else {DEFAULT_PROFILE})."
    ),
]
AuditProfile = Annotated[str | None, _profile("Target profile (default: the lock file's).")]
ScanProfile = Annotated[
    str | None,
    _profile(f"Take the GPU driver DLL names from this profile (default: {DEFAULT_PROFILE})."),
]
MeasureProfile = Annotated[
    str | None,
    _profile(
        "Instead of --ort: the bundle's profile (its ORT release; its cuDNN version is checked "
        "against the one the models load)."
    ),
]

BuildOrt = Annotated[
    str | None,
    typer.Option("--ort", help="An ORT release, e.g. 1.31.1: its shipped GPU profile."),
]
MeasureOrt = Annotated[
    str | None, typer.Option("--ort", help="The ORT release the bundle ships, e.g. 1.31.1.")
]

BuildOut = Annotated[Path | None, _out("Output folder (default: the exe's folder).")]
IssOut = Annotated[Path | None, _out("Where to write the script (default: beside the lock file).")]
PostbuildOut = Annotated[Path | None, _out("The folder for both files (default: the lock file's).")]
MsbuildOut = Annotated[Path, _out("The folder to lay out (default: ./ort-bundle).")]
EvidenceOut = Annotated[Path, _out("The app evidence file to write (JSON).")]
ProfileOut = Annotated[Path | None, _out("Write the profile here (default: stdout).")]

BuildConfig = Annotated[
    Path | None, typer.Option("--config", help="bundle.toml to read (default: beside EXE).")
]

DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Say what the command would do and its settings, each with where it came from "
        "(its flag, an environment variable such as $BUNDLE_CACHE_DIR, or the default); do "
        "nothing: no download, nothing written.",
    ),
]
# build's --ep; in flags.py so the pack names can be offered by more commands (render iss).
EpPacks = Annotated[
    list[str] | None,
    typer.Option(
        "--ep",
        metavar="PACK",
        help="An execution-provider pack to ship in ep/PACK/ beside the exe (repeatable): "
        "nv-tensorrt-rtx, openvino or webgpu (docs/ep-packs.md).",
    ),
]
