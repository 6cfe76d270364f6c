"""Act layer: rendered outputs kept between runs, so that a build whose setup script and
post-build files come out as before does not need the template engine at all.

A rendering is a pure function of the template sources, the filters (bundler/render/escaping.py)
and the values. The values of our renderers are plain data (dicts, lists, str, int, bool, None):
the key is the SHA-256 of every template file, engine.py and escaping.py, the installed jinja2
(its file's place, size and time: an upgrade changes them), the template's name and the values'
repr, which tells True from 1 and a tuple from a list. Anything else in the values, a subclass
of str or int included (it may render other than its repr), is simply not cached. An entry
carries the SHA-256 of its text and is written atomically, so a damaged entry is a miss, never
a wrong output. Only successful renderings are stored, so a value a filter refuses is refused again.
The KEEP entries used last are kept.

The folder is shared with jinja2's compiled templates: <cache>/templates (bundle's cache folder,
--cache-dir, $BUNDLE_CACHE_DIR or the platform's; `bundle cache clean` empties it). The functions
here take that folder; bundler.render.engine.Templates, which a command creates from its cache
folder and passes to every renderer, owns it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from contextlib import suppress
from pathlib import Path

from bundler.disk import files
from bundler.target import resources

KEEP = 200  # entries; one build writes three of a few kB each
_PREFIX = "rendered-"
_PLAIN = frozenset({str, int, float, bool, type(None)})


def cache_folder(root: Path | None) -> Path | None:
    """<root>/templates, created; None without a root or when it cannot be created (then
    nothing is kept)."""
    if root is None:
        return None
    folder = root / "templates"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


def output_key(template: str, values: dict[str, object], sources: bytes) -> str | None:
    """The key of this rendering (`sources`: sources_digest()), or None when a value is not
    plain data."""
    try:
        if not _plain(values):
            return None
    except RecursionError:  # a list holding itself, say: jinja2 alone decides what it gives
        return None
    digest = hashlib.sha256(sources)
    digest.update(f"{template}\0{values!r}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def load(folder: Path, key: str) -> str | None:
    """The entry `key` in `folder` (cache_folder's), or None when it is missing or damaged."""
    entry = folder / f"{_PREFIX}{key}"
    try:
        data = entry.read_bytes()
    except OSError:
        return None
    checksum, _, body = data.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != checksum:
        return None
    with suppress(OSError):
        os.utime(entry)  # used now: pruned last
    try:
        return body.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def store(folder: Path, key: str, text: str) -> None:
    """Best effort: a folder that cannot be written only means rendering every time."""
    body = text.encode("utf-8", "surrogatepass")
    entry = folder / f"{_PREFIX}{key}"
    temp = folder / f".{_PREFIX}{key}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        temp.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
        files.replace(temp, entry)
    except OSError:
        with suppress(OSError):
            temp.unlink(missing_ok=True)
        return
    _prune(folder)


def _prune(folder: Path) -> None:
    with suppress(OSError):
        entries = [entry for entry in os.scandir(folder) if entry.name.startswith(_PREFIX)]
        if len(entries) <= KEEP:
            return
        entries.sort(key=lambda entry: entry.stat().st_mtime_ns)
        for entry in entries[: len(entries) - KEEP]:
            with suppress(OSError):
                os.unlink(entry.path)


def _plain(value: object) -> bool:
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is list or kind is tuple:
        return all(_plain(item) for item in value)  # type: ignore[attr-defined]
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())  # type: ignore[attr-defined]
    return False


def sources_digest() -> bytes:
    """Every template (one may include another) and the filters' module; the owner of the
    caches (bundler.render.engine.Templates) reads them once per command."""
    digest = hashlib.sha256()
    folder = resources.templates_dir()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    for module in ("engine.py", "escaping.py"):  # the environment, the filters
        digest.update((Path(__file__).parent / module).read_bytes())
    digest.update(_jinja2_identity())
    return digest.digest()


def _jinja2_identity() -> bytes:
    """Which jinja2 would render, without importing it (that is what a hit saves)."""
    spec = importlib.util.find_spec("jinja2")
    origin = spec.origin if spec is not None else None
    if origin is None:
        return b"no jinja2"
    found = os.stat(origin)
    return f"{origin}\0{found.st_size}\0{found.st_mtime_ns}".encode()
