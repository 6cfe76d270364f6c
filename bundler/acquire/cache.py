"""Act layer: the content-addressed download cache.

Layout under the cache root (`--cache-dir`, else $BUNDLE_CACHE_DIR, else the platform cache folder):

    blobs/sha256/<hash>         verified archives, named by their SHA-256
    blobs/sha256/<hash>.json    what the blob was called and where it came from
    extracted/<hash>/           the members bundle needs, extracted once per archive
    tmp/                        partial downloads (*.part), resumed by the next run
    locks/<hash>.lock           one writer per blob, across processes

Invariant: a file under blobs/ has been verified against its pin before it was renamed there,
so a hit needs only a cheap size check; `--verify` re-hashes it anyway.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from bundler import files
from bundler.errors import BusyError, IntegrityError, OutputError
from bundler.notes import note
from bundler.settings import env_number

HASH_BLOCK = 1 << 20
LOCK_TIMEOUT_ENV = "BUNDLE_LOCK_TIMEOUT"
WAIT_NOTICE = 1.0  # seconds a lock is waited for before file_lock says so


CACHE_ENV = "BUNDLE_CACHE_DIR"


def cache_root(flag: Path | None) -> Path:
    """The cache folder of one command: its --cache-dir (`flag`), else $BUNDLE_CACHE_DIR, else
    the platform's per-user cache folder. Each command resolves it once and passes it down
    (Cache, the templates' caches, the audit's Wine prefix); nothing remembers it elsewhere."""
    return flag or env_cache_dir() or platform_cache_dir()


def default_cache_dir() -> Path:
    """The cache folder without a --cache-dir: $BUNDLE_CACHE_DIR, else the platform's."""
    return cache_root(None)


def env_cache_dir() -> Path | None:
    """$BUNDLE_CACHE_DIR, when set and not blank."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured) if configured else None


def platform_cache_dir() -> Path:
    """The platform's per-user cache folder (platformdirs: $XDG_CACHE_HOME/bundle or
    ~/.cache/bundle, %LOCALAPPDATA%\\bundle\\Cache on Windows, ~/Library/Caches/bundle on
    macOS)."""
    from platformdirs import user_cache_path

    return user_cache_path("bundle", appauthor=False)


def file_sha256(path: Path) -> str:
    """One pass, into one reused buffer. hashlib and the reads release the GIL, so several
    threads hash several files at the speed of several cores."""
    digest = hashlib.sha256()
    buffer = bytearray(HASH_BLOCK)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


def files_sha256(paths: Sequence[Path]) -> list[str]:
    """file_sha256 of every path, each file on its own thread: with more files than cores the
    kernel shares the cores out, so the pass ends after max(largest file, total / cores) of
    hashing time instead of the sum (benchmarks/README.md, P5)."""
    if len(paths) <= 1:
        return [file_sha256(path) for path in paths]
    with ThreadPoolExecutor(max_workers=min(len(paths), 16)) as pool:
        return list(pool.map(file_sha256, paths))


def lock_timeout() -> float | None:
    """$BUNDLE_LOCK_TIMEOUT: seconds to wait for another bundle process's lock; unset, wait as
    long as it takes (that process is downloading or writing what this one needs)."""
    return env_number(LOCK_TIMEOUT_ENV, "seconds", "600")


@contextmanager
def file_lock(path: Path, what: str, *, remove: bool = False) -> Iterator[None]:
    """An exclusive lock across processes (filelock: flock on Unix, LockFileEx on Windows),
    held while the block runs. Another holder makes this one wait, saying so on stderr after
    a second, for up to $BUNDLE_LOCK_TIMEOUT (BusyError).

    With `remove` the lock file is deleted before release, so it leaves no trace (an output
    folder must hold only what builds put there). A waiter that then locks the deleted file
    sees it has no name left and opens the path again (filelock >= 3.20.4), so two holders
    never overlap; on Windows the file cannot be deleted while open and filelock removes it
    on release."""
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    limit = lock_timeout()
    try:
        lock.acquire(timeout=WAIT_NOTICE if limit is None else min(limit, WAIT_NOTICE))
    except Timeout:
        if limit is not None and limit <= WAIT_NOTICE:
            raise _busy(path, what, limit) from None
        note(f"bundle: waiting for {what}: another bundle process holds {path}")
        try:
            lock.acquire(timeout=-1 if limit is None else limit - WAIT_NOTICE)
        except Timeout:
            raise _busy(path, what, limit) from None
    try:
        yield
    finally:
        if remove:
            with suppress(OSError):  # while still held: see the docstring
                path.unlink(missing_ok=True)
        lock.release()


def _busy(path: Path, what: str, limit: float | None) -> BusyError:
    return BusyError(
        f"{path}: another bundle process still holds it after {limit:g} s ({what}); let it "
        f"finish, or raise ${LOCK_TIMEOUT_ENV} (unset: wait as long as it takes)."
    )


@dataclass(frozen=True)
class CacheEntry:
    sha256: str
    path: Path
    size: int
    names: tuple[str, ...]  # file names the blob was fetched as
    origins: tuple[str, ...]  # URLs, "pip:pkg==ver", mirror paths
    added: str


class Cache:
    """The content-addressed download cache under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.blobs = root / "blobs" / "sha256"
        self.extract_root = root / "extracted"
        self.tmp = root / "tmp"
        self._memos: dict[str, dict[str, list[str | int]]] = {}  # .hashes.json, read once

    def prepare(self) -> None:
        try:
            for folder in (self.blobs, self.extract_root, self.tmp):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self.write_error(exc) from exc

    def blob(self, sha256: str) -> Path:
        return self.blobs / sha256

    @contextmanager
    def lock(self, sha256: str, what: str) -> Iterator[None]:
        """One writer per blob (download or extraction) across processes."""
        with ExitStack() as held:
            try:
                held.enter_context(file_lock(self.root / "locks" / f"{sha256}.lock", what))
            except OSError as exc:
                raise self.write_error(exc) from exc
            yield

    def lookup(self, sha256: str, size: int | None = None, verify: bool = False) -> Path | None:
        """The verified blob, or None. A blob whose size or (with verify) hash is wrong was
        damaged after it was stored: it is removed and IntegrityError says so."""
        path = self.blob(sha256)
        if not path.is_file():
            return None
        actual_size = path.stat().st_size
        if size is not None and actual_size != size:
            self._discard(sha256)
            raise IntegrityError(
                f"cached {path} has {actual_size:,} bytes, the pin says {size:,}; "
                "it was removed: run the command again to fetch it anew."
            )
        if verify and (actual := file_sha256(path)) != sha256:
            self._discard(sha256)
            raise IntegrityError(
                f"cached {path} has SHA-256 {actual}, expected {sha256}; "
                "it was removed: run the command again to fetch it anew."
            )
        return path

    def verify(self, blobs: Sequence[tuple[str, int | None]]) -> dict[str, str]:
        """Re-hash several blobs in parallel. A damaged one (wrong size or hash) is removed, so
        that the caller fetches it anew instead of failing on bytes it could replace; returns
        {sha256: what was wrong} for those."""
        damaged: dict[str, str] = {}
        present = []
        for sha256, size in blobs:
            try:
                if self.lookup(sha256, size) is not None:  # the cheap size check first
                    present.append(sha256)
            except IntegrityError as error:
                damaged[sha256] = str(error)
        actual = files_sha256([self.blob(sha256) for sha256 in present])
        for sha256, found in zip(present, actual, strict=True):
            if found != sha256:
                self._discard(sha256)
                damaged[sha256] = (
                    f"cached {self.blob(sha256)} had SHA-256 {found}, expected {sha256}; "
                    "it was removed"
                )
        return damaged

    def add(self, verified: Path, sha256: str, name: str, origin: str) -> Path:
        """Move an already verified file (in the cache's filesystem) into the store."""
        target = self.blob(sha256)
        files.replace(verified, target)
        self.remember(sha256, name, origin)
        return target

    def import_copy(self, source: Path, sha256: str, name: str, origin: str) -> Path:
        """Copy a file from elsewhere (a mirror folder), hashing while copying, then store it."""
        self.prepare()
        digest = hashlib.sha256()
        with source.open("rb") as handle:
            temp = self._copy_in(handle, digest)
        if digest.hexdigest() != sha256:
            temp.unlink()
            raise IntegrityError(
                f"{source}: SHA-256 {digest.hexdigest()} does not match the pin {sha256}; "
                "the mirror holds a different file: replace it."
            )
        return self.add(temp, sha256, name, origin)

    def _copy_in(self, handle: IO[bytes], digest: hashlib._Hash) -> Path:
        """`handle`'s bytes in a new temporary file of the cache, hashed on the way; a cache
        that cannot take them (full, read-only) is an OutputError, with nothing left behind."""
        temp: Path | None = None
        try:
            with tempfile.NamedTemporaryFile(dir=self.tmp, suffix=".part", delete=False) as out:
                temp = Path(out.name)
                for block in iter(lambda: handle.read(HASH_BLOCK), b""):
                    digest.update(block)
                    out.write(block)
        except OSError as exc:
            if temp is not None:
                temp.unlink(missing_ok=True)
            raise self.write_error(exc) from exc
        return temp

    def write_error(self, exc: OSError) -> OutputError:
        return OutputError(
            f"{self.root}: cannot write to the cache ({exc.strerror or exc}); make room there "
            "or make it writable, or give bundle another cache folder (--cache-dir DIR or "
            "$BUNDLE_CACHE_DIR), then run it again."
        )

    def remember(self, sha256: str, name: str, origin: str) -> None:
        record = self._record(sha256)
        record["names"] = sorted(set(record.get("names", [])) | {name})
        record["origins"] = sorted(set(record.get("origins", [])) | {origin})
        record.setdefault("added", datetime.now(UTC).isoformat(timespec="seconds"))
        temp = self.blobs / f".{sha256}.json.tmp"
        try:
            temp.write_text(json.dumps(record, indent=2))
            files.replace(temp, self.blobs / f"{sha256}.json")
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise self.write_error(exc) from exc

    def _record(self, sha256: str) -> dict[str, list[str] | str]:
        path = self.blobs / f"{sha256}.json"
        try:
            data = json.loads(path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def entries(self) -> list[CacheEntry]:
        if not self.blobs.is_dir():
            return []
        found = []
        for path in sorted(self.blobs.iterdir()):
            if path.suffix or path.name.startswith("."):
                continue
            record = self._record(path.name)
            found.append(
                CacheEntry(
                    sha256=path.name,
                    path=path,
                    size=path.stat().st_size,
                    names=tuple(record.get("names", ())),
                    origins=tuple(record.get("origins", ())),
                    added=str(record.get("added", "")),
                )
            )
        return found

    def clean(self, everything: bool = False) -> int:
        """Remove partial downloads, extracted trees and kept templates (and with everything,
        the blobs). Returns the number of bytes freed."""
        kept = [self.tmp, self.extract_root, self.root / "templates"]
        targets = kept + ([self.blobs] if everything else [])
        freed = 0
        for folder in targets:
            if folder.is_dir():
                freed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
                shutil.rmtree(folder)
        return freed

    def _discard(self, sha256: str) -> None:
        self.blob(sha256).unlink(missing_ok=True)
        shutil.rmtree(self.extract_root / sha256, ignore_errors=True)

    def known_hash(self, archive_sha256: str, member: str, path: Path) -> str | None:
        """The SHA-256 of an extracted member, if an earlier build hashed this very file."""
        record = self._hashes(archive_sha256).get(member)
        stat = path.stat()
        if record and record[1:] == [stat.st_size, stat.st_mtime_ns]:
            return str(record[0])
        return None

    def remember_hash(self, archive_sha256: str, member: str, path: Path, sha256: str) -> None:
        self._memos.pop(archive_sha256, None)  # re-read: keep what other processes added
        hashes = self._hashes(archive_sha256)
        stat = path.stat()
        hashes[member] = [sha256, stat.st_size, stat.st_mtime_ns]
        memo = self.extract_root / archive_sha256 / ".hashes.json"
        temp = memo.with_name(f".hashes.{os.getpid()}.tmp")
        try:
            temp.write_text(json.dumps(hashes, indent=1, sort_keys=True))
            files.replace(temp, memo)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise self.write_error(exc) from exc

    def _hashes(self, archive_sha256: str) -> dict[str, list[str | int]]:
        """The memo of one tree, read once per Cache object (a build asks for every member)."""
        if archive_sha256 not in self._memos:
            memo = self.extract_root / archive_sha256 / ".hashes.json"
            try:
                data = json.loads(memo.read_text())
            except (OSError, ValueError):
                data = {}
            self._memos[archive_sha256] = data if isinstance(data, dict) else {}
        return self._memos[archive_sha256]
