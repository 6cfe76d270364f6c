"""Talk layer: option groups that several commands share, each declared once as a dataclass.

typer has no option groups, so `takes` stands in for one: a command names a parameter of a group's
type, and the command line shows the group's fields as options in its place. The command receives
one group value, never the loose flags. A group of one command alone is declared beside it
(`bundle measure`'s ModelRun) and taken the same way.
"""

from __future__ import annotations

import copy
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

import typer

from bundler.cli.flags import grouped

if TYPE_CHECKING:
    from bundler.acquire.artifacts import AcquireOptions
    from bundler.acquire.cache import Cache
    from bundler.acquire.download import DownloadPolicy
    from bundler.config.options import Options
    from bundler.render.render_settings import IssSettings
    from bundler.reporter import Reporter
    from bundler.ship.appconfig import AppConfig

Command = TypeVar("Command", bound=Callable[..., Any])


@dataclass(frozen=True)
class Sources:
    """Where a command's archives come from: --cache-dir, --mirror, --offline, --allow-http."""

    panel: ClassVar[str] = "Where archives come from"
    cache_dir: Path | None = grouped("cache-dir", None)
    mirror: list[str] | None = grouped("mirror", None)
    offline: bool = grouped("offline", False)
    allow_http: bool = grouped("allow-http", False)

    def root(self, picked: Options | None = None) -> Path:
        """The command's cache folder: --cache-dir, else $BUNDLE_CACHE_DIR, else the user's,
        with its origin kept in `picked` (bundler.cli.origins)."""
        from bundler.cli.origins import cache_folder
        from bundler.config.options import Options

        return cache_folder(self.cache_dir, picked or Options())

    def cache(self, reporter: Reporter) -> Cache:
        """The command's download cache (`root`), waiting for another process's lock there for
        at most $BUNDLE_LOCK_TIMEOUT, read here once (bundler.config.settings)."""
        from bundler.acquire.cache import Cache
        from bundler.config.settings import lock_timeout

        return Cache(self.root(), reporter, lock_timeout=lock_timeout())

    def pick(self, ctx: typer.Context, picked: Options) -> Path:
        """The cache folder, --mirror, --offline and --allow-http, and the downloads' own
        variables ($BUNDLE_HTTP_TIMEOUT, ...), with their origins, for a dry run to show."""
        from bundler.cli.origins import pick_given
        from bundler.config.settings import pick_environment
        from bundler.config.variables import DOWNLOADING

        given = {"mirror": self.mirror, "offline": self.offline, "allow_http": self.allow_http}
        pick_given(ctx, picked, **given)
        pick_environment(picked, *DOWNLOADING)
        return self.root(picked)

    def acquire(self, **more: Any) -> AcquireOptions:
        """The acquisition settings these flags ask for (`more`: mode, verify, search); the
        command's --source (mode) is validated here, before any work."""
        from bundler.acquire.artifacts import AcquireOptions
        from bundler.config.validate import check_choice

        if "mode" in more:
            check_choice("source", more["mode"], "--source")
        return AcquireOptions(
            mirrors=tuple(self.mirror or ()),
            offline=self.offline,
            policy=download_policy(self.allow_http),
            **more,
        )


def download_policy(allow_http: bool) -> DownloadPolicy:
    """The download policy of a command: --allow-http, and the limits the environment sets
    ($BUNDLE_HTTP_TIMEOUT, ...), read here once and handed down (bundler.config.settings)."""
    from bundler.acquire.download import DownloadPolicy
    from bundler.config.settings import http_limits

    return DownloadPolicy(allow_http=allow_http, **asdict(http_limits()))


@dataclass(frozen=True)
class Installer:
    """The installer flags of `build` and `render iss`, over bundle.toml's [render] table."""

    panel: ClassVar[str] = "Installer (setup.iss)"
    app_name: str | None = grouped("app-name", None)
    app_version: str | None = grouped("app-version", None)
    publisher: str | None = grouped("publisher", None)
    iss_compression: str | None = grouped("iss-compression", None)
    shortcut: bool | None = grouped("shortcut", None)
    require_gpu: bool | None = grouped("require-gpu", None)
    runtime_pack: bool | None = grouped("runtime-pack", None)
    pack_url: str | None = grouped("pack-url", None)
    pack_part_mb: int | None = grouped("pack-part-mb", None)
    require_ep: list[str] | None = grouped("require-ep", None)

    def over(self, base: IssSettings, picked: Options | None = None) -> IssSettings:
        """bundle.toml's [render] settings with these flags on top (one resolver)."""
        from bundler.config.options import Options
        from bundler.config.settings import source_date

        pick = (picked or Options()).pick
        return replace(
            base,
            source_date=source_date(),
            app_name=pick("app_name", self.app_name, base.app_name),
            app_version=pick("app_version", self.app_version, base.app_version),
            publisher=pick("publisher", self.publisher, base.publisher),
            compression=pick("iss_compression", self.iss_compression, base.compression)
            or base.compression,
            shortcut=bool(pick("shortcut", self.shortcut, base.shortcut)),
            require_gpu=pick("require_gpu", self.require_gpu, base.require_gpu),
            runtime_pack=bool(pick("runtime_pack", self.runtime_pack, base.runtime_pack)),
            pack_url=pick("pack_url", self.pack_url, base.pack_url),
            pack_part_mb=_given(
                pick("pack_part_mb", self.pack_part_mb, base.pack_part_mb), base.pack_part_mb
            ),
            require_eps=tuple(
                pick("require_eps", tuple(self.require_ep or ()) or None, base.require_eps or None)
                or ()
            ),
        )


@dataclass(frozen=True)
class Outputs:
    """The files `build` writes besides the DLLs and the lock, over bundle.toml's [build]."""

    panel: ClassVar[str] = "What the build writes besides the DLLs"
    iss: Path | None = grouped("iss", None)
    no_iss: bool = grouped("no-iss", False)
    no_postbuild: bool = grouped("no-postbuild", False)
    sbom: bool | None = grouped("sbom", None)
    archive: Path | None = grouped("archive", None)
    no_doctor: bool = grouped("no-doctor", False)

    def over(self, settings: AppConfig, picked: Options) -> dict[str, Any]:
        """BuildOptions' output fields: these flags over bundle.toml's (one resolver)."""
        pick = picked.pick
        return {
            "iss": False
            if self.no_iss
            else pick("iss", self.iss, settings.iss, None, True) or False,
            "sbom": bool(pick("sbom", self.sbom, settings.sbom, None, False)),
            "archive": pick("archive", self.archive, settings.archive),
            "postbuild": None if self.no_postbuild else settings.postbuild,
            "doctor": bool(
                pick("doctor", False if self.no_doctor else None, settings.doctor, None, True)
            ),
        }


@dataclass(frozen=True)
class VcRuntime:
    """How `build` ships the VC++ runtime, over bundle.toml's [build]."""

    panel: ClassVar[str] = "VC++ runtime"
    vc_runtime: str | None = grouped("vc-runtime", None)
    vc_redist: Path | None = grouped("vc-redist", None)

    def over(self, settings: AppConfig, picked: Options) -> dict[str, Any]:
        """BuildOptions' VC++ fields: each flag over bundle.toml's [build] (one resolver)."""
        given = asdict(self).items()
        return {name: picked.pick(name, flag, getattr(settings, name)) for name, flag in given}


@dataclass(frozen=True)
class Writing:
    """How `build` writes its output folder."""

    panel: ClassVar[str] = "How the build writes"
    dry_run: bool = grouped("dry-run", False, "build")
    clean: bool = grouped("clean", False)
    force: bool = grouped("force", False)
    link: bool | None = grouped("link", None, "build")
    locked: bool = grouped("locked", False)

    def over(self, settings: AppConfig, picked: Options) -> dict[str, Any]:
        """BuildOptions' writing fields: --link over bundle.toml's, the rest as given."""
        return asdict(self) | {"link": picked.pick("link", self.link, settings.link, None, False)}


ANY_SOURCE = Sources()
NO_INSTALLER_FLAGS = Installer()
DEFAULT_OUTPUTS = Outputs()
VC_AS_CONFIGURED = VcRuntime()
WRITE_AS_CONFIGURED = Writing()


def takes(command: Command) -> Command:
    """Show each parameter of `command` whose type is a group as that group's options, and hand
    the command the group's value built from them."""
    signature = inspect.signature(command, eval_str=True)
    group_of = {
        name: param.annotation
        for name, param in signature.parameters.items()
        if is_group(param.annotation)
    }
    flat = [param for param in signature.parameters.values() if param.name not in group_of]
    for group in group_of.values():
        flat += _group_parameters(group)
    names = [param.name for param in flat]
    if len(set(names)) != len(names):
        raise TypeError(f"{command.__name__}: an option group repeats a parameter: {names}")

    @functools.wraps(command)
    def with_groups(**given: Any) -> Any:
        for name, group in group_of.items():
            given[name] = group(**{field.name: given.pop(field.name) for field in fields(group)})
        return command(**given)

    with_groups.__signature__ = signature.replace(parameters=flat)  # type: ignore[attr-defined]
    return typing.cast(Command, with_groups)


def is_group(annotation: Any) -> bool:
    """A group: a dataclass whose fields are options (bundler.cli.flags.grouped) and that names
    its help panel, one of these or a command's own (`bundle measure`'s ModelRun)."""
    is_class = isinstance(annotation, type)
    return is_class and is_dataclass(annotation) and hasattr(annotation, "panel")


def _group_parameters(group: Any) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(group)
    return [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=field.default,
            annotation=Annotated[hints[field.name], _shown_in(group, field.name)],
        )
        for field in fields(group)
    ]


def _shown_in(group: Any, name: str) -> Any:
    """The group's option `name`, shown in the group's panel of the help."""
    shown = copy.copy(group.__dataclass_fields__[name].metadata["option"])
    shown.rich_help_panel = group.panel
    return shown


def _given(value: int | None, default: int) -> int:
    return default if value is None else value
