"""Act layer: the runtime pack's scripts (docs/runtime-pack.md). With `runtime_pack`, a build's
setup is two Inno Setup scripts: bundle-pack.iss, the pack's own setup (everything the profile's
artifacts provide, the lock's `pack`), and setup.iss, the app's setup, which compiles the pack
once per pack hash into the pack cache (ISPP, at compile time) and runs it while it installs.
With a pack URL, setup-web.iss is the same app setup without the pack inside: it downloads the
pack from that URL and checks its SHA-256 first. All three are views of one lock.

The full setup holds the compiled pack without ISCC storing it (ISCC hashes and writes every
byte it stores, about 10 s a GB under Wine): bundlepack.cmd, run by ISCC as a Sign Tool on the
finished setup, appends the pack's files and a line naming the pack; the setup finds them
before its signature and checks each file's SHA-256 before it runs the pack."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bundler import __version__
from bundler.closure.lock import LOCK_NAME, PACK_MARKER, Lock, RuntimePack
from bundler.errors import ConfigError
from bundler.render.engine import Templates, relative_folder, write_text
from bundler.render.render_settings import (
    DEFAULT_COMPRESSION,
    DEFAULT_DICTIONARY_KB,
    IssSettings,
    touch_values,
)
from bundler.render.sign import SIGN_COMMAND_FILE, sign_values

PACK_SCRIPT = "bundle-pack.iss"
PACK_TEMPLATE = "bundle-pack.iss.j2"
WEB_SCRIPT = "setup-web.iss"
PACK_LOG = "bundle-pack.log"
# Beside the scripts: the pack cache's folder of this pack on this machine, read by setup.iss at
# compile time (ISPP), so that no machine path is in the scripts (docs/reproducible.md)
PACK_CACHE_FILE = "bundle-pack-cache.txt"
APPEND_TOOL = "bundlepack"  # the Sign Tool that appends the pack: iscc "/Sbundlepack=$p"
APPEND_SCRIPT = "bundlepack.cmd"
APPEND_TEMPLATE = "bundlepack.cmd.j2"
APPEND_MARKER = "bundle runtime pack"  # then the pack's SHA-256: the line after the pack
ISS_SCRIPT = "setup.iss"


@dataclass(frozen=True)
class PackScripts:
    pack: Path  # bundle-pack.iss
    web: Path | None  # setup-web.iss, with a pack URL


def windows_folder(path: Path) -> str:
    """`path` as ISCC sees it: itself on Windows; elsewhere through Wine's Z: drive, which maps
    the Unix root (bundle on Linux, ISCC under Wine)."""
    if os.name == "nt":
        return str(path)
    return "Z:" + os.path.abspath(path).replace("/", "\\")


@dataclass(frozen=True)
class PackPlan:
    """The runtime pack of one render, decided once for every script that names it: the pack,
    the compiled pack's name (its hash and a digest of its script: bundle's template and the
    compression, so a new bundle or other settings compile a new pack, never reuse one
    compiled from another script) and its folder in the pack cache, as ISCC sees it."""

    pack: RuntimePack
    name: str
    cache: str
    sign_tool: str | None

    def values(self, settings: IssSettings, web: bool) -> dict[str, Any]:
        """What setup.iss (web=False) or setup-web.iss (web=True) says about the pack."""
        pack = self.pack
        folder_url = f"{settings.pack_url.rstrip('/')}/" if web and settings.pack_url else None
        return {
            "sha256": pack.sha256,
            "short": pack.short,
            "size": pack.size,
            "files": set(pack.files),
            "names": list(pack.files),
            "folders": _folders(pack.files),
            "base": f"bundle-pack-{self.name}",  # the compiled pack's file name, without .exe
            "script": PACK_SCRIPT,
            # with [sign], setup.iss signs the pack with the command in signtool.txt
            "sign_tool": self.sign_tool,
            "sign_command": SIGN_COMMAND_FILE,
            # the compiled pack's folder, named in cache_file beside the script (machine-local)
            "cache": self.cache,
            "cache_file": PACK_CACHE_FILE,
            "marker": PACK_MARKER,
            "log": PACK_LOG,
            "web": web,
            "folder_url": folder_url,  # the pack's files are published there
            # the full setup: the pack appended by bundlepack.cmd, ISCC's Sign Tool
            "append_tool": APPEND_TOOL,
            "append_script": APPEND_SCRIPT,
            "append_marker": APPEND_MARKER,
        }


def plan_pack(
    templates: Templates, lock: Lock, settings: IssSettings, pack_cache: Path
) -> PackPlan | None:
    """The render's runtime pack; None without runtime_pack or a pack URL."""
    if not settings.runtime_pack and settings.pack_url is None:
        return None
    pack = _pack_of(lock)
    script = _pack_script(templates, pack, ".", settings)
    name = f"{pack.short}-{hashlib.sha256(script.encode('utf-8')).hexdigest()[:8]}"
    sign_tool = sign_values(settings.sign)["sign_tool"]
    return PackPlan(pack, name, windows_folder(pack_cache / name), sign_tool)


def write_pack_script(
    templates: Templates, plan: PackPlan, bundle_dir: Path, folder: Path, settings: IssSettings
) -> Path:
    """bundle-pack.iss beside the app's script: the pack's files, relative to that folder;
    bundlepack.cmd, which puts the compiled pack into the full setup; and the pack cache's
    folder of the plan on this machine, in bundle-pack-cache.txt."""
    write_text(folder / PACK_CACHE_FILE, plan.cache)
    script = folder / PACK_SCRIPT
    text = _pack_script(templates, plan.pack, relative_folder(bundle_dir, folder), settings)
    write_text(script, text, bom=True, newline="\r\n")
    append = templates.render(
        APPEND_TEMPLATE,
        tool_version=__version__,
        tool=APPEND_TOOL,
        script=ISS_SCRIPT,
        marker=APPEND_MARKER,
    )
    write_text(folder / APPEND_SCRIPT, append, newline="\r\n")
    return script


def _pack_script(
    templates: Templates, pack: RuntimePack, prefix: str, settings: IssSettings
) -> str:
    return templates.render(
        PACK_TEMPLATE,
        tool_version=__version__,
        lock_name=LOCK_NAME,
        sha256=pack.sha256,
        short=pack.short,
        files=[_pack_file(name, prefix) for name in pack.files],
        marker=PACK_MARKER,
        compression=settings.compression,
        lzma=settings.compression.startswith("lzma"),
        dictionary_kb=DEFAULT_DICTIONARY_KB
        if settings.compression == DEFAULT_COMPRESSION
        else None,
        **sign_values(settings.sign),
        part_bytes=settings.pack_part_mb * 1_000_000,
        # a fixed date, not the release's: one pack, one compiled setup, whatever the app's date
        **touch_values(None),
    )


def _pack_of(lock: Lock) -> RuntimePack:
    if lock.runtime_pack is None:
        raise ConfigError(
            "--runtime-pack: the lock records no runtime pack (it was written by an older "
            "bundle, or the bundle has no runtime files); run bundle build again, then render."
        )
    return lock.runtime_pack


def _pack_file(name: str, prefix: str) -> dict[str, str]:
    path = PurePosixPath(name)
    source = str(PurePosixPath(Path(prefix).as_posix()) / path) if prefix != "." else name
    sub = "" if str(path.parent) == "." else "/" + str(path.parent)
    return {"source": source, "dest_sub": sub}


def _folders(names: tuple[str, ...]) -> list[str]:
    """Every folder the pack's files are in, deepest first (the uninstaller removes them when
    empty, children before parents)."""
    found: set[str] = set()
    for name in names:
        for parent in PurePosixPath(name).parents:
            if str(parent) != ".":
                found.add(str(parent))
    return sorted(found, key=lambda folder: (-folder.count("/"), folder))
