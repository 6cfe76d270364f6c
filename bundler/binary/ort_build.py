"""Read layer: what an ORT build says about itself in its DLLs: the release in onnxruntime.dll's
version resource, the "ORT Build Info:" string inside it, and whether a provider DLL can run as
a plugin execution provider (it exports CreateEpFactories).

The version resource: ORT's fixed FileVersion carried the build date where the patch belongs
up to 1.29 (1.19.2's is 1.19.24.903, built 2024-09-03) and carries the patch from 1.30 on
(1.31.1's is 1.31.1.1023). So the release is major.minor always, and the patch only where the
third part is below 19 (no ORT build is dated before 2019). docs/auditing.md, "Which profile".

The build information: onnxruntime.dll holds one NUL-terminated ASCII string that starts with
"ORT Build Info: " (git commit, build flags: `git-branch=HEAD, git-commit-id=6af1a932e, ...,
build type=Release` in 1.31.1). A build that registers its CUDA provider as a plugin EP by
default says so with a `cuda-plugin-ep=` flag there (onnxruntime PR #29544); 1.31.1 has none.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

import pefile

from bundler.binary.pe import release_image
from bundler.errors import InputFileError
from bundler.target.profiles import LEGACY, PLUGIN, CudaEp

BUILD_INFO = b"ORT Build Info: "
PLUGIN_FLAG = "cuda-plugin-ep="
PLUGIN_ENTRY = "CreateEpFactories"  # the plugin EP library's entry (the packs' too)
LEGACY_ENTRY = "GetProvider"  # the provider bridge's entry (onnxruntime_providers_shared)
_MAX_INFO = 4096
_FIRST_DATED = 19  # 2019: a third part of 19 or more is a build year, not a patch


@dataclass(frozen=True)
class OrtRelease:
    """The release a version resource states: (1, 31, 1), or (1, 19) where only the minor is
    known."""

    parts: tuple[int, ...]

    @property
    def text(self) -> str:
        return ".".join(map(str, self.parts))

    @property
    def minor(self) -> tuple[int, int]:
        return self.parts[0], self.parts[1]

    def matches(self, release: str) -> bool:
        """Whether a release such as "1.31.1" is this one, as far as both are known."""
        wanted = tuple(int(part) for part in release.split(".") if part.isdigit())
        known = min(len(wanted), len(self.parts))
        return known >= 2 and wanted[:known] == self.parts[:known]


def ort_release(file_version: tuple[int, int, int, int] | None) -> OrtRelease | None:
    """The release onnxruntime.dll's fixed FileVersion states; None without one."""
    if file_version is None:
        return None
    major, minor, third, _ = file_version
    return OrtRelease((major, minor, third) if third < _FIRST_DATED else (major, minor))


def build_info(path: Path) -> str | None:
    """The "ORT Build Info:" string of onnxruntime.dll (without its prefix); None where the
    file has none (an older build, or another DLL)."""
    try:
        with path.open("rb") as handle:
            if path.stat().st_size == 0:
                return None
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                start = data.find(BUILD_INFO)
                if start < 0:
                    return None
                end = data.find(b"\0", start, start + _MAX_INFO)
                raw = data[start + len(BUILD_INFO) : end if end >= 0 else start + _MAX_INFO]
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror or exc}.") from None
    return raw.decode("ascii", "replace")


def default_mode(info: str | None) -> str | None:
    """ "plugin" where the build information carries the cuda-plugin-ep= flag, "legacy" where
    it has none, None where there is no build information to read."""
    if info is None:
        return None
    flags = [flag.strip() for flag in info.split(",")]
    return PLUGIN if any(flag.startswith(PLUGIN_FLAG) for flag in flags) else LEGACY


def exported_names(path: Path) -> tuple[str, ...]:
    """The names a DLL exports (its export directory only: fast on a 200 MB provider)."""
    try:
        image = pefile.PE(str(path), fast_load=True)
    except (OSError, pefile.PEFormatError) as exc:
        raise InputFileError(f"{path}: cannot read its exports ({exc}).") from None
    try:
        image.parse_data_directories(
            directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]]
        )
        exports = getattr(image, "DIRECTORY_ENTRY_EXPORT", None)
        symbols = exports.symbols if exports is not None else []
        return tuple(item.name.decode("ascii", "replace") for item in symbols if item.name)
    finally:
        release_image(image)


def cuda_ep(front: Path, provider: Path) -> CudaEp:
    """What the CUDA provider `provider` is, beside its onnxruntime.dll `front`: plugin-capable
    from its exports, its default mode from the front's build information."""
    return CudaEp(PLUGIN_ENTRY in exported_names(provider), default_mode(build_info(front)))
