"""Act layer: what a release publishes, read from a built bundle folder: its lock (through
bundler.closure.lockfile), the setup scripts that were compiled (their [Setup] directives), the
compiled setups with their slices, the archives, the CycloneDX SBOM and the shipped licence
texts.

The compiled setups are found by name: each script's OutputBaseFilename gives its setup
`BASE.exe` and slices `BASE-*.bin` in the setups folder (ISCC's default `Output/` beside the
script); every other .exe and .bin there (a runtime pack's setup and its parts) is published
too, unless the setups folder is the bundle folder itself, where the app's exes lie.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bundler.closure.lock import LOCK_NAME, Lock
from bundler.closure.lockfile import read_lock
from bundler.errors import InputFileError
from bundler.publish.scripts import SetupScript, pack_name, setup_directives

SCRIPTS = ("setup.iss", "setup-web.iss")  # the app's setups: full (or plain) and web
ARCHIVE_SUFFIXES = (".zip", ".7z")
CDX_NAME = "bundle.cdx.json"


@dataclass(frozen=True)
class Release:
    """A built bundle and what was made of it, as read from disk."""

    dist: Path
    lock: Lock
    lock_path: Path
    scripts: tuple[SetupScript, ...]
    setups: tuple[Path, ...]  # every file of the setups folder: setups, slices, pack parts
    archives: tuple[Path, ...]
    cyclonedx: Path | None
    licence_texts: dict[str, str] = field(default_factory=dict)  # artifact -> its texts


def read_release(
    dist: Path, setups_dir: Path, archives: tuple[Path, ...] = (), pack_cache: Path | None = None
) -> Release:
    """The release of the bundle folder `dist`; `pack_cache` is where a runtime pack's setup
    and parts were compiled (the cache's runtime-packs/), for a script that names a pack."""
    lock_path = dist / LOCK_NAME
    lock = read_lock(lock_path)
    if lock is None:
        raise InputFileError(
            f"{dist}: no {LOCK_NAME}; give the folder `bundle build` wrote (its --out)."
        )
    setups = _setup_files(setups_dir)
    scripts = tuple(_script(dist / name, setups) for name in SCRIPTS if (dist / name).is_file())
    if setups_dir.resolve() == dist.resolve():  # the app's own exes lie there too
        setups = tuple(p for s in scripts if s.setup for p in (s.setup, *s.slices))
    setups = _with_pack_files(scripts, setups, pack_cache)
    found = sorted(p for p in dist.iterdir() if p.suffix.lower() in ARCHIVE_SUFFIXES)
    for archive in archives:
        if not archive.is_file():
            raise InputFileError(f"{archive}: no such archive; give the .zip or .7z it wrote.")
    chosen = tuple(dict.fromkeys([*found, *archives]))
    cdx = dist / CDX_NAME
    return Release(
        dist, lock, lock_path, scripts, setups, chosen, cdx if cdx.is_file() else None,
        licence_texts(dist, lock),
    )  # fmt: skip


def _setup_files(folder: Path) -> tuple[Path, ...]:
    if not folder.is_dir():
        raise InputFileError(
            f"{folder}: no such folder of compiled setups; compile the setup first (iscc "
            "setup.iss writes Output/ beside it), or give --setups DIR."
        )
    kinds = (".exe", ".bin")  # what ISCC writes: setups and their slices
    found = tuple(sorted(p for p in folder.iterdir() if p.suffix.lower() in kinds and p.is_file()))
    if not any(p.suffix.lower() == ".exe" for p in found):
        raise InputFileError(f"{folder}: holds no setup .exe; compile the setup first.")
    return found


def _with_pack_files(
    scripts: tuple[SetupScript, ...], setups: tuple[Path, ...], pack_cache: Path | None
) -> tuple[Path, ...]:
    """The setups plus the runtime pack's setup and parts the scripts name, from the pack
    cache where the setups folder lacks them. The web setup downloads them, so with
    setup-web.iss they must be found; the full setup carries the pack, so there they are
    published when present."""
    names = {path.name.lower() for path in setups}
    found = list(setups)
    for script in scripts:
        if script.pack is None or f"{script.pack}.exe".lower() in names:
            continue
        folder = (pack_cache or Path()) / script.pack.removeprefix("bundle-pack-")
        exe = folder / f"{script.pack}.exe"
        if exe.is_file():
            found += [exe, *sorted(folder.glob(f"{script.pack}-*.bin"))]
            names.add(exe.name.lower())
        elif script.name == "setup-web.iss":
            raise InputFileError(
                f"{script.name} downloads the runtime pack {script.pack}.exe and its parts, and "
                f"neither the setups folder nor {folder} holds them; give the cache that "
                "compiled it (--cache-dir), or copy them into the setups folder."
            )
    return tuple(found)


def _script(path: Path, setups: tuple[Path, ...]) -> SetupScript:
    directives = read_directives(path)
    base = directives.get("outputbasefilename", "setup")
    by_name = {p.name.lower(): p for p in setups}
    setup = by_name.get(f"{base}.exe".lower())
    prefix = f"{base}-".lower()
    slices = tuple(
        p for p in setups if p.name.lower().startswith(prefix) and p.suffix.lower() == ".bin"
    )
    pack = pack_name(path.read_text(encoding="utf-8-sig"))
    return SetupScript(path.name, directives, setup, slices, pack)


def read_directives(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: cannot read the setup script: {exc}.") from None
    return setup_directives(text)


def licence_texts(dist: Path, lock: Lock) -> dict[str, str]:
    """Each artifact's shipped licence files (kind `license`), joined in name order: the
    texts an SBOM's LicenseRef identifiers carry."""
    texts: dict[str, list[str]] = {}
    for item in sorted(lock.files, key=lambda entry: entry.name):
        if item.kind != "license" or not item.artifact:
            continue
        path = dist / item.name
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            raise InputFileError(
                f"{path}: the lock lists this licence file, and it cannot be read "
                f"({exc.strerror}); build the bundle again."
            ) from None
        texts.setdefault(item.artifact, []).append(text)
    return {name: "\n\n".join(parts) for name, parts in texts.items()}
