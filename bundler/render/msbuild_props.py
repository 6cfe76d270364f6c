"""Act layer: the MSBuild files of a `bundle msbuild` folder, views of its lock file.

`ort-bundle.props` puts the folder's headers on the include path and links its import library;
`ort-bundle.targets` copies its DLLs into the project's `$(OutDir)` after Build. Both apply to
the profile's platform only, and every path in them is built from `$(MSBuildThisFileDirectory)`:
the folder can be moved, checked in or rendered on another machine, and the same lock gives the
same bytes. Literal values pass through `msbuild_escape` then `xml_text` in the templates.

The folder names (bin, include, lib) and the library to link are this module's contract with
the layout (bundler/ship/msbuild.py), which imports them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler import __version__
from bundler.closure.lock import LOCK_NAME, Lock
from bundler.errors import ConfigError
from bundler.render.engine import UTF8_BOM, Templates, write_text

DEFAULT_OUT = Path("ort-bundle")  # the folder `bundle msbuild` lays out unless --out says
PROPS_NAME = "ort-bundle.props"
TARGETS_NAME = "ort-bundle.targets"
BIN_DIR = "bin"
INCLUDE_DIR = "include"
LIB_DIR = "lib"
IMPORT_LIBRARY = "onnxruntime.lib"  # what a project links; providers are loaded at run time
# A profile's architecture as Visual Studio names the platform ($(Platform)) of a project.
PLATFORMS = {"x64": "x64", "x86": "Win32", "arm64": "ARM64"}
_TEMPLATES = {PROPS_NAME: "ort-bundle.props.j2", TARGETS_NAME: "ort-bundle.targets.j2"}
_NEWLINE = "\r\n"  # as Visual Studio writes its own project files


@dataclass(frozen=True)
class MsbuildFiles:
    """The rendered files, and which of them this run changed (an unchanged file is left
    alone, so its time stamp does not make Visual Studio think the project changed)."""

    paths: tuple[Path, ...]
    changed: tuple[Path, ...]


def msbuild_values(lock: Lock) -> dict[str, Any]:
    """Everything the templates need, from the lock (pure); escaped by the templates' filters."""
    platform = PLATFORMS.get(lock.architecture)
    if platform is None:
        raise ConfigError(
            f"architecture {lock.architecture!r} has no Visual Studio platform; "
            f"use a profile for {', '.join(PLATFORMS)}."
        )
    return {
        "tool_version": __version__,
        "lock_name": LOCK_NAME,
        "profile": lock.profile,
        "platform": platform,
        "include_dir": INCLUDE_DIR,
        "lib_dir": LIB_DIR,
        "bin_dir": BIN_DIR,
        "libraries": [IMPORT_LIBRARY],
    }


def render_msbuild(templates: Templates, values: dict[str, Any]) -> dict[str, str]:
    """File name -> text of both files, with "\\n" line ends (written as CRLF)."""
    return {name: templates.render(template, **values) for name, template in _TEMPLATES.items()}


def write_msbuild_files(templates: Templates, lock: Lock, folder: Path) -> MsbuildFiles:
    """Render both files into `folder` (beside the lock); files whose bytes would not change
    are not written."""
    paths, changed = [], []
    for name, text in render_msbuild(templates, msbuild_values(lock)).items():
        path = folder / name
        paths.append(path)
        if not _holds(path, text):
            write_text(path, text, bom=True, newline=_NEWLINE)
            changed.append(path)
    return MsbuildFiles(tuple(paths), tuple(changed))


def _holds(path: Path, text: str) -> bool:
    """True when `path` already has the bytes write_text would give it."""
    expected = (UTF8_BOM + text.replace("\n", _NEWLINE)).encode("utf-8")
    try:
        return path.read_bytes() == expected
    except OSError:
        return False
