"""A small release zip of our own, from a mirror folder (`Tiny`, the module fixture `tiny`): the
real ORT zip's layout (tests/support/replica.py's `write_release_zip`) around synthetic DLLs,
with import libraries and headers, and a profile pinning it that names an ORT wheel besides
(`tiny_profile`). Commands run on it offline, with `--mirror` and no server."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.pefactory import PESpec, build_pe
from tests.support.profiles import artifact, profile, source
from tests.support.replica import write_release_zip


@dataclass(frozen=True)
class Tiny:
    """A release zip with synthetic DLLs, its mirror folder and a profile pinning it."""

    mirror: Path
    profile: Path
    zip_sha256: str

    def args(self, cache: Path, out: Path, *extra: str) -> list[str]:
        return [
            "--profile", str(self.profile), "--cache-dir", str(cache), "--out", str(out),
            "--mirror", str(self.mirror), "--offline", *extra,
        ]  # fmt: skip


TINY_TOP = "ort-tiny-1.0"
TINY_DLLS = {
    # the release's own version, 1.0 (the audit compares it with the profile's: BA208)
    "onnxruntime": PESpec(imports=("helper.dll", "KERNEL32.dll"), file_version=(1, 0, 0, 0)),
    "helper": PESpec(file_version=(1, 0, 0, 0)),
    "onnxruntime_providers_shared": PESpec(file_version=(1, 0, 0, 0)),
    "extra": PESpec(),
    "unused": PESpec(),
}
TINY_LIBS = {
    f"{stem}.lib": f"!<arch>\nimport library of {stem}.dll\n".encode() for stem in TINY_DLLS
}
TINY_HEADERS = ("onnxruntime_c_api.h", "core/providers/resource.h")
TINY_ROOTS = ("onnxruntime.dll", "onnxruntime_providers_shared.dll", "extra.dll")


def tiny_profile(path: Path, digest: str, size: int, roots: tuple[str, ...] = TINY_ROOTS) -> Path:
    zip_source = source(
        "url",
        url=f"https://downloads.invalid/ort/{TINY_TOP}.zip",
        sha256=digest,
        size=size,
        sdk=True,
    )
    wheel = source(
        "pip",
        package="onnxruntime-tiny",
        version="1.0",
        wheel="onnxruntime_tiny-1.0-py3-none-win_amd64.whl",
        sha256="0" * 64,
    )
    provides = ("onnxruntime.dll", "helper.dll", "onnxruntime_providers_shared.dll", "extra.dll")
    ort = artifact("onnxruntime", "1.0", provides, zip_source, wheel, licenses=["LICENSE"])
    description = "a release zip with headers and import libraries"
    path.write_text(profile("tiny-sdk", roots, ort, description=description))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    work = tmp_path_factory.mktemp("tiny")
    dlls = {stem: work / f"{stem}.dll" for stem in TINY_DLLS}
    for stem, spec in TINY_DLLS.items():
        dlls[stem].write_bytes(build_pe(spec))
    mirror = work / "mirror"
    mirror.mkdir()
    archive = write_release_zip(
        mirror / f"{TINY_TOP}.zip", TINY_TOP, dlls, TINY_LIBS, TINY_HEADERS, {"LICENSE": b"MIT"}
    )
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    profile = tiny_profile(work / "tiny.toml", digest, archive.stat().st_size)
    return Tiny(mirror, profile, digest)
