"""Talk layer: the `bundle` command line. The only module that prints or exits.

Each command is a short script: read inputs, decide (resolve into a Plan), show a view of it.
Errors from the library arrive as BundleError and leave as one line plus a documented exit code
(README, "Exit codes"); --debug (or BUNDLE_DEBUG=1) shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler import __version__
from bundler.cli import views
from bundler.errors import BundleError, ConfigError, ExitCode, InputFileError
from bundler.profiles import DEFAULT_PROFILE
from bundler.render.msbuild import DEFAULT_OUT

if TYPE_CHECKING:
    from bundler.audit.report import AuditReport
    from bundler.lock import Lock
    from bundler.plan import Plan
    from bundler.render.iss import IssSettings
    from bundler.ship.appconfig import AppConfig

app = typer.Typer(
    help="Ship Windows apps that embed ONNX Runtime 1.19.2 with every DLL they need.",
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

_debug = {"on": os.environ.get("BUNDLE_DEBUG", "") not in ("", "0")}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bundle {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    if debug:
        _debug["on"] = True


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
AppNameOption = Annotated[
    str | None, typer.Option("--app-name", help="Installer: the app's name (default: exe name).")
]
AppVersionOption = Annotated[
    str | None,
    typer.Option("--app-version", help="Installer: the version (default: the exe's FileVersion)."),
]
PublisherOption = Annotated[
    str | None, typer.Option("--publisher", help="Installer: the publisher's name.")
]
CompressionOption = Annotated[
    str | None,
    typer.Option(
        "--iss-compression", help="Installer: Inno Setup compression (default lzma2; zip/1 fast)."
    ),
]
ShortcutOption = Annotated[
    bool | None,
    typer.Option("--shortcut/--no-shortcut", help="Installer: a Start-menu shortcut to the app."),
]
RequireGpuOption = Annotated[
    bool | None,
    typer.Option(
        "--require-gpu/--allow-cpu",
        help="Installer: a silent install fails without a good enough NVIDIA driver.",
    ),
]
LockOption = Annotated[
    Path | None,
    typer.Option("--lock", help="The bundle's lock file (default: from bundle.toml, or ./)."),
]
RenderConfigOption = Annotated[
    Path | None, typer.Option("--config", help="bundle.toml holding the render table.")
]
SourceOption = Annotated[
    str, typer.Option("--source", help="auto (url, then pip, then dir), url, pip or dir.")
]
MirrorOption = Annotated[
    list[str] | None,
    typer.Option("--mirror", help="Folder or URL holding the archives by name (repeatable)."),
]
OfflineOption = Annotated[
    bool, typer.Option("--offline", help="No network: cache, mirror folders, local installs.")
]
AllowHttpOption = Annotated[bool, typer.Option("--allow-http", help="Allow plain-http:// mirrors.")]


def _choose_cache_dir(folder: Path | None) -> Path | None:
    from bundler.acquire.cache import choose_cache_dir

    return choose_cache_dir(folder)


CacheDirOption = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Download cache (default: $BUNDLE_CACHE_DIR or the user cache).",
        callback=_choose_cache_dir,
    ),
]


@app.command()
def deps(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE", help="The app's .exe (and any plugin DLLs).")
    ],
    profile: ProfileOption = DEFAULT_PROFILE,
    search: SearchOption = None,
    as_json: JsonOption = False,
    why: Annotated[
        str | None, typer.Option("--why", help="Print every chain from a root to this DLL.")
    ] = None,
    show_system: Annotated[
        bool, typer.Option("--all", help="Show system DLLs and API sets in the tree too.")
    ] = False,
    fetch_artifacts: Annotated[
        bool,
        typer.Option("--fetch", help="Also search the profile's artifacts (fetched if needed)."),
    ] = False,
    cache_dir: CacheDirOption = None,
) -> None:
    """Resolve the complete DLL closure of FILES; exit 3 when anything is missing."""
    plan = _resolve(files, profile, search or [], fetch_artifacts, cache_dir)
    if why is not None:
        _print_why(plan, why)
    elif as_json:
        typer.echo(plan.to_json())
    else:
        typer.echo(views.TreeView(plan, show_system).render())
        typer.echo("")
        typer.echo(views.summary(plan))
    if plan.missing:
        raise typer.Exit(ExitCode.MISSING)


def _resolve(
    files: list[Path],
    profile_name: str,
    search: list[Path],
    fetch: bool = False,
    cache_dir: Path | None = None,
) -> Plan:
    """Inputs are read before any fetch, so a wrong exe fails at once, not after a download."""
    from bundler.acquire.artifacts import AcquireOptions, acquire_profile, dll_search_path
    from bundler.acquire.cache import Cache, default_cache_dir
    from bundler.cli.progress import progress_for
    from bundler.profiles import load_profile
    from bundler.resolve import read_inputs, resolve
    from bundler.system import load_system_policy

    profile = load_profile(profile_name)
    apps = read_inputs(files, profile, search)
    if fetch:
        cache = Cache(cache_dir or default_cache_dir())
        acquired = acquire_profile(profile, cache, AcquireOptions(), progress_for)
        search = search + dll_search_path(acquired)
    return resolve(apps, profile, load_system_policy(), search)


def _print_why(plan: Plan, name: str) -> None:
    if plan.file(name) is None:
        raise typer.BadParameter(
            f"{name} is not in the closure of these files for {plan.profile}.", param_hint="--why"
        )
    typer.echo(views.why(plan, name))


@app.command()
def audit(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="PATH", help="A bundle folder, its bundle.lock.json, or a .zip/.7z of it."
        ),
    ],
    profile: Annotated[
        str | None,
        typer.Option("--profile", "-p", help="Target profile (default: the lock file's)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Warnings fail the audit too (exit 18).")
    ] = False,
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            metavar="CODE[:FILE]",
            help="Suppress a finding code (or name), optionally only for files matching a "
            "pattern, e.g. BA303:onnxruntime_providers_tensorrt.dll. Repeatable.",
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write a JUnit XML report (one case per finding code)."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Also write a self-contained HTML report with the graph."),
    ] = None,
    run: Annotated[
        bool,
        typer.Option("--run", help="Load proof: start the app (under Wine off Windows) too."),
    ] = False,
    signatures: Annotated[
        bool,
        typer.Option("--signatures", help="Also verify the DLLs' Authenticode signatures."),
    ] = False,
    run_args: Annotated[
        list[str] | None,
        typer.Option("--run-arg", metavar="ARG", help="An argument for the app with --run."),
    ] = None,
    explain_dll: Annotated[
        str | None,
        typer.Option("--explain", metavar="DLL", help="Why DLL would fail to load (error 126)."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Hash every file the lock file lists (without it, sizes and time stamps are "
            "compared; PATH being the lock file implies it).",
        ),
    ] = False,
) -> None:
    """Check a shipped folder as the target machine will see it; exit 17 on errors."""
    from bundler.audit.junit import write_junit
    from bundler.audit.run import as_archived, with_signatures
    from bundler.audit.run import audit as run_audit
    from bundler.audit.suppressions import parse_suppression

    rules = [parse_suppression(text) for text in ignore or ()]
    with _audit_target(path) as (target, inner):
        report = run_audit(target, profile, rules, verify=verify)
        if signatures:
            report = with_signatures(report, rules)
        if run:
            from bundler.audit.loadrun import prove_load

            report = prove_load(
                report, tuple(run_args or ()), ignore=rules, note=lambda m: typer.echo(m, err=True)
            )
        if inner is not None:
            report = as_archived(report, path, inner)
    if junit is not None:
        write_junit(report, junit, strict)
    if html is not None:
        from bundler.audit.html import write_html

        write_html(report, html)
    if explain_dll is not None:
        _print_explanation(report, explain_dll, as_json)
        return
    typer.echo(views.audit_json(report) if as_json else views.audit_table(report))
    code = report.exit_code(strict)
    if code:
        raise typer.Exit(code)


@contextmanager
def _audit_target(path: Path) -> Iterator[tuple[Path, str | None]]:
    """PATH itself, or for an archive its unpacked folder (and the folder's path inside)."""
    from bundler.audit.run import is_archive, unpacked

    if not is_archive(path):
        yield path, None
        return
    with unpacked(path) as (target, inner):
        yield target, inner


def _print_explanation(report: AuditReport, dll: str, as_json: bool) -> None:
    """0 when DLL's whole closure is in the folder, the audit-error code when not."""
    from bundler.audit.explain import explain

    explanation = explain(report.plan, report.profile, dll)
    if explanation is None:
        raise typer.BadParameter(
            f"{dll} is neither in {report.folder} nor needed by what is there "
            f"({report.profile.name}).",
            param_hint="--explain",
        )
    shown = views.explain_json if as_json else views.explain_text
    typer.echo(shown(explanation, report.folder))
    if not explanation.loads:
        raise typer.Exit(ExitCode.AUDIT_ERRORS)


@app.command()
def fetch(
    profile: ProfileOption = DEFAULT_PROFILE,
    source: SourceOption = "auto",
    cache_dir: CacheDirOption = None,
    mirror: MirrorOption = None,
    offline: OfflineOption = False,
    allow_http: AllowHttpOption = False,
    verify: Annotated[bool, typer.Option("--verify", help="Re-hash cached files too.")] = False,
    search: SearchOption = None,
    to: Annotated[
        Path | None,
        typer.Option("--to", help="Also put every archive here (a mirror for offline agents)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Acquire and verify every artifact of a profile; print what came from where."""
    from bundler.acquire.artifacts import AcquireOptions, acquire_profile, export_archives
    from bundler.acquire.cache import Cache, default_cache_dir
    from bundler.acquire.download import DownloadPolicy
    from bundler.cli.progress import progress_for
    from bundler.profiles import load_profile

    options = AcquireOptions(
        mode=source,
        mirrors=tuple(mirror or ()),
        offline=offline,
        verify=verify,
        search=tuple(search or ()),
        policy=DownloadPolicy(allow_http=allow_http),
    )
    cache = Cache(cache_dir or default_cache_dir())
    acquired = acquire_profile(load_profile(profile), cache, options, progress_for)
    if to is not None:
        export_archives(acquired, cache, to)
    typer.echo(views.acquired_json(acquired) if as_json else views.acquired_table(acquired))


@app.command()
def build(
    exe: Annotated[
        Path | None,
        typer.Argument(metavar="[EXE]", help="The app's .exe (default: from bundle.toml)."),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile", "-p", help="Target profile: a name, a .toml file, or an ORT release."
        ),
    ] = None,
    ort: Annotated[
        str | None,
        typer.Option("--ort", help="An ORT release, e.g. 1.31.1: its shipped GPU profile."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default: the exe's folder).")
    ] = None,
    search: SearchOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the plan, write nothing.")
    ] = False,
    clean: Annotated[
        bool, typer.Option("--clean", help="First remove the files an earlier build wrote.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files bundle did not write.")
    ] = False,
    link: Annotated[
        bool | None, typer.Option("--link/--copy", help="Hard-link files from the cache.")
    ] = None,
    locked: Annotated[
        bool, typer.Option("--locked", help="Fail if the result differs from bundle.lock.json.")
    ] = False,
    vc_runtime: Annotated[
        str | None, typer.Option("--vc-runtime", help="app-local or installer.")
    ] = None,
    vc_redist: Annotated[
        Path | None, typer.Option("--vc-redist", help="vc_redist.x64.exe for installer mode.")
    ] = None,
    sbom: Annotated[
        bool | None, typer.Option("--sbom/--no-sbom", help="Write a CycloneDX SBOM.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="bundle.toml to read (default: beside EXE).")
    ] = None,
    cache_dir: CacheDirOption = None,
    mirror: MirrorOption = None,
    offline: OfflineOption = False,
    allow_http: AllowHttpOption = False,
    iss: Annotated[
        Path | None,
        typer.Option("--iss", help="Write the Inno Setup script here (default: OUT/setup.iss)."),
    ] = None,
    no_iss: Annotated[bool, typer.Option("--no-iss", help="Write no Inno Setup script.")] = False,
    no_postbuild: Annotated[
        bool,
        typer.Option("--no-postbuild", help="Write no postbuild.cmd / postbuild.event.xml."),
    ] = False,
    app_name: AppNameOption = None,
    app_version: AppVersionOption = None,
    publisher: PublisherOption = None,
    iss_compression: CompressionOption = None,
    shortcut: ShortcutOption = None,
    require_gpu: RequireGpuOption = None,
    archive: Annotated[
        Path | None,
        typer.Option("--archive", help="Also pack the bundle into this .zip or .7z file."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Deploy EXE's complete DLL closure next to it (or into --out), with a lock file and an
    Inno Setup script."""
    from bundler.acquire.artifacts import AcquireOptions
    from bundler.acquire.cache import default_cache_dir
    from bundler.acquire.download import DownloadPolicy
    from bundler.cli.progress import progress_for
    from bundler.ship.build import BuildOptions
    from bundler.ship.build import build as run_build

    settings = _app_config(config, exe)
    chosen_exe = exe or settings.exe
    if chosen_exe is None:
        raise ConfigError("no EXE given and no bundle.toml with [build] exe in this folder.")
    options = BuildOptions(
        exe=chosen_exe,
        profile=profile or ort or settings.profile or DEFAULT_PROFILE,
        cache_dir=cache_dir or default_cache_dir(),
        out=out or settings.out,
        search=tuple(search or ()) + settings.search,
        vc_runtime=vc_runtime or settings.vc_runtime,
        vc_redist=vc_redist or settings.vc_redist,
        dry_run=dry_run,
        clean=clean,
        force=force,
        link=bool(link if link is not None else settings.link),
        locked=locked,
        sbom=bool(sbom if sbom is not None else settings.sbom),
        iss=False if no_iss else (iss or (settings.iss if settings.iss is not None else True)),
        installer=_installer(
            settings.installer,
            app_name,
            app_version,
            publisher,
            iss_compression,
            shortcut,
            require_gpu,
        ),
        archive=archive or settings.archive,
        postbuild=None if no_postbuild else settings.postbuild,
        acquire=AcquireOptions(
            mirrors=tuple(mirror or ()),
            offline=offline,
            policy=DownloadPolicy(allow_http=allow_http),
        ),
    )
    result = run_build(options, progress_for)
    typer.echo(views.build_json(result) if as_json else views.build_report(result))


def _installer(
    base: IssSettings,
    app_name: str | None,
    app_version: str | None,
    publisher: str | None,
    compression: str | None,
    shortcut: bool | None,
    require_gpu: bool | None,
) -> IssSettings:
    """bundle.toml's [render] settings with the command line's flags on top."""
    return replace(
        base,
        app_name=app_name if app_name is not None else base.app_name,
        app_version=app_version if app_version is not None else base.app_version,
        publisher=publisher if publisher is not None else base.publisher,
        compression=compression if compression is not None else base.compression,
        shortcut=shortcut if shortcut is not None else base.shortcut,
        require_gpu=require_gpu if require_gpu is not None else base.require_gpu,
    )


@render_app.command("iss")
def render_iss(
    lock: LockOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where to write the script (default: beside the lock file)."),
    ] = None,
    config: RenderConfigOption = None,
    app_name: AppNameOption = None,
    app_version: AppVersionOption = None,
    publisher: PublisherOption = None,
    iss_compression: CompressionOption = None,
    shortcut: ShortcutOption = None,
    require_gpu: RequireGpuOption = None,
) -> None:
    """Render the Inno Setup script of a built bundle from its lock file, without building."""
    from bundler.render.iss import ISS_NAME, write_iss

    settings = _app_config(config, None)
    lock_path, bundle = _lock_to_render(lock, settings)
    installer = _installer(
        settings.installer,
        app_name,
        app_version,
        publisher,
        iss_compression,
        shortcut,
        require_gpu,
    ).checked()
    target = out or (settings.iss if isinstance(settings.iss, Path) else None)
    result = write_iss(bundle, lock_path.parent, target or lock_path.parent / ISS_NAME, installer)
    typer.echo(views.iss_report(result))


@render_app.command("postbuild")
def render_postbuild(
    lock: LockOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="The folder for both files (default: the lock file's)."),
    ] = None,
    config: RenderConfigOption = None,
    project_dir: Annotated[
        Path | None,
        typer.Option(
            "--project-dir", help="The .vcxproj's folder: the event names the script from it."
        ),
    ] = None,
) -> None:
    """Render postbuild.cmd (copies the bundle's DLLs into a build's output folder) and
    postbuild.event.xml (the MSBuild post-build event calling it) from a lock file."""
    from bundler.render.postbuild import PostbuildSettings, write_postbuild

    settings = _app_config(config, None)
    lock_path, bundle = _lock_to_render(lock, settings)
    configured = settings.postbuild.project_dir if settings.postbuild else None
    chosen = PostbuildSettings(project_dir=project_dir or configured)
    result = write_postbuild(bundle, lock_path.parent, out or lock_path.parent, chosen)
    typer.echo(views.postbuild_report(result))


def _lock_to_render(lock: Path | None, settings: AppConfig) -> tuple[Path, Lock]:
    """The lock a render command works from: --lock, else bundle.toml's output folder's."""
    from bundler.lock import read_lock

    lock_path = lock or _default_lock(settings)
    bundle = read_lock(lock_path)
    if bundle is None:
        raise ConfigError(f"{lock_path}: no lock file; run bundle build first, or give --lock.")
    return lock_path, bundle


def _default_lock(settings: AppConfig) -> Path:
    """The lock of bundle.toml's output folder (else of its exe's folder), else ./"""
    from bundler.lock import LOCK_NAME

    folder = settings.out or (settings.exe.parent if settings.exe else Path.cwd())
    return folder / LOCK_NAME


def _app_config(config: Path | None, exe: Path | None) -> AppConfig:
    from bundler.ship.appconfig import CONFIG_NAME, AppConfig, find_config, load_config

    path = config or find_config(exe.parent if exe else Path.cwd())
    if config is not None and not config.is_file():
        raise ConfigError(f"--config {config}: no such file.")
    return load_config(path) if path else AppConfig(path=Path(CONFIG_NAME))


@app.command()
def msbuild(
    profile: ProfileOption = DEFAULT_PROFILE,
    out: Annotated[
        Path, typer.Option("--out", help="The folder to lay out (default: ./ort-bundle).")
    ] = DEFAULT_OUT,
    source: SourceOption = "auto",
    cache_dir: CacheDirOption = None,
    mirror: MirrorOption = None,
    offline: OfflineOption = False,
    allow_http: AllowHttpOption = False,
    link: Annotated[
        bool, typer.Option("--link/--copy", help="Hard-link files from the cache.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files bundle did not write.")
    ] = False,
) -> None:
    """Lay out a folder for Visual Studio: ORT's headers, import library and DLL closure, with
    ort-bundle.props and ort-bundle.targets to import in a .vcxproj."""
    from bundler.acquire.artifacts import AcquireOptions
    from bundler.acquire.cache import default_cache_dir
    from bundler.acquire.download import DownloadPolicy
    from bundler.cli.progress import progress_for
    from bundler.ship.msbuild import MsbuildOptions, lay_out

    options = MsbuildOptions(
        profile=profile,
        cache_dir=cache_dir or default_cache_dir(),
        out=out,
        link=link,
        force=force,
        acquire=AcquireOptions(
            mode=source,
            mirrors=tuple(mirror or ()),
            offline=offline,
            policy=DownloadPolicy(allow_http=allow_http),
        ),
    )
    typer.echo(views.msbuild_report(lay_out(options, progress_for)))


@cache_app.command("list")
def cache_list(cache_dir: CacheDirOption = None) -> None:
    """List the verified archives in the cache."""
    from bundler.acquire.cache import Cache, default_cache_dir

    cache = Cache(cache_dir or default_cache_dir())
    typer.echo(views.cache_table(cache.root, cache.entries()))


@cache_app.command("clean")
def cache_clean(
    cache_dir: CacheDirOption = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Also remove the verified archives.")
    ] = False,
) -> None:
    """Remove partial downloads, extracted trees and kept templates (--all: the archives too)."""
    from bundler.acquire.cache import Cache, default_cache_dir

    cache = Cache(cache_dir or default_cache_dir())
    freed = cache.clean(everything)
    typer.echo(f"freed {views.human_size(freed)} in {cache.root}")


@profiles_app.callback(invoke_without_command=True)
def profiles_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the shipped target profiles: release, flavour, CUDA and cuDNN, size."""
    from bundler.profiles import available_profiles, load_profile_file
    from bundler.rules.derive.catalogue import entry

    if ctx.invoked_subcommand is None:
        entries = [
            entry(load_profile_file(path), path.read_text(encoding="utf-8"))
            for path in available_profiles().values()
        ]
        shown = views.profile_list_json if as_json else views.profile_table
        typer.echo(shown(entries, DEFAULT_PROFILE))


@profiles_app.command("show")
def profiles_show(
    name: Annotated[str, typer.Argument(help="Profile name or .toml path.")],
    as_json: JsonOption = False,
) -> None:
    """Print one profile in full."""
    from bundler.profiles import load_profile

    profile = load_profile(name)
    typer.echo(views.profile_json(profile) if as_json else views.profile_detail(profile))


@profiles_app.command("check")
def profiles_check(
    name: Annotated[str, typer.Argument(help="Profile name or .toml path.")],
    source: SourceOption = "auto",
    cache_dir: CacheDirOption = None,
    mirror: MirrorOption = None,
    offline: OfflineOption = False,
    search: SearchOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Scan a profile's DLLs and compare what they load at run time with its rules."""
    from bundler.acquire.artifacts import AcquireOptions, acquire_profile, dll_search_path
    from bundler.acquire.cache import Cache, default_cache_dir
    from bundler.cli.progress import progress_for
    from bundler.fit import require_resolved
    from bundler.profiles import load_profile
    from bundler.resolve import resolve
    from bundler.rules.drift import check_profile
    from bundler.rules.scan import profile_binaries, scan_all
    from bundler.system import load_system_policy

    profile = load_profile(name)
    options = AcquireOptions(
        mode=source, mirrors=tuple(mirror or ()), offline=offline, search=tuple(search or ())
    )
    cache = Cache(cache_dir or default_cache_dir())
    acquired = acquire_profile(profile, cache, options, progress_for)
    provides = [entry for artifact in profile.artifacts for entry in artifact.provides]
    folders = dll_search_path(acquired)
    policy = load_system_policy()
    require_resolved(resolve([], profile, policy, folders), profile, f"profile {profile.name}")
    files = profile_binaries(provides, folders)
    results = scan_all(files, profile.driver_dlls, policy)
    report = check_profile(profile, results, profile.scan_exceptions)
    typer.echo(views.drift_json(report) if as_json else views.drift_table(report))
    if report.failures:
        raise typer.Exit(ExitCode.PROFILE)


@profiles_app.command("outdated")
def profiles_outdated(
    index_url: Annotated[
        str | None,
        typer.Option(
            "--index-url", help="PEP 691 package index (default: $PIP_INDEX_URL or PyPI)."
        ),
    ] = None,
    allow_http: AllowHttpOption = False,
    as_json: JsonOption = False,
) -> None:
    """Ask the package index which ORT and CUDA/cuDNN releases the shipped profiles miss."""
    from bundler.acquire.download import DownloadPolicy
    from bundler.rules.derive.index import default_index_url
    from bundler.rules.derive.outdated import outdated

    report = outdated(index_url or default_index_url(), DownloadPolicy(allow_http=allow_http))
    typer.echo(views.outdated_json(report) if as_json else views.outdated_text(report))


@profiles_app.command("new")
def profiles_new(
    ort: Annotated[str, typer.Option("--ort", help="The ORT release, e.g. 1.31.1, or latest.")],
    flavour: Annotated[
        str,
        typer.Option(
            "--flavour",
            help="gpu (the GPU flavour of the CUDA major the wheel states), gpu-cuda12, "
            "gpu-cuda13, cpu, directml, or a flavour .toml.",
        ),
    ] = "gpu",
    components: Annotated[
        str | None,
        typer.Option(
            "--components",
            help="The flavour's component set (default: the first that fits the wheel's CUDA "
            "build, preferring the flavour's default).",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the profile here (default: stdout).")
    ] = None,
    index_url: Annotated[
        str | None,
        typer.Option(
            "--index-url", help="PEP 691 package index (default: $PIP_INDEX_URL or PyPI)."
        ),
    ] = None,
    cache_dir: CacheDirOption = None,
    allow_http: AllowHttpOption = False,
) -> None:
    """Derive a profile for an ORT release from its wheels: pins, DLLs, roots, rules."""
    from bundler.acquire.artifacts import AcquireOptions
    from bundler.acquire.cache import Cache, default_cache_dir
    from bundler.acquire.download import DownloadPolicy
    from bundler.cli.progress import progress_for
    from bundler.render.engine import write_text
    from bundler.rules.derive import NewProfile, derive_profile
    from bundler.rules.derive.flavours import load_flavour
    from bundler.rules.derive.index import default_index_url, latest_release

    auto = flavour == "gpu"
    chosen = load_flavour("gpu-cuda12" if auto else flavour)  # gpu: the package to fetch
    index = index_url or default_index_url()
    policy = DownloadPolicy(allow_http=allow_http)
    if ort == "latest":
        ort = latest_release(chosen, index, policy)
    request = NewProfile(
        ort=ort,
        flavour=chosen,
        components=components,
        index_url=index,
        policy=policy,
        command=f"bundle profiles new --ort {ort} --flavour {'' if auto else chosen.name}",
        cuda_from_build=auto,
    )
    options = AcquireOptions(mode="pip", policy=request.policy)
    cache = Cache(cache_dir or default_cache_dir())
    derived = derive_profile(request, cache, options, progress_for)
    if out is None:
        typer.echo(derived.text, nl=False)
        return
    write_text(out, derived.text)  # atomic; OutputError when it cannot be written
    typer.echo(f"wrote {out} ({derived.name}): review it, then bundle build --profile {out}")


@app.command()
def scan(
    dlls: Annotated[list[Path], typer.Argument(metavar="DLL...", help="The DLLs to scan.")],
    pool: Annotated[
        list[Path] | None,
        typer.Option(
            "--pool",
            metavar="DIR",
            help="Also match names against the DLLs in DIR (default: the DLLs' own folders).",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", "-p", help="Take the GPU driver DLL names from this profile."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Find the DLLs a binary may load at run time (LoadLibrary), with the evidence."""
    from bundler.profiles import load_profile
    from bundler.rules.scan import Pool
    from bundler.rules.scan import scan as scan_file
    from bundler.system import load_system_policy

    for dll in dlls:
        if not dll.is_file():
            raise InputFileError(f"{dll}: not a file; give the DLLs to scan.")
    folders = dict.fromkeys([*(dll.parent for dll in dlls), *(pool or ())])
    drivers = load_profile(profile or DEFAULT_PROFILE).driver_dlls
    known = Pool.of(list(folders), drivers)
    policy = load_system_policy()
    results = [scan_file(dll, known, policy) for dll in dlls]
    typer.echo(views.scan_json(results) if as_json else views.scan_table(results))


def main() -> None:
    """Entry point: run the CLI and map library errors onto the exit-code table. Typer itself
    handles usage errors (exit 2) and typer.Exit; everything ends in SystemExit."""
    from bundler import notes

    notes.set_sink(lambda message: typer.echo(message, err=True))
    try:
        try:
            app()
        finally:
            if "bundler.cli.progress" in sys.modules:  # imported by commands that draw bars
                sys.modules["bundler.cli.progress"].stop_all()
    except BundleError as exc:
        if _debug["on"]:
            traceback.print_exc()
        typer.echo(f"error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except Exception:
        if _debug["on"]:
            raise
        error = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        typer.echo(f"internal error: {error}; rerun with --debug and report it.", err=True)
        sys.exit(ExitCode.INTERNAL)
