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
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

import typer

from bundler.cli.app import ALLOW_HTTP, CACHE_DIR

if TYPE_CHECKING:
    from bundler.acquire.artifacts import AcquireOptions
    from bundler.config.options import Options
    from bundler.render.render_settings import IssSettings
    from bundler.ship.appconfig import AppConfig

Command = TypeVar("Command", bound=Callable[..., Any])


def _flag(default: Any, decl: str, help: str, **more: Any) -> Any:
    """A group's field and its typer option (`takes` shows it in the group's panel)."""
    return field(default=default, metadata={"option": typer.Option(decl, help=help, **more)})


@dataclass(frozen=True)
class Sources:
    """Where a command's archives come from: --cache-dir, --mirror, --offline, --allow-http."""

    panel: ClassVar[str] = "Where archives come from"
    cache_dir: Path | None = field(default=None, metadata={"option": CACHE_DIR})
    mirror: list[str] | None = _flag(
        None, "--mirror", "Folder or URL holding the archives by name (repeatable)."
    )
    offline: bool = _flag(False, "--offline", "No network: cache, mirror folders, local installs.")
    allow_http: bool = field(default=False, metadata={"option": ALLOW_HTTP})

    def root(self, picked: Options | None = None) -> Path:
        """The command's cache folder: --cache-dir, else $BUNDLE_CACHE_DIR, else the user's,
        with its origin kept in `picked` (bundler.cli.origins)."""
        from bundler.cli.origins import cache_folder
        from bundler.config.options import Options

        return cache_folder(self.cache_dir, picked or Options())

    def pick(self, ctx: typer.Context, picked: Options) -> Path:
        """The cache folder, and --mirror, --offline and --allow-http with their origins, for
        a dry run to show."""
        from bundler.cli.origins import pick_given

        given = {"mirror": self.mirror, "offline": self.offline, "allow_http": self.allow_http}
        pick_given(ctx, picked, **given)
        return self.root(picked)

    def acquire(self, **more: Any) -> AcquireOptions:
        """The acquisition settings these flags ask for (`more`: mode, verify, search); the
        command's --source (mode) is validated here, before any work."""
        from bundler.acquire.artifacts import AcquireOptions
        from bundler.acquire.download import DownloadPolicy
        from bundler.config.validate import check_choice

        if "mode" in more:
            check_choice("source", more["mode"], "--source")
        return AcquireOptions(
            mirrors=tuple(self.mirror or ()),
            offline=self.offline,
            policy=DownloadPolicy(allow_http=self.allow_http),
            **more,
        )


@dataclass(frozen=True)
class Installer:
    """The installer flags of `build` and `render iss`, over bundle.toml's [render] table."""

    panel: ClassVar[str] = "Installer (setup.iss)"
    app_name: str | None = _flag(None, "--app-name", "The app's name (default: the exe's name).")
    app_version: str | None = _flag(
        None, "--app-version", "The version (default: the exe's FileVersion)."
    )
    publisher: str | None = _flag(None, "--publisher", "The publisher's name.")
    iss_compression: str | None = _flag(
        None,
        "--iss-compression",
        "Inno Setup compression (default lzma2/normal; zip/1 fast).",
    )
    shortcut: bool | None = _flag(
        None, "--shortcut/--no-shortcut", "A Start-menu shortcut to the app."
    )
    require_gpu: bool | None = _flag(
        None,
        "--require-gpu/--allow-cpu",
        "A silent install fails without a good enough NVIDIA driver.",
    )
    runtime_pack: bool | None = _flag(
        None,
        "--runtime-pack/--no-runtime-pack",
        "The runtime as a setup of its own, compiled once per runtime (docs/runtime-pack.md).",
    )
    pack_url: str | None = _flag(
        None,
        "--pack-url",
        "Also write setup-web.iss, which downloads the runtime pack from this https:// folder.",
        metavar="URL",
    )
    pack_part_mb: int | None = _flag(
        None,
        "--pack-part-mb",
        "The runtime pack's setup in parts of this many MB (default 100): a broken download "
        "resumes at the first part it lacks.",
        metavar="MB",
    )
    require_ep: list[str] | None = _flag(
        None,
        "--require-ep",
        "The setup stops where the doctor finds no device for this --ep pack (repeatable).",
        metavar="PACK",
    )

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
    iss: Path | None = _flag(
        None, "--iss", "Write the Inno Setup script here (default: OUT/setup.iss)."
    )
    no_iss: bool = _flag(False, "--no-iss", "Write no Inno Setup script.")
    no_postbuild: bool = _flag(
        False, "--no-postbuild", "Write no postbuild.cmd / postbuild.event.xml."
    )
    sbom: bool | None = _flag(
        None,
        "--sbom/--no-sbom",
        "Write a CycloneDX SBOM (default: bundle.toml's [build] sbom, else --no-sbom).",
    )
    archive: Path | None = _flag(
        None, "--archive", "Also pack the bundle into this .zip or .7z file."
    )
    no_doctor: bool = _flag(
        False, "--no-doctor", "Ship no bundle-doctor.exe (the check on the target)."
    )

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
    vc_runtime: str | None = _flag(
        None, "--vc-runtime", "app-local (default) or installer (vc_redist)."
    )
    vc_redist: Path | None = _flag(None, "--vc-redist", "vc_redist.x64.exe for installer mode.")

    def over(self, settings: AppConfig, picked: Options) -> dict[str, Any]:
        """BuildOptions' VC++ fields: each flag over bundle.toml's [build] (one resolver)."""
        given = asdict(self).items()
        return {name: picked.pick(name, flag, getattr(settings, name)) for name, flag in given}


@dataclass(frozen=True)
class Writing:
    """How `build` writes its output folder."""

    panel: ClassVar[str] = "How the build writes"
    dry_run: bool = _flag(
        False,
        "--dry-run",
        "Show the plan and write nothing into the output folder. It still downloads and "
        "verifies the profile's artifacts into the cache, unless they are cached (1.5-2.5 GB "
        "for a GPU profile); with --offline it works from the cache (and --mirror folders) "
        "only and names every artifact that is missing.",
    )
    clean: bool = _flag(False, "--clean", "First remove the files an earlier build wrote.")
    force: bool = _flag(False, "--force", "Overwrite files bundle did not write.")
    link: bool | None = _flag(
        None,
        "--link/--copy",
        "Hard-link files from the cache, or copy them (default: bundle.toml's [build] link, "
        "else --copy).",
    )
    locked: bool = _flag(False, "--locked", "Fail if the result differs from bundle.lock.json.")

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
    grouped = {
        name: param.annotation
        for name, param in signature.parameters.items()
        if is_group(param.annotation)
    }
    flat = [param for param in signature.parameters.values() if param.name not in grouped]
    for group in grouped.values():
        flat += _group_parameters(group)
    names = [param.name for param in flat]
    if len(set(names)) != len(names):
        raise TypeError(f"{command.__name__}: an option group repeats a parameter: {names}")

    @functools.wraps(command)
    def with_groups(**given: Any) -> Any:
        for name, group in grouped.items():
            given[name] = group(**{field.name: given.pop(field.name) for field in fields(group)})
        return command(**given)

    with_groups.__signature__ = signature.replace(parameters=flat)  # type: ignore[attr-defined]
    return typing.cast(Command, with_groups)


def is_group(annotation: Any) -> bool:
    """A group: a dataclass whose fields are options (`_flag`) and that names its help panel,
    one of these or a command's own (`bundle measure`'s ModelRun)."""
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
