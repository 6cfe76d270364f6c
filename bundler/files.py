"""Act layer, core: file operations whose semantics differ between Windows and Linux, written
once so that every wing gets the Windows behaviour right.

- Windows refuses to rename over or delete a file that another process holds open without
  FILE_SHARE_DELETE: a loaded DLL, a file an anti-virus or indexer is scanning right after it
  was written. The scanners let go within a second or two, so a refused rename is retried with
  backoff (RETRY_DELAYS); a refusal that outlasts them is a program that keeps the file open
  (most often the app itself), and the error names the file and says to close it.
- Windows also refuses to replace or delete a read-only file; xcopy /R and MSBuild's Copy
  (OverwriteReadOnlyFiles) clear the attribute first, and so does this module, for the files
  the caller has already decided it may replace.
- Two names that differ only by case are one file on Windows (`case_collisions`).
- Fast copies: a reflink (FICLONE) on Linux filesystems that share blocks, block cloning
  (FSCTL_DUPLICATE_EXTENTS_TO_FILE) on Windows volumes that support it (ReFS, Dev Drive);
  `clone` says False anywhere else and the caller copies. See docs/windows.md for the sources.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from bundler.errors import FileInUseError

# Seconds between attempts at a refused rename or delete: 3.1 s in all. Windows Defender's
# on-access scan of a freshly written DLL of 600 MB was seen to hold it for about a second.
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
# What Windows answers while another process has the file open: ERROR_ACCESS_DENIED (a mapped
# image, or a handle without FILE_SHARE_DELETE), ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION.
_IN_USE = {5, 32, 33}
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int), share the source's blocks
# What a filesystem without block sharing answers to FICLONE: then the caller copies.
NO_FAST_PATH = {
    errno.EBADF, errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
    errno.ENOTTY, errno.EPERM, errno.ETXTBSY,
}  # fmt: skip
WINDOWS = sys.platform == "win32"


def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """os.replace, patient with Windows' transient refusals (see the module docstring); a
    read-only `target` is made writable first. Raises FileInUseError when the target stays
    held, OSError for anything else (a full disk, a folder without write permission)."""
    _patiently(lambda: os.replace(source, target), Path(target))


def remove(path: Path) -> None:
    """Delete `path` if it exists, read-only or briefly held as `replace` allows."""
    _patiently(lambda: path.unlink(missing_ok=True), path)


def _patiently(action: Callable[[], None], target: Path) -> None:
    for delay in (*RETRY_DELAYS, None):
        try:
            action()
            return
        except PermissionError as exc:
            if not WINDOWS or getattr(exc, "winerror", None) not in _IN_USE:
                raise
            if _clear_read_only(target):
                continue  # retried at once: the attribute, not a holder, refused it
            if delay is None:
                raise FileInUseError(_in_use_message(target, exc)) from exc
            time.sleep(delay)


def _clear_read_only(path: Path) -> bool:
    """True when `path` was read-only and is now writable."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    if mode & stat.S_IWRITE:
        return False
    os.chmod(path, mode | stat.S_IWRITE)
    return True


def _in_use_message(target: Path, exc: PermissionError) -> str:
    waited = sum(RETRY_DELAYS)
    return (
        f"{target}: Windows refused to replace or remove it for {waited:.0f} s ({exc.strerror}):"
        " another program has it open, most often the app itself (or a debugger or service that"
        " loaded it). Close that program, then run the command again; nothing else in the"
        " folder was left half-written."
    )


def case_collisions(names: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of names that differ only by case (the first spelling seen, then the other): on
    Windows each pair is one file, and the second write would silently replace the first."""
    seen: dict[str, str] = {}
    pairs = []
    for name in names:
        first = seen.setdefault(name.lower(), name)
        if first != name:
            pairs.append((first, name))
    return pairs


# --- fast copies --------------------------------------------------------------------------------


def clone(source: int, target: int, size: int) -> bool:
    """Make the open file `target` (empty) share the blocks of `source` (`size` bytes): no
    bytes are copied and no space is used. False where the volume cannot, with `target` still
    empty, so the caller copies; OSError when cloning started and failed."""
    if sys.platform.startswith("linux"):
        return _reflink(source, target)
    if WINDOWS:
        from bundler import winclone

        return winclone.duplicate_extents(source, target, size)
    return False


def _reflink(source: int, target: int) -> bool:
    import fcntl

    try:
        fcntl.ioctl(target, FICLONE, source)
        return True
    except OSError as exc:
        if exc.errno in NO_FAST_PATH:
            return False
        raise
