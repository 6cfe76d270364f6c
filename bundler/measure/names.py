"""Decide layer: the Windows DLL name of a CUDA or cuDNN library a process loaded.

A measurement on Linux stands in for Windows: the same libraries, loaded the same lazy way, under
other names (libcudnn_ops.so.9 is cudnn_ops64_9.dll). /proc/self/maps names the real file, so a
system install's full version (libcublas.so.13.1.0.3) reads like a wheel's (libcublas.so.13).
A measurement on Windows already has DLL names: those of the watched families are kept in their
own spelling (callers compare them folded). Standard library only: bundler.measure.child's
parent and the build both import it.
"""

from __future__ import annotations

import re

# lib<family>.so.<major>[.<minor>[...]] -> the Windows name; CUDA 12 and 13 spell them alike.
_LINUX = re.compile(
    r"lib(?P<family>cudnn(?:_[a-z_]+)?|cufft|cudart|cublasLt|cublas|curand|nvrtc-builtins|nvrtc"
    r"|nvJitLink)\.so\.(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.\d+)*"
)
_WINDOWS = re.compile(
    r"(?:cudnn(?:_[a-z_]+)?64_\d+|cufft64_\d+|cudart64_\d+|cublaslt64_\d+|cublas64_\d+"
    r"|curand64_\d+|nvrtc64_\d+_0|nvrtc-builtins64_\d+|nvjitlink_\d+_0)\.dll",
    re.IGNORECASE,
)


def windows_name(path: str) -> str | None:
    """The Windows DLL name of the CUDA/cuDNN library at `path` (a Linux or Windows path, or a
    bare name); None for any other file."""
    base = re.split(r"[\\/]", path)[-1]
    if _WINDOWS.fullmatch(base):
        return base
    found = _LINUX.fullmatch(base)
    if found is None:
        return None
    return _dll(found["family"], found["major"], found["minor"])


def _dll(family: str, major: str, minor: str | None) -> str | None:
    if family == "nvrtc":
        return f"nvrtc64_{major}0_0.dll"
    if family == "nvJitLink":
        return f"nvJitLink_{major}0_0.dll"
    if family == "nvrtc-builtins":
        # the builtins carry major and minor in their name: nvrtc-builtins64_124.dll (12.4)
        return f"nvrtc-builtins64_{major}{minor}.dll" if minor is not None else None
    return f"{family}64_{major}.dll"
