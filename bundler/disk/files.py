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
  `clone` says False anywhere else, and `copy_file` then copies (copy_file_range or sendfile
  where the kernel has them, else by hand). See docs/windows.md for the sources.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from bundler.errors import FileInUseError

# Seconds between attempts at a refused rename or delete: 3.1 s in all. Windows Defender's
# on-access scan of a freshly written DLL of 600 MB was seen to hold it for about a second.
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
# What Windows answers while another process has the file open: ERROR_ACCESS_DENIED (a mapped
# image, or a handle without FILE_SHARE_DELETE), ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION.
_IN_USE = {5, 32, 33}
COPY_CHUNK = 64 << 20  # bytes per kernel copy call: the progress bar moves between calls
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


def write_atomically(path: Path, data: bytes) -> None:
    """`data` into `path` through a temporary name beside it, then `replace`: a reader sees the
    old file or the new one, never a part. On any failure the temporary file is removed and the
    error raised (OSError, or FileInUseError where Windows keeps `path` held)."""
    temp = path.with_name(f".{path.name}.bundle-tmp")
    try:
        temp.write_bytes(data)
        replace(temp, path)
    except Exception:
        with contextlib.suppress(OSError):  # e.g. the parent is a file: no temporary file either
            temp.unlink(missing_ok=True)
        raise


def remove(path: Path) -> None:
    """Delete `path` if it exists, read-only or briefly held as `replace` allows."""
    _patiently(lambda: path.unlink(missing_ok=True), path)


def wait_until_free(paths: Iterable[Path]) -> None:
    """Before a deployment changes anything: each existing path in `paths` (files it will
    replace or remove) is opened as a replace needs it, and one that another process holds
    is waited for as `replace` waits, then named by FileInUseError. So a refused build leaves
    the folder as it was, instead of failing at the held file with the others already
    replaced. Windows only: elsewhere a file's name is replaced whoever has it open."""
    if sys.platform != "win32":
        return
    for path in paths:
        _patiently(partial(_open_for_replace, path), path)


def _open_for_replace(path: Path) -> None:
    """Open `path` for delete and write access, sharing everything, and close it: refused with
    ERROR_SHARING_VIOLATION while a process holds it without FILE_SHARE_DELETE, or has it
    loaded (an image section refuses write access, so a loaded DLL does too, though Windows
    lets anyone rename it); ERROR_ACCESS_DENIED for a read-only file."""
    if sys.platform != "win32":  # for mypy: ctypes.WinDLL exists on Windows alone
        return
    import ctypes
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.CreateFileW.restype = wintypes.HANDLE
    kernel32.CreateFileW.argtypes = (
        wintypes.LPCWSTR, wintypes.DWORD, wintypes.DWORD, ctypes.c_void_p,
        wintypes.DWORD, wintypes.DWORD, wintypes.HANDLE,
    )  # fmt: skip
    kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)
    delete_and_write, share_all, open_existing = 0x00010002, 0x7, 3
    handle = kernel32.CreateFileW(
        str(path), delete_and_write, share_all, None, open_existing, 0, None
    )
    if handle is None or handle == wintypes.HANDLE(-1).value:
        code = ctypes.get_last_error()
        if code not in (2, 3):  # ERROR_FILE_NOT_FOUND, _PATH_NOT_FOUND: nothing to wait for
            raise ctypes.WinError(code)
        return
    kernel32.CloseHandle(handle)


def _patiently(action: Callable[[], None], target: Path) -> None:
    for delay in (*RETRY_DELAYS, None):
        try:
            action()
            return
        except PermissionError as exc:
            if not WINDOWS or getattr(exc, "winerror", None) not in _IN_USE:
                raise
            if target.is_dir():
                raise  # a folder stands there (Linux: IsADirectoryError), no holder to wait for
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
        f"{target}: Windows refused to replace or remove it for {waited:.0f} s"
        f" ({str(exc.strerror or exc).rstrip('.')}):"
        " another program has it open, most often the app itself (or a debugger or service that"
        " loaded it). Close that program, then run the command again; nothing else in the"
        " folder was left half-written."
    )


def too_long(path: str | os.PathLike[str], exc: OSError) -> str | None:
    """The fix when Windows refused `path` for its length, else None. Without long paths
    enabled (the default), Windows' file functions refuse a full path of MAX_PATH (260)
    characters or more, a folder's from 248, with ERROR_PATH_NOT_FOUND or
    ERROR_FILENAME_EXCED_RANGE; the \\\\?\\ prefix lifts the limit for that path."""
    full = os.path.abspath(path)
    refused = getattr(exc, "winerror", None) in (3, 206)
    if not refused or len(full) < 248 or full.startswith("\\\\?\\"):
        return None
    return (
        f"The path is {len(full)} characters long, and a Windows without long paths refuses "
        "260 or more (248 for a folder). Enable them (LongPathsEnabled = 1 under HKLM\\SYSTEM\\"
        'CurrentControlSet\\Control\\FileSystem, or the policy "Enable Win32 long paths"), '
        "give the folder with the \\\\?\\ prefix, or choose a shorter one."
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


def as_listed(path: Path) -> Path:
    """`path` with its file name spelled as its folder lists it: Windows opens hello.exe for
    HELLO.EXE, and the bundle ships, locks and shows the file's own name, whatever the user
    typed. Unchanged where the system itself does not find the file that way (a Linux
    folder: the read that follows names the missing file), or no single entry matches."""
    if not path.exists():
        return path
    try:
        names = os.listdir(path.parent)
    except OSError:
        return path
    if path.name in names:
        return path
    matches = [name for name in names if name.casefold() == path.name.casefold()]
    return path.with_name(matches[0]) if len(matches) == 1 else path


# --- fast copies --------------------------------------------------------------------------------


def clone(source: int, target: int, size: int) -> bool:
    """Make the open file `target` (empty) share the blocks of `source` (`size` bytes): no
    bytes are copied and no space is used. False where the volume cannot, with `target` still
    empty, so the caller copies; OSError when cloning started and failed."""
    if sys.platform.startswith("linux"):
        return _reflink(source, target)
    if WINDOWS:
        from bundler.disk import winclone

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


def copy_file(source: Path, temp: Path, advance: Callable[[int], None]) -> str:
    """Clone, else the kernel's copy, else read/write; the source's times are kept (the
    quick check of the next build compares them). Says "clone" or "copy"."""
    with source.open("rb") as reader, temp.open("wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        how = "clone" if clone(reader.fileno(), writer.fileno(), size) else "copy"
        if how == "clone":
            advance(size)
        elif not _kernel_copy(reader.fileno(), writer.fileno(), size, advance):
            _user_copy(reader, writer, advance)
    stat = source.stat()
    os.utime(temp, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return how


def _kernel_copy(source: int, target: int, size: int, advance: Callable[[int], None]) -> bool:
    """copy_file_range, else sendfile, in COPY_CHUNK steps: the bytes never enter Python.
    False when neither moves a byte here (some filesystems refuse, or answer 0 at once):
    then nothing was written and the caller copies by hand."""
    methods: list[Callable[[int], int]] = []
    if hasattr(os, "copy_file_range"):
        methods.append(lambda offset: os.copy_file_range(source, target, COPY_CHUNK))
    if sys.platform.startswith("linux"):  # file-to-file sendfile: Linux only
        methods.append(lambda offset: os.sendfile(target, source, offset, COPY_CHUNK))
    for method in methods:
        done = 0
        try:
            while sent := method(done):
                done += sent
                advance(sent)
        except OSError as exc:
            if done or exc.errno not in NO_FAST_PATH:
                raise
        if done == size:
            return True
        if done:
            raise OSError(errno.EIO, f"copied {done} of {size} bytes: the source changed")
    return False


def _user_copy(
    reader: io.BufferedReader, writer: io.BufferedWriter, advance: Callable[[int], None]
) -> None:
    """The portable way (Windows, macOS): one reused 1 MiB buffer."""
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    while count := reader.readinto(buffer):
        writer.write(view[:count])
        advance(count)
