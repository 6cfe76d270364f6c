"""Talk layer: `bundle publish` (a release folder with SHA256SUMS, provenance, SPDX and winget
manifests, from a built bundle and its compiled setups) and `bundle verify` (a download checked
against them), docs/publishing.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli import session
from bundler.cli.app import app
from bundler.cli.flags import option
from bundler.config.options import Options

if TYPE_CHECKING:
    from bundler.publish.publisher import Published
    from bundler.publish.verify import Verified
    from bundler.publish.winget import WingetInfo
    from bundler.ship.appconfig import PublishSettings


@app.command()
def publish(
    ctx: typer.Context,
    dist: Annotated[
        Path, typer.Argument(metavar="DIST", help="The bundle folder `bundle build` wrote.")
    ],
    setups: Annotated[
        Path | None,
        option("setups"),
    ] = None,
    archive: Annotated[
        list[Path] | None,
        option("archive", "publish"),
    ] = None,
    out: Annotated[Path | None, option("out", "release")] = None,
    config: Annotated[Path | None, option("config", "publish")] = None,
    cache_dir: Annotated[Path | None, option("cache-dir")] = None,
    package_id: Annotated[
        str | None,
        option("package-id"),
    ] = None,
    license_: Annotated[str | None, option("license")] = None,
    short_description: Annotated[str | None, option("short-description")] = None,
    url: Annotated[
        str | None,
        option("url"),
    ] = None,
    winget_setup: Annotated[
        str | None,
        option("winget-setup"),
    ] = None,
    builder_id: Annotated[
        str | None,
        option("builder-id"),
    ] = None,
    force: Annotated[bool, option("force")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Write a release folder from a built bundle and its compiled setups: the files, their
    SHA256SUMS, an in-toto provenance statement, an SPDX SBOM beside the CycloneDX one, and
    winget manifests of a single-file setup."""
    from bundler.cli.origins import cache_folder
    from bundler.config.cache_root import runtime_packs_folder
    from bundler.config.settings import source_date
    from bundler.publish.publisher import PublishRequest
    from bundler.publish.publisher import publish as write_release
    from bundler.publish.release import read_release
    from bundler.publish.slsa import DEFAULT_BUILDER
    from bundler.target.profiles import load_profile

    settings = _settings(config, dist)
    picked = Options()
    flags = {"package_id": package_id, "license": license_, "url": url}
    flags |= {"short_description": short_description, "builder_id": builder_id}
    values = {
        name: picked.pick(name, flag, getattr(settings, name)) for name, flag in flags.items()
    }
    packs = runtime_packs_folder(cache_folder(cache_dir, picked))
    release = read_release(dist, setups or dist / "Output", tuple(archive or ()), packs)
    request = PublishRequest(
        release=release,
        out=out or dist / "release",
        profile=load_profile(release.lock.profile),
        builder_id=values["builder_id"] or DEFAULT_BUILDER,
        source_date=source_date(),
        winget=_winget(values),
        winget_setup=winget_setup,
        force=force,
    )
    result = write_release(request, session.of(ctx).reporter.note)
    typer.echo(_published_json(result, picked) if as_json else _published_text(result))


def _settings(config: Path | None, dist: Path) -> PublishSettings:
    from bundler.errors import ConfigError
    from bundler.ship.appconfig import PublishSettings, find_config, load_config

    if config is not None and not config.is_file():
        raise ConfigError(f"--config {config}: no such file; give the app's bundle.toml.")
    path = config or find_config(Path.cwd()) or find_config(dist.parent)
    return load_config(path).publish if path else PublishSettings()


def _winget(values: dict[str, str | None]) -> WingetInfo | None:
    from bundler.errors import ConfigError
    from bundler.publish.winget import WingetInfo, check_info

    if not values["package_id"]:
        return None
    keys = ("license", "short_description", "url")
    missing = [key for key in keys if not values[key]]
    if missing:
        flags = ", ".join(f"--{key.replace('_', '-')}" for key in missing)
        raise ConfigError(
            f"winget manifests for {values['package_id']} need {flags} (or [publish] "
            f"{', '.join(missing)} in bundle.toml): bundle cannot know them."
        )
    return check_info(WingetInfo(
        str(values["package_id"]), str(values["license"]), str(values["short_description"]),
        str(values["url"]),
    ))  # fmt: skip


def _published_json(result: Published, picked: Options) -> str:
    from bundler.publish.checksums import SUMS_NAME

    document = {
        "schema_version": 1,
        "out": str(result.out),
        "files": [{"name": name, "sha256": digest} for name, digest in result.files.items()],
        "sums": str(result.out / SUMS_NAME),
        "statement": str(result.out / result.statement),
        "winget": {"setup": result.winget_setup, "manifests": result.winget}
        if result.winget_setup
        else None,
        "notes": result.notes,
        "settings": picked.report(),
    }
    return json.dumps(document, indent=2)


def _published_text(result: Published) -> str:
    lines = [f"release folder: {result.out}"]
    lines += [f"  {digest[:16]}  {name}" for name, digest in result.files.items()]
    lines.append(f"  SHA256SUMS, {result.statement}")
    lines += [f"  {path}" for path in result.winget]
    lines += [f"note: {text}" for text in result.notes]
    return "\n".join(lines)


@app.command()
def verify(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE...",
            help="Downloaded files, or the folder that holds them and SHA256SUMS.",
            show_default=False,
        ),
    ],
    sums: Annotated[
        Path | None,
        option("sums"),
    ] = None,
    statement: Annotated[
        Path | None,
        option("statement"),
    ] = None,
    lock: Annotated[
        Path | None,
        option("lock", "verify"),
    ] = None,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Check downloaded files against SHA256SUMS, the provenance statement's subjects against
    SHA256SUMS, and its dependencies against the lock's pins (exit 26 names what differs)."""
    from bundler.errors import InputFileError
    from bundler.publish.checksums import SUMS_NAME
    from bundler.publish.slsa import STATEMENT_NAME
    from bundler.publish.verify import verify as check

    first = files[0]
    folder = first if first.is_dir() else first.parent
    chosen = sums or folder / SUMS_NAME
    if not chosen.is_file():
        raise InputFileError(
            f"{chosen}: no such file; download {SUMS_NAME} beside the files, or give --sums."
        )
    beside = chosen.parent / STATEMENT_NAME
    result = check(list(files), chosen, statement or (beside if beside.is_file() else None), lock)
    typer.echo(_verified_json(result) if as_json else _verified_text(result))


def _verified_json(result: Verified) -> str:
    document = {
        "schema_version": 1,
        "verified": True,
        "files": [{"name": name, "sha256": digest} for name, digest in result.files.items()],
        "statement": str(result.statement) if result.statement else None,
        "lock": result.lock,
        "dependencies": result.dependencies,
    }
    return json.dumps(document, indent=2)


def _verified_text(result: Verified) -> str:
    lines = [f"ok  {name}" for name in result.files]
    if result.statement:
        lines.append(f"ok  the statement's subjects are SHA256SUMS ({result.statement})")
    if result.lock:
        lines.append(
            f"ok  its {result.dependencies} dependencies are the lock's pins ({result.lock})"
        )
    elif result.statement:
        lines.append("note: no lock at hand: the dependencies were not compared (--lock)")
    else:
        lines.append("note: no provenance statement: only the checksums were compared")
    return "\n".join(lines)
