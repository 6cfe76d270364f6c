"""Act layer: the post-build step of a bundle, a view of its lock file.

`postbuild.cmd TARGET_DIR [/LICENSES]` copies the bundle's DLLs (the lock's "bundled" files;
with the switch also its licence files) from the bundle folder into TARGET_DIR: in Visual
Studio the project's $(OutDir), so the exe built there finds them. It names exactly the
lock's files, copies each with xcopy only when it is newer, and stops at the first failure
with xcopy's exit code and a line naming the file. `postbuild.event.xml` is the MSBuild
PostBuildEvent that calls it; the script cannot know where the project is, so the event names
it relative to $(ProjectDir) when told the project's folder and holds a placeholder otherwise.

Both files are deterministic (the same lock, layout and settings give the same bytes) and CRLF.
The script is ASCII unless a name is not; then it is UTF-8 without BOM and switches cmd to
code page 65001 first (see the template). Values are escaped by render.py's named filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bundler import __version__
from bundler.closure.lock import LOCK_NAME, Lock
from bundler.render.engine import Templates, relative_folder, write_text
from bundler.render.escaping import inno_source, windows_path
from bundler.render.render_settings import PostbuildSettings

POSTBUILD_NAME = "postbuild.cmd"
EVENT_NAME = "postbuild.event.xml"
SCRIPT_TEMPLATE = "postbuild.cmd.j2"
EVENT_TEMPLATE = "postbuild.event.xml.j2"
# Where the event names the script's folder when bundle does not know the project's folder:
# the user replaces it (the event's comment says so). A wrong path fails the build visibly.
PLACEHOLDER = "BUNDLE_FOLDER\\"


@dataclass(frozen=True)
class PostbuildResult:
    """What write_postbuild wrote, and how many DLLs and licence files the script copies."""

    script: Path
    event: Path
    dlls: int
    licenses: int
    project_relative: bool  # False: the event holds PLACEHOLDER for the script's folder


def write_postbuild(
    templates: Templates, lock: Lock, bundle_dir: Path, out_dir: Path, settings: PostbuildSettings
) -> PostbuildResult:
    """Render postbuild.cmd and postbuild.event.xml into `out_dir` (normally the bundle folder
    itself: the script finds the files relative to its own folder) and write them atomically."""
    project = settings.project_dir
    values = postbuild_values(
        lock,
        source=_folder_prefix(bundle_dir, out_dir),
        script_folder=_folder_prefix(out_dir, project) if project is not None else None,
    )
    script, event = out_dir / POSTBUILD_NAME, out_dir / EVENT_NAME
    write_text(script, templates.render(SCRIPT_TEMPLATE, **values), newline="\r\n")
    write_text(event, templates.render(EVENT_TEMPLATE, **values), newline="\r\n")
    return PostbuildResult(
        script, event, len(values["dlls"]), len(values["licenses"]), project is not None
    )


def postbuild_values(
    lock: Lock, source: str = "", script_folder: str | None = None
) -> dict[str, Any]:
    """Everything both templates need, computed here (pure), escaped by the templates' filters.
    `source`: the bundle folder relative to the script's ("" for the same, else ending in \\);
    `script_folder`: the script's folder relative to the project's, None when unknown."""
    payload = lock.payload()
    # The DLLs beside the exe, then each execution-provider pack's files in its own folder
    # (ep\<pack>\: ORT loads a pack from there, docs/ep-packs.md).
    dlls = [_file(entry.name) for entry in payload if entry.kind in ("bundled", "ep")]
    licenses = [_file(entry.name) for entry in payload if entry.kind == "license"]
    app = lock.app or "the app"
    texts = [app, lock.profile, source, *(file["name"] for file in dlls + licenses)]
    return {
        "tool_version": __version__,
        "lock_name": LOCK_NAME,
        "profile": lock.profile,
        "app": app,
        "source": source,
        "dlls": dlls,
        "licenses": licenses,
        "utf8": not all(text.isascii() for text in texts),
        "placeholder": PLACEHOLDER,
        "project_relative": script_folder is not None,
        "script_path": (PLACEHOLDER if script_folder is None else script_folder) + POSTBUILD_NAME,
    }


def _file(name: str) -> dict[str, str]:
    """A bundle file as the script copies it: its Windows path, and the folder it goes to
    under the target ("" or ending in \\). Names Windows cannot hold are refused here, as
    they are for the installer."""
    inno_source(name)
    parent = str(PurePosixPath(name).parent)
    return {
        "name": windows_path(name),
        "folder": "" if parent == "." else windows_path(parent) + "\\",
    }


def _folder_prefix(folder: Path, start: Path) -> str:
    """`folder` relative to `start`, as a Windows path prefix: "" for the same folder."""
    relative = relative_folder(folder, start)
    return "" if relative == "." else windows_path(relative) + "\\"
