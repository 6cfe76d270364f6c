"""Act layer: the content-addressed download cache.

Layout under the cache root (`--cache-dir`, else $BUNDLE_CACHE_DIR, else the platform cache folder,
bundler.config.cache_root):

    blobs/sha256/<hash>         verified archives, named by their SHA-256
    blobs/sha256/<hash>.json    what the blob was called and where it came from (BlobIndex)
    extracted/<hash>/           the members bundle needs, extracted once per archive
    extracted/<hash>/.hashes.json  the members' hashes, by size and time (HashMemo)
    tmp/                        partial downloads (*.part), resumed by the next run
    templates/                  compiled templates and rendered scripts (render.engine)
    runtime-packs/<hash16>-<digest8>/  compiled runtime packs (docs/runtime-pack.md); `packs/`
                                before issue 39, renamed on first use (runtime_packs)
    locks/<hash>.lock           one writer per blob, across processes
    locks/runtime-packs.lock    one process moves the old `packs/` (runtime_packs)

Invariant: a file under blobs/ has been verified against its pin before it was renamed there,
so a hit needs only a cheap size check; `--verify` re-hashes it anyway.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from bundler.acquire.hash_memo import HashMemo
from bundler.config.cache_root import OLD_RUNTIME_PACKS, runtime_packs_folder
from bundler.disk import files
from bundler.disk.digest import HASH_BLOCK, file_sha256, files_sha256
from bundler.disk.process_locks import file_lock
from bundler.errors import IntegrityError, OutputError
from bundler.reporter import SILENT, Note, Reporter


@dataclass(frozen=True)
class CacheEntry:
    sha256: str
    path: Path
    size: int
    names: tuple[str, ...]  # file names the blob was fetched as
    origins: tuple[str, ...]  # URLs, "pip:pkg==ver", mirror paths
    added: str


@dataclass(frozen=True)
class PackEntry:
    """A compiled runtime pack in the cache: its folder `<hash16>-<digest8>` (the pack's hash,
    then a digest of the script it was compiled from; docs/runtime-pack.md)."""

    name: str
    path: Path
    size: int


class BlobIndex:
    """The record beside each blob (`<hash>.json`): every name it was fetched as, every origin,
    and when it was first added. Records only grow: a second origin of the same bytes joins the
    first."""

    def __init__(self, blobs: Path, write_error: Callable[[OSError], OutputError]) -> None:
        self.blobs = blobs
        self.write_error = write_error

    def remember(self, sha256: str, name: str, origin: str) -> None:
        record = self.record(sha256)
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

    def record(self, sha256: str) -> dict[str, list[str] | str]:
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
            record = self.record(path.name)
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


class BlobChecks:
    """A stored blob checked against its pin: the cheap size check of every hit, the re-hash
    of --verify (many blobs at once), and the removal of a damaged blob with its extracted
    tree, so that the next run fetches it anew."""

    def __init__(self, blobs: Path, extract_root: Path) -> None:
        self.blobs = blobs
        self.extract_root = extract_root

    def _blob(self, sha256: str) -> Path:
        return self.blobs / sha256

    def lookup(self, sha256: str, size: int | None = None, verify: bool = False) -> Path | None:
        """The verified blob, or None. A blob whose size or (with verify) hash is wrong was
        damaged after it was stored: it is removed and IntegrityError says so."""
        path = self._blob(sha256)
        if not path.is_file():
            return None
        actual_size = path.stat().st_size
        if size is not None and actual_size != size:
            self.discard(sha256)
            raise IntegrityError(
                f"cached {path} has {actual_size:,} bytes, the pin says {size:,}; "
                "it was removed: run the command again to fetch it anew."
            )
        if verify and (actual := file_sha256(path)) != sha256:
            self.discard(sha256)
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
        actual = files_sha256([self._blob(sha256) for sha256 in present])
        for sha256, found in zip(present, actual, strict=True):
            if found != sha256:
                self.discard(sha256)
                damaged[sha256] = (
                    f"cached {self._blob(sha256)} had SHA-256 {found}, expected {sha256}; "
                    "it was removed"
                )
        return damaged

    def discard(self, sha256: str) -> None:
        self._blob(sha256).unlink(missing_ok=True)
        shutil.rmtree(self.extract_root / sha256, ignore_errors=True)


class Cache:
    """The content-addressed download cache under `root`: its layout, locks and intake here;
    the checks of stored blobs (`checks`), their records (`index`) and the hashes of extracted
    members (`memo`) in pieces of their own. `lock_timeout`: how long to wait for another
    process's lock in it (the command's $BUNDLE_LOCK_TIMEOUT; None: as long as it takes)."""

    def __init__(self, root: Path, report: Reporter = SILENT, *, lock_timeout: float | None):
        self.root, self.report, self.lock_timeout = root, report, lock_timeout
        self.blobs = root / "blobs" / "sha256"
        self.extract_root = root / "extracted"
        self.tmp = root / "tmp"
        self.checks = BlobChecks(self.blobs, self.extract_root)
        self.index = BlobIndex(self.blobs, self.write_error)
        self.memo = HashMemo(self.extract_root, self.write_error)

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
        path = self.root / "locks" / f"{sha256}.lock"
        with ExitStack() as held:
            try:
                held.enter_context(file_lock(path, what, self.report.note, limit=self.lock_timeout))
            except OSError as exc:
                raise self.write_error(exc) from exc
            yield

    def lookup(self, sha256: str, size: int | None = None, verify: bool = False) -> Path | None:
        """The verified blob, or None (BlobChecks.lookup)."""
        return self.checks.lookup(sha256, size, verify)

    def verify(self, blobs: Sequence[tuple[str, int | None]]) -> dict[str, str]:
        """Re-hash several blobs in parallel (BlobChecks.verify)."""
        return self.checks.verify(blobs)

    def add(self, verified: Path, sha256: str, name: str, origin: str) -> Path:
        """Move an already verified file (in the cache's filesystem) into the store."""
        target = self.blob(sha256)
        files.replace(verified, target)
        self.index.remember(sha256, name, origin)
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

    def import_own(self, written: Path, sha256: str, name: str, origin: str) -> Path:
        """Store a file another program wrote into the cache's tmp/ (pip's download): hashed
        where it lies, then renamed into the store, so its bytes are written once."""
        actual = file_sha256(written)
        if actual != sha256:
            written.unlink()
            raise IntegrityError(
                f"{origin}: SHA-256 {actual} does not match the pin {sha256}; the index "
                "serves a different file: check the index (pip's settings) or the pin."
            )
        return self.add(written, sha256, name, origin)

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

    def entries(self) -> list[CacheEntry]:
        return self.index.entries()

    def packs(self) -> list[PackEntry]:
        """The compiled runtime packs, by folder name."""
        folder = runtime_packs(self.root, self.report.note, lock_timeout=self.lock_timeout)
        if not folder.is_dir():
            return []
        return [
            PackEntry(path.name, path, _folder_size(path))
            for path in sorted(folder.iterdir())
            if path.is_dir()
        ]

    def cleaned(self, everything: bool = False) -> list[Path]:
        """What `clean` removes: partial downloads, extracted trees and kept templates; with
        everything, also the blobs and the compiled runtime packs (each a one-time cost), in
        their folder and in the one from before issue 39, should an older bundle have made it
        again."""
        quick = [self.tmp, self.extract_root, self.root / "templates"]
        packs = [runtime_packs_folder(self.root), self.root / OLD_RUNTIME_PACKS]
        return quick + ([self.blobs, *packs] if everything else [])

    def cleanable(self, everything: bool = False) -> int:
        """The bytes `clean` would free."""
        return sum(_folder_size(folder) for folder in self.cleaned(everything))

    def clean(self, everything: bool = False) -> int:
        """Remove what `cleaned` lists. Returns the number of bytes freed."""
        freed = 0
        for folder in self.cleaned(everything):
            if folder.is_dir():
                freed += _folder_size(folder)
                shutil.rmtree(folder)
        return freed

    def known_hash(self, archive_sha256: str, member: str, path: Path) -> str | None:
        """The SHA-256 of an extracted member, if an earlier build hashed this very file."""
        return self.memo.known_hash(archive_sha256, member, path)

    def remember_hash(self, archive_sha256: str, member: str, path: Path, sha256: str) -> None:
        self.memo.remember_hash(archive_sha256, member, path, sha256)


def runtime_packs(root: Path, note: Note = SILENT.note, *, lock_timeout: float | None) -> Path:
    """The compiled runtime packs' folder of the cache `root`, its folder from before issue 39
    (`packs/`) renamed to it on first use: one rename of the whole folder, so each pack is in
    one place, whole. The move holds the cache's lock for it and looks again once it has it, so
    two processes move the folder once. Where both folders exist (an older bundle compiled a
    pack after the move), or the rename is refused (a read-only cache; on Windows a program
    that keeps a file in it open), the old folder stays: its packs are compiled again when a
    setup needs them, and `cache clean --all` removes it. `lock_timeout`: the command's
    $BUNDLE_LOCK_TIMEOUT (bundler.disk.process_locks)."""
    folder = runtime_packs_folder(root)
    old = root / OLD_RUNTIME_PACKS
    if folder.exists() or not old.is_dir():
        return folder
    try:
        lock = root / "locks" / "runtime-packs.lock"
        with file_lock(lock, "the runtime packs' folder", note, limit=lock_timeout):
            if old.is_dir() and not folder.exists():
                _rename_patiently(old, folder)
    except OSError as exc:
        if old.is_dir():
            note(
                f"bundle: kept {old}, which could not be renamed to {folder.name} "
                f"({exc.strerror or exc}): its runtime packs are compiled again when needed, and "
                "`bundle cache clean --all` removes it"
            )
    return folder


def _rename_patiently(old: Path, new: Path) -> None:
    """os.rename, retried while Windows refuses it as bundler.disk.files retries a rename (a
    scanner or another program holds a file in the folder); PermissionError when it stays."""
    for delay in (*files.RETRY_DELAYS, None):
        try:
            os.rename(old, new)
            return
        except PermissionError:
            if not files.WINDOWS or delay is None:
                raise
            time.sleep(delay)


def _folder_size(folder: Path) -> int:
    """The bytes of the files under `folder` (0 when it is not there)."""
    if not folder.is_dir():
        return 0
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
