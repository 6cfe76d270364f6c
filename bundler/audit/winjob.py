"""Act layer, Windows only: a job object that holds a program and every process it starts, so
that a load-proof run that outlives its time limit is killed as a whole tree
(bundler.audit.programs says why and when). Structures and constants: winnt.h / jobapi2.h,
documented on learn.microsoft.com under "Job Objects"."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from ctypes import wintypes

assert sys.platform == "win32"

JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9  # JOBOBJECTINFOCLASS
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
KILLED = 1  # the exit code the job's processes get


class _BasicLimits(ctypes.Structure):
    _fields_ = (
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", wintypes.DWORD),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", wintypes.DWORD),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", wintypes.DWORD),
        ("SchedulingClass", wintypes.DWORD),
    )


class _ExtendedLimits(ctypes.Structure):
    _fields_ = (
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", ctypes.c_uint64 * 6),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    )


_kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
_kernel32.CreateJobObjectW.restype = wintypes.HANDLE
_kernel32.CreateJobObjectW.argtypes = (ctypes.c_void_p, wintypes.LPCWSTR)
_kernel32.SetInformationJobObject.argtypes = (
    wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD,
)  # fmt: skip
_kernel32.AssignProcessToJobObject.argtypes = (wintypes.HANDLE, wintypes.HANDLE)
_kernel32.TerminateJobObject.argtypes = (wintypes.HANDLE, wintypes.UINT)
_kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)


class Job:
    """One job per run: `adopt` the program once it started, `kill` the tree, `close`."""

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self.holds = False  # the program was assigned: kill() ends the whole tree

    @classmethod
    def create(cls) -> Job | None:
        handle = _kernel32.CreateJobObjectW(None, None)
        if not handle:
            return None
        limits = _ExtendedLimits()
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        size = ctypes.sizeof(limits)
        info = JOB_OBJECT_EXTENDED_LIMIT_INFORMATION
        if not _kernel32.SetInformationJobObject(handle, info, ctypes.byref(limits), size):
            _kernel32.CloseHandle(handle)
            return None
        return cls(handle)

    def adopt(self, process: subprocess.Popen[bytes]) -> None:
        process_handle = int(process._handle)  # type: ignore[attr-defined]
        self.holds = bool(_kernel32.AssignProcessToJobObject(self.handle, process_handle))

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        if not (self.holds and _kernel32.TerminateJobObject(self.handle, KILLED)):
            process.kill()

    def close(self) -> None:
        """Closing the last handle kills what is left in the job (KILL_ON_JOB_CLOSE): a program
        that ended on its own leaves nothing running behind it either."""
        _kernel32.CloseHandle(self.handle)
