"""Read layer: the typed values of a profile's keys, each checked as it is read.

A Windows version (10.0.19041), a file version (9.1.0.70), a driver version (527.41), an
archive's size in bytes, one of a fixed set of words: each a ProfileError naming the file, the
table and the key when it is not one. bundler.target.profiles reads a profile with them,
bundler.target.system the Windows policy.
"""

from __future__ import annotations

from typing import Any

from bundler.errors import ProfileError
from bundler.target.manifest import Table

# How a profile ships the VC++ runtime: its DLLs beside the exe, or Microsoft's installer run by
# the setup. A profile's `vc_runtime` and the `--vc-runtime` option (bundler.config.validate)
# take one of these.
VC_RUNTIME_MODES = ("app-local", "installer")


def parse_windows_version(table: Table, key: str) -> tuple[int, ...]:
    text = table.string(key)
    try:
        parts = tuple(int(part) for part in text.split("."))
    except ValueError:
        parts = ()
    if len(parts) != 3:
        raise ProfileError(f"{table.where}: key '{key}' must look like 10.0.19041, not '{text}'.")
    return parts


def driver_version(table: Table, key: str) -> str:
    """NVIDIA's driver numbering: 527.41, two digits after the point."""
    text: str = table.string(key)
    parts = text.split(".")
    if len(parts) != 2 or not all(part.isdigit() for part in parts) or len(parts[1]) != 2:
        raise ProfileError(
            f"{table.where}: key '{key}' must be a driver version like 527.41, not '{text}'."
        )
    return text


def file_version(table: Table, key: str) -> tuple[int, ...] | None:
    text = table.string(key, None)
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        raise ProfileError(f"{table.where}: key '{key}' must look like 9.1.0.70.") from None


def archive_size(table: Table) -> int | None:
    size: int | None = table.integer("size", None)
    if size is not None and size <= 0:
        raise ProfileError(f"{table.where}: key 'size' must be the archive's size in bytes (> 0).")
    return size


def choice(table: Table, key: str, allowed: tuple[str, ...], default: Any = ...) -> str:
    value: str = table.string(key, default)
    if value not in allowed:
        raise ProfileError(f"{table.where}: key '{key}' must be one of {', '.join(allowed)}.")
    return value
