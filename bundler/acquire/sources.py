"""Act layer: the two sources that are not a URL: `pip download` of a pinned wheel (pip
enforcing the hash), and a local install (found through an environment variable, or a --search
folder), checked file by file."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bundler.acquire.acquired import Acquired
from bundler.acquire.source_choice import SourceSkipped
from bundler.binary.pe import format_version, read_pe
from bundler.errors import FetchError, InputFileError, IntegrityError
from bundler.target.profiles import (
    Artifact,
    DirSource,
    PipSource,
    is_pattern,
    matches,
)

# What pip prints ("[Errno 28] No space left on device") when the download folder is full
_DISK_FULL = [code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if code]


def pip_download(source: PipSource, folder: Path) -> Path:
    """`pip download` of exactly the pinned wheel through the user's pip configuration (index,
    mirror, proxy, certificates), with pip itself enforcing the hash (--require-hashes)."""
    requirements = folder / "requirements.txt"
    requirements.write_text(f"{source.package}=={source.version} --hash=sha256:{source.sha256}\n")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--require-hashes", "--progress-bar", "off", "--disable-pip-version-check",
        *_wheel_target(source.wheel), "-r", str(requirements), "-d", str(folder),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True)
    wheel = folder / source.wheel
    if "DO NOT MATCH THE HASHES" in result.stderr:  # pip's own verdict: a pin mismatch
        raise IntegrityError(
            f"pip download {source.package}=={source.version}: the index served a wheel "
            f"whose SHA-256 is not the pinned {source.sha256}; check the index or mirror."
        )
    full = [code for code in _DISK_FULL if f"[Errno {code}]" in result.stderr]
    if result.returncode != 0 and full:  # pip could not write into `folder`
        raise OSError(full[0], os.strerror(full[0]), str(folder))
    if result.returncode != 0 or not wheel.is_file():
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise FetchError(f"pip download {source.package}=={source.version} failed: {last}")
    return wheel


def _wheel_target(wheel: str) -> list[str]:
    """pip's --platform/--python-version/--abi for the wheel's own tags (PEP 427 name).

    A wheel for any Python 3 (py3-none, as the EP packs' wheels) is asked for as the running
    interpreter's version: pip reads "--python-version 3" as Python 3.0 and then refuses every
    wheel whose metadata declares Requires-Python (">=3.10" and the like)."""
    parts = wheel.removesuffix(".whl").split("-")
    python_tag, abi_tag, platform_tag = parts[-3], parts[-2], parts[-1]
    args = ["--platform", platform_tag]
    if python_tag.startswith("cp") and python_tag[2:].isdigit():
        digits = python_tag[2:]
        args += ["--python-version", f"{digits[0]}.{digits[1:]}", "--implementation", "cp"]
        if abi_tag != "none":
            args += ["--abi", abi_tag]
    else:
        running = f"{sys.version_info.major}.{sys.version_info.minor}"
        args += ["--python-version", running]
    return args


def local_install(
    artifact: Artifact,
    folders: Sequence[Path],
    machine: str,
    skipped: tuple[str, ...],
    source: DirSource | None = None,
) -> Acquired:
    """A local install: the first of `folders` accepted by name, machine type and file-version
    range (those of `source`, else of the artifact's first dir source)."""
    ranges = source or next((s for s in artifact.sources if isinstance(s, DirSource)), None)
    reasons = []
    for folder in folders:
        problem = check_local_folder(folder, artifact, ranges, machine)
        if problem is None:
            return Acquired(
                artifact.name, artifact.version, "dir", str(folder), str(folder), None, None,
                None, True, folder, (folder,), skipped,
            )  # fmt: skip
        reasons.append(problem)
    raise SourceSkipped("; ".join(reasons))


def check_local_folder(
    folder: Path, artifact: Artifact, source: DirSource | None, machine: str
) -> str | None:
    """None when `folder` can stand in for the artifact; else why not."""
    if not folder.is_dir():
        return f"{folder} does not exist"
    names = {entry.name.lower(): entry for entry in folder.iterdir()}
    for wanted in artifact.provides:
        found = (
            [p for n, p in names.items() if matches(wanted, n)]
            if is_pattern(wanted)
            else ([names[wanted.lower()]] if wanted.lower() in names else [])
        )
        if not found:
            return f"{folder} has no {wanted}"
        for path in found:
            problem = _check_local_dll(path, source, machine)
            if problem:
                return problem
    return None


def _check_local_dll(path: Path, source: DirSource | None, machine: str) -> str | None:
    try:
        info = read_pe(path)
    except InputFileError as error:
        return str(error)
    if info.machine != machine:
        return f"{path} is {info.machine}, not {machine}"
    version = info.file_version
    if version is None or source is None:
        return None
    low, high = source.min_file_version, source.max_file_version
    if (low and version < low) or (high and version >= high):
        return (
            f"{path} is version {format_version(version)}, outside "
            f"[{format_version(low)}, {format_version(high)})"
        )
    return None
