"""Act layer, core, Windows only: block cloning (FSCTL_DUPLICATE_EXTENTS_TO_FILE), the ReFS and
Dev Drive counterpart of Linux's FICLONE. Imported by bundler.disk.files on Windows alone.

Microsoft's rules for a clone (learn.microsoft.com, "Block Cloning"): both files on one volume
whose flags include FILE_SUPPORTS_BLOCK_REFCOUNTING; regions that start and end on cluster
boundaries, each under 4 GB; the target region may not extend past the target's end of file.
So the target is first sized up to whole clusters, cloned in 1 GiB regions, then cut to the
source's size. Where the volume lacks the flag (NTFS, FAT, Wine's mapped Unix folders)
nothing is done and the caller copies.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import wintypes

assert sys.platform == "win32"
import msvcrt  # noqa: E402  (Windows only, after the assertion that says so)

FSCTL_DUPLICATE_EXTENTS_TO_FILE = 0x00098344  # CTL_CODE(FILE_DEVICE_FILE_SYSTEM, 209, 0, 2)
FILE_SUPPORTS_BLOCK_REFCOUNTING = 0x08000000
REGION = 1 << 30  # bytes per call: under the 4 GB limit, a multiple of any cluster size


class _DuplicateExtentsData(ctypes.Structure):
    _fields_ = (
        ("FileHandle", wintypes.HANDLE),
        ("SourceFileOffset", ctypes.c_longlong),
        ("TargetFileOffset", ctypes.c_longlong),
        ("ByteCount", ctypes.c_longlong),
    )


_kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)


def duplicate_extents(source: int, target: int, size: int) -> bool:
    """Clone `size` bytes of the open file `source` into the empty open file `target` (file
    descriptors). False, with `target` untouched, where the volume cannot."""
    source_handle = msvcrt.get_osfhandle(source)
    target_handle = msvcrt.get_osfhandle(target)
    if size == 0 or not _refcounting(target_handle):
        return False
    cluster = _cluster_size(target_handle)
    if cluster is None:
        return False
    whole = -(-size // cluster) * cluster
    os.ftruncate(target, whole)
    try:
        for offset in range(0, whole, REGION):
            _clone_region(source_handle, target_handle, offset, min(REGION, whole - offset))
    except OSError:
        os.ftruncate(target, 0)
        if offset == 0:  # refused at once (another volume, integrity streams): copy instead
            return False
        raise
    os.ftruncate(target, size)
    return True


def _refcounting(handle: int) -> bool:
    flags = wintypes.DWORD()
    ok = _kernel32.GetVolumeInformationByHandleW(
        wintypes.HANDLE(handle), None, 0, None, None, ctypes.byref(flags), None, 0
    )
    return bool(ok) and bool(flags.value & FILE_SUPPORTS_BLOCK_REFCOUNTING)


def _cluster_size(handle: int) -> int | None:
    """Bytes per cluster of the handle's volume (GetDiskFreeSpaceW on its root)."""
    buffer = ctypes.create_unicode_buffer(32768)
    if not _kernel32.GetFinalPathNameByHandleW(wintypes.HANDLE(handle), buffer, 32768, 0):
        return None
    root = ctypes.create_unicode_buffer(32768)
    if not _kernel32.GetVolumePathNameW(buffer.value, root, 32768):
        return None
    sectors, sector_bytes = wintypes.DWORD(), wintypes.DWORD()
    if not _kernel32.GetDiskFreeSpaceW(
        root.value, ctypes.byref(sectors), ctypes.byref(sector_bytes), None, None
    ):
        return None
    return sectors.value * sector_bytes.value or None


def _clone_region(source: int, target: int, offset: int, count: int) -> None:
    data = _DuplicateExtentsData(wintypes.HANDLE(source), offset, offset, count)
    returned = wintypes.DWORD()
    ok = _kernel32.DeviceIoControl(
        wintypes.HANDLE(target),
        FSCTL_DUPLICATE_EXTENTS_TO_FILE,
        ctypes.byref(data),
        ctypes.sizeof(data),
        None,
        0,
        ctypes.byref(returned),
        None,
    )
    if not ok:
        code = ctypes.get_last_error()
        raise OSError(0, ctypes.FormatError(code).strip(), None, code)
