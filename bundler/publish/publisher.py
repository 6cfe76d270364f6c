"""Act layer: `bundle publish`: assemble a release folder from a built bundle and its compiled
setups, flat, as a release page holds it: the setups (slices and runtime-pack parts too), the
archives, the lock and both SBOMs, then SHA256SUMS over them, the provenance statement for
those subjects, and the winget manifests of one single-file setup (docs/publishing.md).

Everything is written into a temporary folder beside the release folder first and renamed
into place at the end: a failure leaves the previous release folder as it was, never half of
a new one. Big files are hard links to the built ones where the file system allows.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.disk import files
from bundler.disk.digest import file_sha256
from bundler.errors import ConfigError, ConflictError, OutputError
from bundler.publish.checksums import SUMS_NAME, render_sums
from bundler.publish.release import CDX_NAME, Release
from bundler.publish.scripts import SetupScript
from bundler.publish.slsa import STATEMENT_NAME, statement
from bundler.publish.spdx import SPDX_NAME, spdx_document
from bundler.publish.winget import WingetInfo, manifests
from bundler.render.sbom import sbom_document
from bundler.target.profiles import Profile

WINGET_FOLDER = "winget"


@dataclass(frozen=True)
class PublishRequest:
    """What to publish and how: the release read from disk, where the folder goes, and the
    values bundle cannot know."""

    release: Release
    out: Path
    profile: Profile
    builder_id: str
    source_date: int | None = None
    winget: WingetInfo | None = None
    winget_setup: str | None = None  # a setup's file name; default: setup.iss's
    force: bool = False


@dataclass
class Published:
    """What `bundle publish` wrote: the release folder's files with their SHA-256."""

    out: Path
    files: dict[str, str] = field(default_factory=dict)  # name -> sha256, as in SHA256SUMS
    statement: str = STATEMENT_NAME
    winget: list[str] = field(default_factory=list)  # manifest paths, relative to out
    winget_setup: str | None = None
    notes: list[str] = field(default_factory=list)


def publish(request: PublishRequest, note: Callable[[str], None] = lambda _: None) -> Published:
    out = request.out
    _refuse_foreign(out, request.force)
    temp = out.with_name(f".{out.name}.bundle-tmp")
    try:
        shutil.rmtree(temp, ignore_errors=True)
        temp.mkdir(parents=True)
        result = _assemble(request, temp, note)
        _swap(temp, out)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        where = exc.filename or out
        raise OutputError(
            f"{where}: cannot write the release folder ({exc.strerror or exc}); give a "
            "writable --out."
        ) from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    result.out = out
    return result


def _assemble(request: PublishRequest, temp: Path, note: Callable[[str], None]) -> Published:
    release = request.release
    sources = _sources(release)
    for name, source in sources.items():
        _place(source, temp / name)
    _write_json(temp / SPDX_NAME, _spdx(request))
    if release.cyclonedx is None:
        _write_json(
            temp / CDX_NAME, sbom_document(release.lock, request.profile, _app_name(release))
        )
    result = Published(temp)
    result.files = {p.name: file_sha256(p) for p in sorted(temp.iterdir()) if p.is_file()}
    (temp / SUMS_NAME).write_text(render_sums(result.files), encoding="utf-8", newline="\n")
    app_sha256 = _app_sha256(release)
    body = statement(result.files, release.lock, app_sha256, request.builder_id)
    _write_json(temp / STATEMENT_NAME, body)
    if request.winget is not None:
        result.winget_setup, result.winget = _winget(request, temp, result.files)
    else:
        result.notes.append("no winget manifests: no package identifier ([publish] package_id)")
    note(f"published {len(result.files)} files with {SUMS_NAME} and {STATEMENT_NAME}")
    return result


def _sources(release: Release) -> dict[str, Path]:
    """Release name -> the file it comes from; two files of one name are refused."""
    chosen: dict[str, Path] = {}
    candidates = [*release.setups, *release.archives, release.lock_path]
    if release.cyclonedx is not None:
        candidates.append(release.cyclonedx)
    reserved = {SUMS_NAME, STATEMENT_NAME, SPDX_NAME, WINGET_FOLDER}
    folded: dict[str, Path | None] = {name.lower(): None for name in reserved}
    for path in candidates:
        if path.name.lower() not in folded:
            pass
        elif (other := folded[path.name.lower()]) is not None and other.samefile(path):
            continue  # one file reached twice (--setups DIST holds the lock too)
        else:
            owner = other or f"bundle publish's own {path.name}"
            raise ConflictError(
                f"{path}: a release folder is flat, and {owner} has the same name; rename "
                "one of them (the archive, or the setup's OutputBaseFilename)."
            )
        folded[path.name.lower()] = path
        chosen[path.name] = path
    return chosen


def _place(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        try:
            shutil.copyfile(source, target)
        except OSError as exc:
            raise OutputError(f"{target}: cannot write ({exc.strerror}).") from None


def _spdx(request: PublishRequest) -> dict[str, Any]:
    release = request.release
    return spdx_document(
        release.lock, request.profile, _app_name(release), release.licence_texts,
        request.source_date,
    )  # fmt: skip


def _app_name(release: Release) -> str:
    for script in release.scripts:
        if script.directive("AppName"):
            return str(script.directive("AppName")).replace("{{", "{")
    lock = release.lock
    return lock.app_product_name or Path(lock.app or "app").stem


def _app_sha256(release: Release) -> str | None:
    lock = release.lock
    entry = lock.by_name().get(lock.app or "")
    if entry is not None:
        return entry.sha256
    path = release.dist / (lock.app or "")
    return file_sha256(path) if lock.app and path.is_file() else None


def _winget(request: PublishRequest, temp: Path, digests: dict[str, str]) -> tuple[str, list[str]]:
    assert request.winget is not None
    script, setup = _winget_script(request)
    written = []
    folder = temp / WINGET_FOLDER / request.winget.package_id
    for manifest in manifests(script, setup, digests[setup], request.release.lock, request.winget):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / manifest.name).write_text(manifest.text(), encoding="utf-8", newline="\n")
        written.append((folder / manifest.name).relative_to(temp).as_posix())
    return setup, written


def _winget_script(request: PublishRequest) -> tuple[SetupScript, str]:
    """The script whose setup winget gets: the one named, else setup.iss's."""
    scripts = [s for s in request.release.scripts if s.setup is not None]
    wanted = request.winget_setup
    for script in scripts:
        assert script.setup is not None
        if wanted is None or script.setup.name.lower() == wanted.lower():
            return script, script.setup.name
    shown = ", ".join(s.setup.name for s in scripts if s.setup) or "none"
    raise ConfigError(
        f"winget: no compiled setup {wanted or 'of setup.iss'} among the setups (found: "
        f"{shown}); compile it first, or give --winget-setup NAME."
    )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(
        json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8", newline="\n"
    )


def _refuse_foreign(out: Path, force: bool) -> None:
    """An existing folder is replaced only when it is a release folder (it has SHA256SUMS)."""
    if out.exists() and not force and any(out.iterdir()) and not (out / SUMS_NAME).is_file():
        raise ConflictError(
            f"{out}: exists and is no release folder (no {SUMS_NAME}); give another --out, "
            "or --force to replace it."
        )


def _swap(temp: Path, out: Path) -> None:
    old = out.with_name(f".{out.name}.bundle-old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        files.replace(out, old)
    files.replace(temp, out)
    shutil.rmtree(old, ignore_errors=True)
