"""Act layer: exclusive locks across processes, on lock files: one writer per cache blob, one
build per output folder, one Wine prefix set-up at a time. Another holder makes a process wait,
saying so, for at most the limit the caller passes: the command's $BUNDLE_LOCK_TIMEOUT, which it
reads once (bundler.config.settings.lock_timeout) and hands down."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from bundler.config.variables import LOCK_TIMEOUT
from bundler.errors import BusyError
from bundler.reporter import SILENT, Note

LOCK_TIMEOUT_ENV = LOCK_TIMEOUT.name  # the name: bundler.config.variables, the one table
WAIT_NOTICE = 1.0  # seconds a lock is waited for before file_lock says so


@contextmanager
def file_lock(
    path: Path, what: str, note: Note = SILENT.note, *, limit: float | None, remove: bool = False
) -> Iterator[None]:
    """An exclusive lock across processes (filelock: flock on Unix, LockFileEx on Windows),
    held while the block runs. Another holder makes this one wait, saying so through `note`
    after a second, for up to `limit` seconds (BusyError; None: as long as it takes). The
    command passes its $BUNDLE_LOCK_TIMEOUT, which the message names.

    With `remove` the lock file is deleted before release, so it leaves no trace (an output
    folder must hold only what builds put there). A waiter that then locks the deleted file
    sees it has no name left and opens the path again (filelock >= 3.20.4), so two holders
    never overlap; on Windows the file cannot be deleted while open and filelock removes it
    on release."""
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
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
