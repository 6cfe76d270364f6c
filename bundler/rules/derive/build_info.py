"""Read layer: what an ORT wheel says about its own build, and whether a flavour fits it.

`onnxruntime/capi/version_info.py` in every onnxruntime-gpu wheel records the CUDA and cuDNN
versions the release was built with (`cuda_version = "13.0.88"`, `cudnn_version = "9"`). That
file, not the DLL names found as strings, decides the CUDA major: ORT 1.31.1's CUDA provider
names `cudart64_12.dll` in its strings but is built for CUDA 13. The file is read from the
verified wheel as text and parsed with `ast` (literal assignments only; it is never run).
"""

from __future__ import annotations

import ast
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bundler.errors import BuildMismatchError, InputFileError

VERSION_INFO = "onnxruntime/capi/version_info.py"


@dataclass(frozen=True)
class BuildInfo:
    """The build of one ORT wheel. Empty strings where the wheel does not say (a CPU build)."""

    wheel: str
    cuda_version: str = ""
    cudnn_version: str = ""

    @property
    def cuda_major(self) -> int | None:
        head = self.cuda_version.split(".")[0]
        return int(head) if head.isdigit() else None

    @property
    def cudnn_major(self) -> int | None:
        head = self.cudnn_version.split(".")[0]
        return int(head) if head.isdigit() else None

    @property
    def cuda_minor(self) -> tuple[int, int] | None:
        return major_minor(self.cuda_version)

    def source(self) -> str:
        return f"{self.wheel}: {VERSION_INFO}"


def major_minor(version: str) -> tuple[int, int] | None:
    """(12, 4) for "12.4" or "12.4.1"; None when the text does not start with two numbers."""
    parts = version.split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return int(parts[0]), int(parts[1])
    return None


def read_build_info(wheel: Path, name: str | None = None) -> BuildInfo:
    """The CUDA/cuDNN versions an ORT wheel states; `name` is the wheel's file name when
    `wheel` is a cache blob without one."""
    shown = name or wheel.name
    try:
        with zipfile.ZipFile(wheel) as archive:
            try:
                text = archive.read(VERSION_INFO).decode("utf-8", "replace")
            except KeyError:
                return BuildInfo(shown)  # older or CPU wheels may not carry it
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputFileError(f"{shown}: cannot read the wheel ({exc}).") from None
    values = _literals(text)
    return BuildInfo(shown, values.get("cuda_version", ""), values.get("cudnn_version", ""))


def _literals(text: str) -> dict[str, str]:
    """`name = "value"` assignments of the module, as strings; nothing else is evaluated."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
        ):
            found[node.targets[0].id] = str(node.value.value)
    return found


def check_cuda_major(build: BuildInfo, flavour: str, cuda_major: int | None) -> None:
    """A GPU flavour for CUDA N fits only a build made with CUDA N."""
    if cuda_major is None or build.cuda_major is None or build.cuda_major == cuda_major:
        return
    raise BuildMismatchError(
        f"{build.wheel} is built with CUDA {build.cuda_version} ({VERSION_INFO}), but flavour "
        f"{flavour} is for CUDA {cuda_major}; use --flavour gpu-cuda{build.cuda_major}."
    )
