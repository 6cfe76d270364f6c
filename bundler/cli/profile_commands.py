"""Talk layer: `bundle profiles` (list, show, check, outdated, new)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler.cli import session
from bundler.cli.app import profiles_app
from bundler.cli.flags import option
from bundler.cli.groups import ANY_SOURCE, Sources, download_policy, takes
from bundler.cli.origins import cache_folder, pick_given, say_dry_run
from bundler.config.options import Options
from bundler.errors import ExitCode
from bundler.target.profiles import DEFAULT_PROFILE

if TYPE_CHECKING:
    from bundler.rules.derive import NewProfile
    from bundler.rules.derive.flavours import Flavour


@profiles_app.callback(invoke_without_command=True)
def profiles_list(ctx: typer.Context, as_json: Annotated[bool, option("json")] = False) -> None:
    """List the shipped target profiles (release, flavour, CUDA and cuDNN, size) and the
    execution-provider packs a build can add with --ep."""
    from bundler.cli import profile_views
    from bundler.eps.plugins import available_packs, load_pack
    from bundler.rules.derive.catalogue import entry
    from bundler.target.profiles import available_profiles, load_profile_file

    if ctx.invoked_subcommand is None:
        entries = [
            entry(load_profile_file(path), path.read_text(encoding="utf-8"))
            for path in available_profiles().values()
        ]
        packs = [load_pack(name) for name in available_packs()]
        shown = profile_views.profile_list_json if as_json else profile_views.profile_table
        typer.echo(shown(entries, DEFAULT_PROFILE, packs))


@profiles_app.command("show")
def profiles_show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Profile name or .toml path.")],
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Print one profile in full."""
    from bundler.cli import profile_views
    from bundler.target.profiles import load_profile

    profile = load_profile(name)
    typer.echo(
        profile_views.profile_json(profile) if as_json else profile_views.profile_detail(profile)
    )


@profiles_app.command("check")
@takes
def profiles_check(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Profile name or .toml path.")],
    source: Annotated[str, option("source")] = "auto",
    sources: Sources = ANY_SOURCE,
    search: Annotated[list[Path] | None, option("search")] = None,
    dry_run: Annotated[bool, option("dry-run")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Scan a profile's DLLs and compare what they load at run time with its rules."""
    from bundler.acquire.acquired import dll_search_path
    from bundler.acquire.artifacts import acquire_profile
    from bundler.cli import profile_views
    from bundler.cli.dry_run_views import acquire_step
    from bundler.closure.fit import require_resolved
    from bundler.closure.resolve import resolve
    from bundler.rules.drift import check_profile
    from bundler.rules.scan import profile_binaries, scan_all
    from bundler.target.profiles import load_profile
    from bundler.target.system import load_system_policy

    profile = load_profile(name)
    options = sources.acquire(mode=source, search=tuple(search or ()))
    if dry_run:
        picked = Options()
        pick_given(ctx, picked, source=source, search=search)
        acquiring = acquire_step(profile, sources.pick(ctx, picked))
        checking = "scan its DLLs for what they load at run time and compare that with its rules"
        say_dry_run("profiles check", [acquiring, checking], picked, as_json)
        return
    reporter = session.of(ctx).reporter
    cache = sources.cache(reporter)
    acquired = acquire_profile(profile, cache, options, reporter)
    provides = [entry for artifact in profile.artifacts for entry in artifact.provides]
    folders = dll_search_path(acquired)
    policy = load_system_policy()
    require_resolved(resolve([], profile, policy, folders), profile, f"profile {profile.name}")
    files = profile_binaries(provides, folders)
    results = scan_all(files, profile.driver_dlls, policy)
    report = check_profile(profile, results, profile.scan_exceptions)
    typer.echo(profile_views.drift_json(report) if as_json else profile_views.drift_table(report))
    if report.failures:
        raise typer.Exit(ExitCode.PROFILE)


@profiles_app.command("outdated")
def profiles_outdated(
    index_url: Annotated[str | None, option("index-url")] = None,
    allow_http: Annotated[bool, option("allow-http")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Ask the package index which ORT and CUDA/cuDNN releases the shipped profiles miss, and
    list the newest EP packs; exit 24 when the catalogue is behind."""
    from bundler.cli import profile_views
    from bundler.rules.derive.outdated import outdated

    index = _index(index_url, Options())
    report = outdated(index, download_policy(allow_http))
    typer.echo(
        profile_views.outdated_json(report) if as_json else profile_views.outdated_text(report)
    )
    if not report.current:
        raise typer.Exit(ExitCode.CATALOGUE_BEHIND)


@profiles_app.command("new")
def profiles_new(
    ctx: typer.Context,
    ort: Annotated[str, option("ort", "new")],
    flavour: Annotated[
        str,
        option("flavour"),
    ] = "gpu",
    components: Annotated[
        str | None,
        option("components"),
    ] = None,
    out: Annotated[Path | None, option("out", "profile")] = None,
    index_url: Annotated[str | None, option("index-url")] = None,
    cache_dir: Annotated[Path | None, option("cache-dir")] = None,
    allow_http: Annotated[bool, option("allow-http")] = False,
    dry_run: Annotated[bool, option("dry-run")] = False,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Derive a profile for an ORT release from its wheels: pins, DLLs, roots, rules."""
    from bundler.acquire.artifacts import AcquireOptions
    from bundler.acquire.cache import Cache
    from bundler.cli import profile_views
    from bundler.config.settings import lock_timeout
    from bundler.rules.derive import derive_profile
    from bundler.rules.derive.flavours import load_flavour

    picked = Options()
    given = {"ort": ort, "flavour": flavour, "components": components, "out": out}
    pick_given(ctx, picked, **given, allow_http=allow_http)
    index, root = _index(index_url, picked), cache_folder(cache_dir, picked)
    chosen = load_flavour("gpu-cuda12" if flavour == "gpu" else flavour)  # gpu: the package
    if dry_run:
        from bundler.config.settings import pick_environment
        from bundler.config.variables import DOWNLOADING

        pick_environment(picked, *DOWNLOADING)
        steps = _new_steps(chosen.ort.package, ort, flavour, index, root, out)
        say_dry_run("profiles new", steps, picked, as_json)
        return
    request = _new_request(chosen, ort, flavour == "gpu", components, index, allow_http)
    options = AcquireOptions(mode="pip", policy=request.policy)
    reporter = session.of(ctx).reporter
    cache = Cache(root, reporter, lock_timeout=lock_timeout())
    derived = derive_profile(request, cache, options, reporter)
    if out is not None:
        from bundler.render.engine import write_text

        write_text(out, derived.text)  # atomic; OutputError when it cannot be written
    if as_json:
        typer.echo(profile_views.profile_new_json(derived, out))
    elif out is None:
        typer.echo(derived.text, nl=False)
    else:
        typer.echo(f"wrote {out} ({derived.name}): review it, then bundle build --profile {out}")


def _new_request(
    flavour: Flavour, ort: str, auto: bool, components: str | None, index: str, http: bool
) -> NewProfile:
    """What `bundle profiles new` derives: --ort latest is the index's newest release; `auto`
    (--flavour gpu): the wheel's own CUDA major picks the GPU flavour."""
    from bundler.rules.derive import NewProfile
    from bundler.rules.derive.index import latest_release, newest_build

    policy = download_policy(http)
    if ort == "latest":
        ort = latest_release(flavour, index, policy)
    elif flavour.build_stamped and ort.count(".") == 2:
        ort = newest_build(flavour, ort, index, policy)  # 1.30.0 -> 1.30.0.202609102321
    return NewProfile(
        ort=ort,
        flavour=flavour,
        components=components,
        index_url=index,
        policy=policy,
        command=f"bundle profiles new --ort {ort} --flavour {'' if auto else flavour.name}",
        cuda_from_build=auto,
    )


def _index(flag: str | None, picked: Options) -> str:
    """The package index: --index-url, else $PIP_INDEX_URL, else PyPI's (as pip reads them),
    its origin kept in `picked`."""
    from bundler.config.environment import PIP_INDEX_ENV, pip_index_url
    from bundler.rules.derive.index import PYPI_SIMPLE

    named = (PIP_INDEX_ENV, pip_index_url())
    return picked.pick("index_url", flag, env=named, default=PYPI_SIMPLE) or PYPI_SIMPLE


def _new_steps(
    package: str, ort: str, flavour: str, index: str, cache: Path, out: Path | None
) -> list[str]:
    """What `bundle profiles new` would do, in its order (bundler.rules.derive)."""
    release = f"the newest {package} release" if ort == "latest" else f"{package} {ort}"
    return [
        f"find {release}'s wheel on {index}",
        f"download it and the wheels of flavour {flavour}'s fitting component set into {cache}",
        f"derive the profile from their DLLs and {f'write it to {out}' if out else 'print it'}",
    ]
