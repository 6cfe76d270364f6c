"""Locks for tests: `sample_lock` (a small GPU lock in memory, with the fields a test changes),
`locked` (one of its files) and `lock_for` (a lock file describing a folder as it is now, the way
build writes one)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bundler.closure.lock import LOCK_NAME, Lock, LockedFile
from bundler.closure.lockfile import write_lock
from bundler.disk.digest import file_sha256
from bundler.target.profiles import GpuDriver
from tests.support.paths import GPU

DRIVER = GpuDriver("nvcuda.dll", 12, "527.41", "NVIDIA CUDA Toolkit Release Notes")


def locked(name: str, kind: str = "bundled", size: int = 10) -> LockedFile:
    return LockedFile(name, kind, "0" * 64, size)


def sample_lock(**changes: object) -> Lock:
    lock = Lock(
        profile="ort-1.19.2-gpu-cuda12",
        architecture="x64",
        vc_runtime="app-local",
        files=(
            locked("onnxruntime.dll"),
            locked("licenses/onnxruntime/LICENSE", "license"),
            locked("cudnn64_9.dll"),
        ),
        app="hello.exe",
        app_file_version="1.0.0.0",
        min_windows="10.0.10240",
        vc_runtime_min="14.40",
        gpu_driver=DRIVER,
    )
    return replace(lock, **changes)  # type: ignore[arg-type]


def lock_for(folder: Path, profile: str = GPU, vc_runtime: str = "app-local") -> Path:
    """A lock file describing `folder` as it is now, the way build writes one."""
    files = tuple(
        LockedFile(path.name, "bundled", file_sha256(path), path.stat().st_size)
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != "hello.exe"
    )
    write_lock(folder / LOCK_NAME, Lock(profile, "x64", vc_runtime, files, app="hello.exe"))
    return folder / LOCK_NAME
