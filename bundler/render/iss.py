"""Act layer: the Inno Setup script of a bundle, a view of its lock file.

The script installs exactly the lock's payload (Lock.payload: the app, the bundled DLLs,
licences/, vc_redist.x64.exe in installer mode, the lock file itself) with paths relative to
the script's folder, so the folder can be moved or compiled elsewhere. Everything the script
says comes from the lock (which the build derived from the Plan and the profile) plus the
user's installer settings; nothing is looked up again. Rendering is deterministic: the same
lock and settings give the same bytes (UTF-8 with BOM, CRLF, as Inno Setup's own files).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from bundler import __version__
from bundler.closure.lock import (
    DOCTOR_DATA,
    DOCTOR_EXE,
    INSTALLED_LIST,
    LOCK_NAME,
    Lock,
    LockedEp,
    PayloadFile,
)
from bundler.config.cache_root import runtime_packs_folder
from bundler.config.validate import refuse_unshipped_requirement
from bundler.errors import ConfigError
from bundler.render.engine import Templates, relative_folder, write_text
from bundler.render.escaping import ISPP_INLINE_END, ISPP_INLINE_START
from bundler.render.pack_iss import ISS_SCRIPT, WEB_SCRIPT, plan_pack, write_pack_script
from bundler.render.render_settings import (
    DEFAULT_COMPRESSION,
    DEFAULT_DICTIONARY_KB,
    IssSettings,
    touch_values,
    version_info,
)
from bundler.render.sign import sign_command, sign_values, write_sign_command

ISS_NAME = ISS_SCRIPT
TEMPLATE = "setup.iss.j2"
# Above this many payload bytes the setup is split into slices (DiskSpanning): one setup
# file cannot exceed about 2.1 GB, and the compressed size is not known before compiling.
SPAN_ABOVE = 2_000_000_000
_NOT_IN_FILE_NAMES = re.compile(r'[\\/:*?"<>|]')
_APP_ID_NAMESPACE = uuid.UUID("9f0b7a52-3c1e-5d4a-8b6e-2f1d0c9a7e31")  # bundle's own


@dataclass(frozen=True)
class IssResult:
    path: Path
    app_version: str | None  # None: the script has no version (see the warning)
    disk_spanning: bool
    files: int
    sign_command: Path | None = None  # signtool.txt: the command for ISCC's /Sbundlesign=
    pack_script: Path | None = None  # bundle-pack.iss, with the runtime pack apart
    web_script: Path | None = None  # setup-web.iss, with a pack URL
    sign_line: str | None = None  # the command in signtool.txt (names secrets, holds none)
    components: tuple[str, ...] = ()  # setup.iss's EP-pack components


def app_id_for(app_name: str) -> str:
    """A GUID that depends only on the app's name (case-insensitive): every build of the same
    app gets the same AppId, so a new setup upgrades the installed one instead of adding one."""
    return "{" + str(uuid.uuid5(_APP_ID_NAMESPACE, app_name.lower())).upper() + "}"


def write_iss(
    templates: Templates,
    lock: Lock,
    bundle_dir: Path,
    script: Path,
    settings: IssSettings,
    pack_cache: Path | None = None,
) -> IssResult:
    """Render the script for the bundle in `bundle_dir` and write it to `script` atomically;
    with the runtime pack apart, bundle-pack.iss beside it (its compiled setup kept under
    `pack_cache`) and, with a pack URL, setup-web.iss."""
    if not lock.app:
        raise ConfigError(
            f"{bundle_dir / LOCK_NAME}: the lock file does not name the app (written by an "
            "older bundle); run bundle build again, then render."
        )
    settings.checked(lock.vc_runtime)
    prefix = relative_folder(bundle_dir, script.parent)
    plan = plan_pack(templates, lock, settings, pack_cache or runtime_packs_folder(script.parent))
    pack = plan.values(settings, web=False) if plan else None
    values = iss_values(lock, settings, _payload_bytes(lock, bundle_dir, pack), prefix, pack)
    write_text(script, templates.render(TEMPLATE, **values), bom=True, newline="\r\n")
    signing = write_sign_command(templates, settings.sign, script.parent) if settings.sign else None
    result = IssResult(
        script,
        values["app_version"],
        values["disk_spanning"],
        len(values["files"]),
        signing,
        sign_line=sign_command(settings.sign) if settings.sign else None,
        components=tuple(ep["component"] for ep in values["eps"]),
    )
    if plan is None:
        return result
    pack_script = write_pack_script(templates, plan, bundle_dir, script.parent, settings)
    web_script = script.parent / WEB_SCRIPT if settings.pack_url else None
    if web_script:
        web_values = iss_values(lock, settings, 0, prefix, plan.values(settings, web=True))
        web_values["output_base"] += "-web"
        write_text(web_script, templates.render(TEMPLATE, **web_values), bom=True, newline="\r\n")
    return replace(result, pack_script=pack_script, web_script=web_script)


def iss_values(
    lock: Lock,
    settings: IssSettings,
    payload_bytes: int,
    source_prefix: str = ".",
    pack: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the template needs, computed here (pure), escaped by the template's filters.
    With `pack` (bundler.render.pack_iss.PackPlan.values), the pack's files are not the
    script's own, and the EP packs are in the pack, with no components of their own."""
    assert lock.app is not None
    return {
        "tool_version": __version__,
        "lock_name": LOCK_NAME,
        "profile": lock.profile,
        "ispp_start": ISPP_INLINE_START,
        "ispp_end": ISPP_INLINE_END,
        **_app_values(lock, settings),
        **_compression_values(settings, payload_bytes),
        **_payload_values(lock, source_prefix, pack),
        **_vc_values(lock.vc_runtime_min),
        "gpu": _gpu_values(lock, settings),
        "doctor": lock.doctor,
        "install_scope": settings.install_scope,
        "installed_list": INSTALLED_LIST,
        "eps": [] if pack else _ep_values(lock, settings),
        "runtime_pack": pack,
        "doctor_exe": DOCTOR_EXE,
        "doctor_data": DOCTOR_DATA,
        **sign_values(settings.sign),
        **touch_values(settings.source_date),
    }


def _app_values(lock: Lock, settings: IssSettings) -> dict[str, Any]:
    """The app: its names, version and id (the settings first, then the exe's resources)."""
    assert lock.app is not None
    name = settings.app_name or lock.app_product_name or PurePosixPath(lock.app).stem
    version = settings.app_version or lock.app_file_version
    return {
        "app_id": settings.app_id or app_id_for(name),
        "app_name": name,
        "dir_name": _NOT_IN_FILE_NAMES.sub("_", name),
        "app_version": version,
        "version_info": version_info(version) if version else None,
        "publisher": settings.publisher,
        "app_exe": lock.app,
        "shortcut": settings.shortcut,
        "min_windows": lock.min_windows or "10.0",
        "output_base": _file_stem(f"{name}-{version}-setup" if version else f"{name}-setup"),
    }


def _compression_values(settings: IssSettings, payload_bytes: int) -> dict[str, Any]:
    """How the setup stores its payload: the compression, and slices above SPAN_ABOVE."""
    return {
        "compression": settings.compression,
        "lzma": settings.compression.startswith("lzma"),
        "dictionary_kb": DEFAULT_DICTIONARY_KB
        if settings.compression == DEFAULT_COMPRESSION
        else None,
        "disk_spanning": payload_bytes > SPAN_ABOVE,
        "payload_bytes": payload_bytes,
    }


def _payload_values(lock: Lock, prefix: str, pack: dict[str, Any] | None) -> dict[str, Any]:
    """The script's own files (the runtime pack's apart), what it lists as installed, and the
    VC++ installer it runs."""
    apart: set[str] = pack["files"] if pack else set()
    own = [entry for entry in lock.payload() if entry.name not in apart]
    return {
        "files": [
            {
                **_file_entry(entry, prefix),
                "component": None if pack else _component_of(entry.name, lock),
            }
            for entry in own
        ],
        "installed_names": [
            {"name": entry.name, "component": None if pack else _component_of(entry.name, lock)}
            for entry in lock.payload()
            if entry.kind != "installer"
        ],
        "vc_redist": next((item.name for item in lock.files if item.kind == "installer"), None),
        "pruned": [item.name for item in lock.pruned],
    }


def _file_entry(entry: PayloadFile, prefix: str) -> dict[str, Any]:
    path = PurePosixPath(entry.name)
    source = str(PurePosixPath(Path(prefix).as_posix()) / path) if prefix != "." else entry.name
    if entry.kind == "installer":  # run from {tmp} by [Run], not installed
        return {
            "source": source,
            "dest_root": "{tmp}",
            "dest_sub": "",
            "flags": "ignoreversion deleteafterinstall",
            "check": "VCRuntimeNeeded",
        }
    sub = "" if str(path.parent) == "." else "/" + str(path.parent)
    return {
        "source": source,
        "dest_root": "{app}",
        "dest_sub": sub,
        "flags": "ignoreversion",
        "check": None,
    }


def _component(pack: LockedEp) -> str:
    """The pack's Inno Setup component: a name of letters, digits and underscores."""
    return "ep_" + re.sub(r"\W", "_", pack.name)


def _component_of(name: str, lock: Lock) -> str | None:
    """The component of a pack's file (its folder's, licences apart), None for the rest."""
    for pack in lock.eps:
        if name.startswith(pack.folder + "/"):
            return _component(pack)
    return None


def _ep_values(lock: Lock, settings: IssSettings) -> list[dict[str, Any]]:
    """One component per execution-provider pack; the doctor picks those the machine can use
    (its --eps line), and a required pack the machine cannot use stops the setup."""
    shipped = tuple(pack.name for pack in lock.eps)
    for name in settings.require_eps:
        refuse_unshipped_requirement(f"--require-ep {name}", name, shipped)
    if lock.eps and not lock.doctor:
        raise ConfigError(
            "the setup chooses execution-provider packs with bundle-doctor.exe, and this bundle "
            "ships none; build it with the doctor (the default), or without --ep."
        )
    return [
        {
            "name": pack.name,
            "component": _component(pack),
            "description": f"{pack.ep_name} ({pack.size / 1e6:,.0f} MB): {pack.needs}",
            "required": pack.name in settings.require_eps,
        }
        for pack in lock.eps
    ]


def _vc_values(minimum: str | None) -> dict[str, int]:
    major, _, minor = (minimum or "14.0").partition(".")
    return {"vc_major": int(major), "vc_minor": int(minor or 0)}


def _gpu_values(lock: Lock, settings: IssSettings) -> dict[str, Any] | None:
    driver = lock.gpu_driver
    if driver is None:
        return None
    major, _, minor = driver.min_version.partition(".")
    require = settings.require_gpu if settings.require_gpu is not None else driver.require
    return {
        "dll": driver.dll,
        "cuda_major": driver.cuda_major,
        "min_version": driver.min_version,
        "min_number": int(major) * 100 + int(minor),
        "source": driver.source,
        "require": require,
    }


def _payload_bytes(lock: Lock, bundle_dir: Path, pack: dict[str, Any] | None = None) -> int:
    """Sizes from the lock; the app and the lock file itself from disk (the lock has none).
    With the pack apart, the app's part alone (the compiled pack is smaller than the limit)."""
    sizes = {item.name: item.size for item in lock.files}
    apart: set[str] = pack["files"] if pack else set()
    total = 0
    for entry in lock.payload():
        if entry.name in apart:
            continue
        size = sizes.get(entry.name)
        if size is None:
            path = bundle_dir / entry.name
            size = path.stat().st_size if path.is_file() else 0
        total += size
    return total


def _file_stem(text: str) -> str:
    return re.sub(r"[^\w.-]+", "-", text).strip("-.") or "setup"
