"""bundle.toml: a pipeline's build settings, kept next to the app, so `bundle build` needs no flags.

    [build]
    exe = "hello.exe"                  # relative to this file's folder
    profile = "ort-1.19.2-gpu-cuda12"
    out = "dist"                       # optional; default: the exe's folder
    search = ["C:/deps/bin"]           # optional extra DLL folders, searched first
    vc_runtime = "app-local"           # optional; default: the profile's
    vc_redist = "vc_redist.x64.exe"    # with vc_runtime = "installer"
    link = false                       # hard links from the cache instead of copies
    sbom = false                       # also write bundle.cdx.json (CycloneDX)

Command-line flags override these values. Paths are relative to the folder of bundle.toml.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from bundler.errors import ConfigError
from bundler.manifest import Table

CONFIG_NAME = "bundle.toml"


@dataclass(frozen=True)
class AppConfig:
    path: Path
    exe: Path | None = None
    profile: str | None = None
    out: Path | None = None
    search: tuple[Path, ...] = ()
    vc_runtime: str | None = None
    vc_redist: Path | None = None
    link: bool | None = None
    sbom: bool | None = None


def find_config(start: Path) -> Path | None:
    candidate = start / CONFIG_NAME
    return candidate if candidate.is_file() else None


def load_config(path: Path) -> AppConfig:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}.") from None
    root = Table(data, str(path), ConfigError)
    build = root.table("build")
    base = path.parent
    config = AppConfig(
        path=path,
        exe=_path(base, build.string("exe", None)),
        profile=build.string("profile", None),
        out=_path(base, build.string("out", None)),
        search=tuple(base / item for item in build.strings("search", ())),
        vc_runtime=build.string("vc_runtime", None),
        vc_redist=_path(base, build.string("vc_redist", None)),
        link=build.boolean("link", None),
        sbom=build.boolean("sbom", None),
    )
    build.done()
    root.done()
    return config


def _path(base: Path, text: str | None) -> Path | None:
    return base / text if text is not None else None
