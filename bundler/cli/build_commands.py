"""Talk layer: `bundle build`, `bundle render` and `bundle msbuild`, the commands that write a
bundle and its views."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler.cli import session
from bundler.cli.app import BundleArgument, app, render_app
from bundler.cli.flags import option
from bundler.cli.groups import (
    ANY_SOURCE,
    DEFAULT_OUTPUTS,
    NO_INSTALLER_FLAGS,
    VC_AS_CONFIGURED,
    WRITE_AS_CONFIGURED,
    Installer,
    Outputs,
    Sources,
    VcRuntime,
    Writing,
    takes,
)
from bundler.cli.origins import pick_given, say_dry_run
from bundler.config.options import Options
from bundler.errors import ConfigError
from bundler.render.msbuild_props import DEFAULT_OUT
from bundler.target.profiles import DEFAULT_PROFILE

if TYPE_CHECKING:
    from bundler.closure.lock import Lock
    from bundler.ship.appconfig import AppConfig


@app.command()
@takes
def build(
    ctx: typer.Context,
    exe: Annotated[
        Path | None,
        typer.Argument(metavar="[EXE]", help="The app's .exe (default: from bundle.toml)."),
    ] = None,
    profile: Annotated[str | None, option("profile", "build")] = None,
    ort: Annotated[str | None, option("ort")] = None,
    out: Annotated[Path | None, option("out")] = None,
    search: Annotated[list[Path] | None, option("search")] = None,
    model: Annotated[
        list[Path] | None,
        option("model"),
    ] = None,
    evidence: Annotated[
        Path | None,
        option("evidence"),
    ] = None,
    ep: Annotated[list[str] | None, option("ep")] = None,
    config: Annotated[Path | None, option("config", "build")] = None,
    sources: Sources = ANY_SOURCE,
    installer: Installer = NO_INSTALLER_FLAGS,
    outputs: Outputs = DEFAULT_OUTPUTS,
    vc: VcRuntime = VC_AS_CONFIGURED,
    writing: Writing = WRITE_AS_CONFIGURED,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Deploy EXE's complete DLL closure next to it (or into --out), with a lock file and an
    Inno Setup script."""
    from bundler.cli import build_views
    from bundler.config.settings import lock_timeout, own_evidence_dir
    from bundler.pruning.evidence import evidence_dirs
    from bundler.render.engine import Templates
    from bundler.ship.pipeline import BuildOptions
    from bundler.ship.pipeline import build as run_build

    settings = _app_config(config, exe)
    picked = Options()
    chosen_exe = picked.pick("exe", exe, settings.exe)
    if chosen_exe is None:
        raise ConfigError(_no_exe(settings))
    options = BuildOptions(
        exe=chosen_exe,
        profile=picked.pick("profile", profile or ort, settings.profile, None, DEFAULT_PROFILE)
        or DEFAULT_PROFILE,
        cache_dir=sources.root(picked),
        out=picked.pick("out", out, settings.out),
        search=tuple(search or ()) + settings.search,
        installer=installer.over(settings.installer, picked),
        acquire=sources.acquire(),
        options=picked,
        **outputs.over(settings, picked),
        **vc.over(settings, picked),
        **writing.over(settings, picked),
        gpus=picked.pick("gpus", None, settings.gpus),
        models=tuple(
            picked.pick("models", tuple(model or ()) or None, settings.models or None) or ()
        ),
        evidence=picked.pick("evidence", evidence, settings.evidence),
        cuda_options=settings.cuda_options or {},
        eps=tuple(picked.pick("eps", tuple(ep or ()) or None, settings.eps) or ()),
        evidence_tables=tuple(evidence_dirs(own_evidence_dir())),
        lock_timeout=lock_timeout(),
    )
    given = {"--profile": profile, "--ort": ort, "--iss": outputs.iss, "--no-iss": outputs.no_iss}
    _validate(picked, given, settings, lambda: options.profile)
    if writing.dry_run:  # what only a variable sets, named with its origin too
        from bundler.config.settings import pick_environment
        from bundler.config.variables import DOWNLOADING, EVIDENCE_DIR

        pick_environment(picked, *DOWNLOADING, EVIDENCE_DIR)
    result = run_build(options, session.of(ctx).reporter, Templates(options.cache_dir))
    typer.echo(build_views.build_json(result) if as_json else build_views.build_report(result))


@render_app.command("iss")
@takes
def render_iss(
    folder: BundleArgument = None,
    lock: Annotated[Path | None, option("lock")] = None,
    out: Annotated[Path | None, option("out", "iss")] = None,
    config: Annotated[Path | None, option("config")] = None,
    cache_dir: Annotated[Path | None, option("cache-dir")] = None,
    installer: Installer = NO_INSTALLER_FLAGS,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Render the Inno Setup script of a built bundle from its lock file, without building.
    With --runtime-pack, the pack is the one `bundle build` compiled into the same cache
    (--cache-dir, else $BUNDLE_CACHE_DIR, else the user cache)."""
    from bundler.acquire.cache import runtime_packs
    from bundler.cli import build_views
    from bundler.cli.origins import cache_folder
    from bundler.config.settings import lock_timeout
    from bundler.render.engine import Templates
    from bundler.render.iss import ISS_NAME, write_iss

    settings = _app_config(config, None)
    lock_path, bundle = _lock_to_render(_bundle_given(folder, lock), settings)
    picked = Options()
    root = cache_folder(cache_dir, picked)
    chosen = installer.over(settings.installer, picked)
    _validate(picked, {}, settings, lambda: bundle.profile, bundle.gpu_driver is not None)
    chosen = chosen.checked()
    target = out or (settings.iss if isinstance(settings.iss, Path) else None)
    script = target or lock_path.parent / ISS_NAME
    packs = runtime_packs(root, lock_timeout=lock_timeout())
    result = write_iss(Templates(root), bundle, lock_path.parent, script, chosen, packs)
    shown = build_views.iss_json(result, picked) if as_json else build_views.iss_report(result)
    typer.echo(shown)


@render_app.command("postbuild")
def render_postbuild(
    folder: BundleArgument = None,
    lock: Annotated[Path | None, option("lock")] = None,
    out: Annotated[Path | None, option("out", "postbuild")] = None,
    config: Annotated[Path | None, option("config")] = None,
    cache_dir: Annotated[Path | None, option("cache-dir")] = None,
    project_dir: Annotated[
        Path | None,
        option("project-dir"),
    ] = None,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Render postbuild.cmd (copies the bundle's DLLs into a build's output folder) and
    postbuild.event.xml (the MSBuild post-build event calling it) from a lock file."""
    from bundler.cli import build_views
    from bundler.cli.origins import cache_folder
    from bundler.render.engine import Templates
    from bundler.render.postbuild import write_postbuild
    from bundler.render.render_settings import PostbuildSettings

    settings = _app_config(config, None)
    lock_path, bundle = _lock_to_render(_bundle_given(folder, lock), settings)
    picked = Options()
    templates = Templates(cache_folder(cache_dir, picked))
    configured = settings.postbuild.project_dir if settings.postbuild else None
    chosen = PostbuildSettings(project_dir=project_dir or configured)
    result = write_postbuild(templates, bundle, lock_path.parent, out or lock_path.parent, chosen)
    json_view = build_views.postbuild_json(result, picked)
    typer.echo(json_view if as_json else build_views.postbuild_report(result))


def _validate(
    picked: Options,
    given: Mapping[str, object],
    settings: AppConfig,
    profile: Callable[[], str],
    gpu: bool | None = None,
) -> None:
    """The validation step (bundler.config.validate) over the resolved options, before any work. The
    profile is looked up only once the options themselves pass (`gpu`: known from a lock)."""
    from bundler.config.validate import Target, check
    from bundler.target.profiles import load_profile

    def target() -> Target:
        if gpu is not None:
            return Target(profile(), gpu)
        chosen = load_profile(profile())
        return Target(chosen.name, chosen.gpu_driver is not None)

    check(picked, given, settings.path if settings.found else None, target)


def _no_exe(settings: AppConfig) -> str:
    """What `bundle build` lacks without EXE: the file it read has no [build] exe, or there
    is no bundle.toml at all."""
    if settings.found:
        return (
            f"no EXE given, and {settings.path} has no [build] exe; give the app's .exe "
            '(bundle build APP.exe), or add exe = "APP.exe" to its [build] table.'
        )
    return (
        f"no EXE given and no {settings.path.name} in {Path.cwd()}; give the app's .exe "
        "(bundle build APP.exe), or run it in a folder whose bundle.toml has [build] exe."
    )


def _bundle_given(folder: Path | None, lock: Path | None) -> Path | None:
    """The bundle a render command names: its BUNDLE argument or --lock, not two different
    ones."""
    if folder is not None and lock is not None and folder != lock:
        raise ConfigError(
            f"two bundles given: {folder} and --lock {lock}; give the bundle folder (or its "
            "lock file) once."
        )
    return folder or lock


def _lock_to_render(lock: Path | None, settings: AppConfig) -> tuple[Path, Lock]:
    """The lock a render command works from: the bundle folder or lock file given, else
    bundle.toml's output folder's."""
    from bundler.closure.lock import LOCK_NAME
    from bundler.closure.lockfile import read_lock

    lock_path = lock or _default_lock(settings)
    if lock_path.is_dir():
        lock_path = lock_path / LOCK_NAME
    bundle = read_lock(lock_path)
    if bundle is None:
        unplaced = lock is None and settings.found and not (settings.out or settings.exe)
        why = f" ({settings.path} has no [build] out or exe to find it by)" if unplaced else ""
        raise ConfigError(
            f"{lock_path}: no lock file{why}; run bundle build first, or give the bundle folder."
        )
    return lock_path, bundle


def _default_lock(settings: AppConfig) -> Path:
    """The lock of bundle.toml's output folder (else of its exe's folder), else ./"""
    from bundler.closure.lock import LOCK_NAME

    folder = settings.out or (settings.exe.parent if settings.exe else Path.cwd())
    return folder / LOCK_NAME


def _app_config(config: Path | None, exe: Path | None) -> AppConfig:
    from bundler.ship.appconfig import CONFIG_NAME, AppConfig, find_config, load_config

    path = config or find_config(exe.parent if exe else Path.cwd())
    if config is not None and not config.is_file():
        raise ConfigError(f"--config {config}: no such file.")
    return load_config(path) if path else AppConfig(path=Path(CONFIG_NAME))


@app.command()
@takes
def msbuild(
    ctx: typer.Context,
    profile: Annotated[str, option("profile")] = DEFAULT_PROFILE,
    out: Annotated[Path, option("out", "msbuild")] = DEFAULT_OUT,
    source: Annotated[str, option("source")] = "auto",
    sources: Sources = ANY_SOURCE,
    link: Annotated[bool | None, option("link")] = False,
    force: Annotated[bool, option("force")] = False,
    dry_run: Annotated[bool, option("dry-run")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Lay out a folder for Visual Studio: ORT's headers, import library and DLL closure, with
    ort-bundle.props and ort-bundle.targets to import in a .vcxproj."""
    from bundler.cli import build_views
    from bundler.cli.dry_run_views import acquire_step
    from bundler.config.settings import lock_timeout
    from bundler.render.engine import Templates
    from bundler.ship.msbuild import MsbuildOptions, lay_out
    from bundler.target.profiles import load_profile

    picked = Options()
    pick_given(ctx, picked, profile=profile, out=out, source=source, link=link, force=force)
    options = MsbuildOptions(
        profile=profile,
        cache_dir=sources.pick(ctx, picked),
        out=out,
        link=bool(link),
        force=force,
        acquire=sources.acquire(mode=source),
        lock_timeout=lock_timeout(),
    )
    if dry_run:
        laid = f"lay out {out}: ORT's headers, import library and DLL closure, its .props/.targets"
        steps = [acquire_step(load_profile(profile), options.cache_dir), laid]
        say_dry_run("msbuild", steps, picked, as_json)
        return
    result = lay_out(options, session.of(ctx).reporter, Templates(options.cache_dir))
    typer.echo(build_views.msbuild_json(result) if as_json else build_views.msbuild_report(result))
