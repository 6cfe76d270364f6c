"""Read layer: bundle.toml: a pipeline's build settings, kept next to the app, so `bundle build`
needs no flags.

    [build]
    exe = "hello.exe"                  # relative to this file's folder
    profile = "ort-1.19.2-gpu-cuda12"
    out = "dist"                       # optional; default: the exe's folder
    search = ["C:/deps/bin"]           # optional extra DLL folders, searched first
    vc_runtime = "app-local"           # optional; default: the profile's
    vc_redist = "vc_redist.x64.exe"    # with vc_runtime = "installer"
    link = false                       # hard links from the cache instead of copies
    sbom = false                       # also write bundle.cdx.json (CycloneDX)
    archive = "hello.zip"              # also pack the bundle into a .zip or .7z
    models = ["models/encoder.onnx"]   # the app's ONNX models: leave out the run-time-
                                       # loaded libraries they never load (docs/pruning.md)
    evidence = "app-evidence.json"     # the app's own measurement (bundle measure)
    cuda_options = { cudnn_conv_algo_search = "DEFAULT" }  # the CUDA EP options the app
                                       # sets; default: none (ORT's defaults)
    eps = ["webgpu", "openvino"]       # execution-provider packs, each in ep/<pack>/ beside
                                       # the exe (docs/ep-packs.md); default: none

    [render]                           # the Inno Setup script (setup.iss in the output folder)
    iss = "installer/setup.iss"        # elsewhere; false: no script
    app_name = "Hello"                 # default: the exe's ProductName, else its name
    app_version = "1.2.0"              # default: the exe's FileVersion
    publisher = "Example Ltd"
    app_id = "{{...}"                  # default: derived from app_name, stable
    compression = "lzma2/normal"       # Inno Setup's Compression (default: lzma2/normal with a
                                       # 16 MiB dictionary, solid; zip/1 compiles fastest)
    shortcut = false                   # Start-menu shortcut to the app
    require_gpu = false                # default: the profile's; a silent install then fails
    install_scope = "machine"          # "user": no administrator ({autopf} is per-user); "ask"
                                       # without a good enough GPU driver (as /REQUIREGPU)
    require_eps = ["nv-tensorrt-rtx"]  # the setup stops where the doctor finds no device for
                                       # one of these packs (each one of [build] eps)
    runtime_pack = true                # the runtime as its own setup, compiled once per
                                       # runtime (docs/runtime-pack.md); default: false
    pack_url = "https://example.com/packs"  # also setup-web.iss, which downloads the pack
    pack_part_mb = 100                 # the pack's setup in parts of this many MB, each
                                       # downloaded on its own: a broken download resumes
    postbuild = false                  # no postbuild.cmd / postbuild.event.xml (default: both)
    project_dir = "app"                # the .vcxproj's folder: the post-build event names
                                       # postbuild.cmd relative to $(ProjectDir)

    [sign]                             # sign the setup and its uninstaller (docs/building.md)
    tool = "osslsigncode"              # "signtool", "osslsigncode" or "custom"
    certificate = "certs/release.pfx"  # relative to this file's folder; or a pkcs11: URI
    password_env = "PFX_PASSWORD"      # the NAME of the variable holding the password
    timestamp_url = "http://timestamp.digicert.com"
    description = "Hello"
    # command = "mysign.exe $f"        # tool = "custom": Inno's Sign Tool command

    [publish]                          # bundle publish: what winget needs and bundle cannot
    package_id = "Example.Hello"       # know (docs/publishing.md); each also a flag
    license = "MIT"
    short_description = "Says which ONNX Runtime it loads."
    url = "https://example.com/releases/{version}/{name}"  # where the setup will be downloaded
    builder_id = "https://github.com/example/hello/.github/workflows/release.yml"

Command-line flags override these values. Paths are relative to the folder of bundle.toml.
Every table is optional: a file with only [render] serves `bundle render iss`; a command that
needs a [build] key the file lacks says so.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from bundler.config.options import CONFIG
from bundler.config.validate import check_choice, origin_of
from bundler.errors import ConfigError
from bundler.render.render_settings import (
    DEFAULT_COMPRESSION,
    DEFAULT_PACK_PART_MB,
    IssSettings,
    PostbuildSettings,
    SignSettings,
    refuse_secrets,
)
from bundler.target.manifest import Table

CONFIG_NAME = "bundle.toml"


@dataclass(frozen=True)
class AppConfig:
    """An app's bundle.toml: what a bare `bundle build` uses when no flag says otherwise
    ([build] for the bundle, [render] for the installer and the post-build step; the module
    docstring has every key)."""

    path: Path
    exe: Path | None = None
    profile: str | None = None
    out: Path | None = None
    search: tuple[Path, ...] = ()
    vc_runtime: str | None = None
    vc_redist: Path | None = None
    link: bool | None = None
    sbom: bool | None = None
    archive: Path | None = None
    gpus: tuple[str, ...] | None = None  # target GPUs (sm_XY), replacing the profile's
    models: tuple[Path, ...] = ()  # the app's ONNX models (pruning)
    evidence: Path | None = None  # the app's own measurement (bundle measure), for pruning
    cuda_options: dict[str, str] | None = None  # the CUDA EP options the app sets
    eps: tuple[str, ...] | None = None  # execution-provider packs (manifests/eps/)
    doctor: bool | None = None  # [render] doctor: ship bundle-doctor.exe (default true)
    iss: Path | bool | None = None  # a path, False for none, None for the default place
    installer: IssSettings = field(default_factory=IssSettings)
    postbuild: PostbuildSettings | None = field(default_factory=PostbuildSettings)  # None: off
    publish: PublishSettings = field(default_factory=lambda: PublishSettings())
    found: bool = False  # read from a file (path), not the defaults of an absent one


@dataclass(frozen=True)
class PublishSettings:
    """[publish]: the values of a release that bundle cannot know (bundle publish)."""

    package_id: str | None = None
    license: str | None = None
    short_description: str | None = None
    url: str | None = None
    builder_id: str | None = None


def _cuda_options(build: Table) -> dict[str, str] | None:
    """[build] cuda_options: the CUDA EP's options as the app sets them (values as strings,
    as ORT takes them)."""
    options = build.peek("cuda_options")
    table = build.table("cuda_options", None)
    if table is None:
        return None
    found = {str(key): str(table.string(key)) for key in dict(options)}
    table.done()
    return found


def find_config(start: Path) -> Path | None:
    candidate = start / CONFIG_NAME
    return candidate if candidate.is_file() else None


def load_config(path: Path) -> AppConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))  # TOML's; not the ANSI code page
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}); TOML files are UTF-8: "
            "save it as UTF-8 (in Notepad: Save As, Encoding: UTF-8)."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}.") from None
    root = Table(data, str(path), ConfigError)
    build = root.table("build", None) or Table({}, f"{path} [build]", ConfigError)
    base = path.parent
    config = AppConfig(
        path=path,
        found=True,
        exe=_path(base, build.string("exe", None)),
        profile=build.string("profile", None),
        out=_path(base, build.string("out", None)),
        search=tuple(base / item for item in build.strings("search", ())),
        vc_runtime=_choice(build, "vc_runtime", path),
        vc_redist=_path(base, build.string("vc_redist", None)),
        link=build.boolean("link", None),
        sbom=build.boolean("sbom", None),
        archive=_path(base, build.string("archive", None)),
        gpus=build.strings("gpus", None),
        models=tuple(base / item for item in build.strings("models", ())),
        evidence=_path(base, build.string("evidence", None)),
        cuda_options=_cuda_options(build),
        eps=build.strings("eps", None),
    )
    render = root.table("render", None)
    if render is not None:
        config = replace(
            config,
            iss=_iss_place(render, base),
            installer=_installer(render, path),
            postbuild=_postbuild(render, base),
            doctor=render.boolean("doctor", None),
        )
        render.done()
    sign = root.table("sign", None)
    if sign is not None:
        config = replace(config, installer=replace(config.installer, sign=_sign(sign, path)))
        sign.done()
    publish = root.table("publish", None)
    if publish is not None:
        config = replace(config, publish=_publish(publish))
        publish.done()
    build.done()
    root.done()
    return config


def _publish(table: Table) -> PublishSettings:
    return PublishSettings(
        **{key: table.string(key, None) for key in PublishSettings.__dataclass_fields__}
    )


def _iss_place(table: Table, base: Path) -> Path | bool | None:
    """[render] iss: a path (relative to bundle.toml), false for no script, true: default."""
    if isinstance(table.peek("iss"), str):
        place: str = table.string("iss")
        return base / place
    return False if table.boolean("iss", None) is False else None


def _choice(table: Table, key: str, path: Path, setting: str = "") -> str | None:
    """A key whose value is one of a setting's choices (bundler.config.validate.CHOICES), refused
    here, naming this file and key, for every command that reads the file."""
    value: str | None = table.string(key, None)
    if value is not None:
        name = setting or key
        check_choice(name, value, origin_of(name, CONFIG, path))
    return value


def _installer(table: Table, path: Path) -> IssSettings:
    return IssSettings(
        app_name=table.string("app_name", None),
        app_version=table.string("app_version", None),
        publisher=table.string("publisher", None),
        app_id=table.string("app_id", None),
        compression=_choice(table, "compression", path, "iss_compression") or DEFAULT_COMPRESSION,
        shortcut=table.boolean("shortcut", False),
        require_gpu=table.boolean("require_gpu", None),
        require_eps=table.strings("require_eps", None) or (),
        runtime_pack=table.boolean("runtime_pack", False),
        pack_url=table.string("pack_url", None),
        pack_part_mb=table.integer("pack_part_mb", DEFAULT_PACK_PART_MB),
        install_scope=_choice(table, "install_scope", path) or "machine",
    )


def _sign(table: Table, path: Path) -> SignSettings:
    """[sign]: a certificate path is relative to bundle.toml (a pkcs11: URI is kept)."""
    refuse_secrets(table)
    base = path.parent
    certificate = table.string("certificate", None)
    if certificate is not None and not certificate.startswith("pkcs11:"):
        certificate = str(base / certificate)
    tool: str = table.string("tool")
    check_choice("sign_tool", tool, origin_of("sign_tool", CONFIG, path))
    return SignSettings(
        tool=tool,
        command=table.string("command", None),
        certificate=certificate,
        password_env=table.string("password_env", None),
        timestamp_url=table.string("timestamp_url", None),
        description=table.string("description", None),
    ).checked()


def _postbuild(table: Table, base: Path) -> PostbuildSettings | None:
    """[render] postbuild = false: no post-build step; project_dir: relative to bundle.toml."""
    project_dir = _path(base, table.string("project_dir", None))
    if table.boolean("postbuild", True) is False:
        return None
    return PostbuildSettings(project_dir=project_dir)


def _path(base: Path, text: str | None) -> Path | None:
    return base / text if text is not None else None
