"""A replica of ORT's release zip `onnxruntime-win-x64-gpu-1.19.2.zip`, in its exact layout.

The layout is docs/field-notes.md#tools (vcpkg's portfile and ORT's packaging pipeline): one top
folder, `lib/` with each DLL beside its `.lib` and `.pdb`, `include/` with ORT's headers (session
headers, provider options, and for CUDA builds `core/providers/...`), and six files at the top.
GitHub is unreachable from the test machines, so the real zip cannot be used: the DLLs are the real
ones of the pinned wheel (the same release), streamed into the zip; the import libraries are real
import libraries made by mingw's dlltool from a .def; headers, `.pdb` files and the top files are
small stand-ins with the real names.

Members are stored (ZIP_STORED): 650 MB of DLLs deflate slowly and nothing here tests
compression. The archive is deterministic for the same DLLs (fixed member times and order).

In use: `replica_profile` writes the GPU profile pinning the replica instead of the real zip,
a test's cache lacks the pinned wheel (ORT_GPU_WHEEL_SHA256: `tests.support.cache_links`), so
the zip is what a build takes; `replica` is the module fixture, built once from the real DLLs
and kept in the test cache (kept_replica).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from tests.support.paths import REPO, test_cache_dir
from tests.support.real_dlls import RealDlls
from tests.support.skips import require

TOP = "onnxruntime-win-x64-gpu-1.19.2"
ZIP_NAME = f"{TOP}.zip"
LIB_DLLS = (
    "onnxruntime",
    "onnxruntime_providers_shared",
    "onnxruntime_providers_cuda",
    "onnxruntime_providers_tensorrt",
)
# include/ of the GPU zip (docs/field-notes.md#tools, from ORT's packaging script): the session
# headers (include/onnxruntime/core/session/onnxruntime_*.h, with the training API headers that make
# the 16 of docs/field-notes.md#zip-layout), the provider options, and the CUDA provider's context
# headers.
HEADERS = (
    "onnxruntime_c_api.h",
    "onnxruntime_cxx_api.h",
    "onnxruntime_cxx_inline.h",
    "onnxruntime_float16.h",
    "onnxruntime_lite_custom_op.h",
    "onnxruntime_run_options_config_keys.h",
    "onnxruntime_session_options_config_keys.h",
    "onnxruntime_training_c_api.h",
    "onnxruntime_training_cxx_api.h",
    "onnxruntime_training_cxx_inline.h",
    "cpu_provider_factory.h",
    "provider_options.h",
    "core/providers/resource.h",
    "core/providers/custom_op_context.h",
    "core/providers/cuda/cuda_context.h",
    "core/providers/cuda/cuda_resource.h",
)
TOP_FILES = {
    "LICENSE": b"MIT License\r\n\r\nCopyright (c) Microsoft Corporation (replica stand-in)\r\n",
    "ThirdPartyNotices.txt": b"THIRD PARTY SOFTWARE NOTICES (replica stand-in)\r\n",
    "Privacy.md": b"# Privacy (replica stand-in)\r\n",
    "README.md": b"# ONNX Runtime (replica stand-in)\r\n",
    "VERSION_NUMBER": b"1.19.2\r\n",
    "GIT_COMMIT_ID": b"0000000000000000000000000000000000000000 (replica stand-in)\r\n",
}
# What each import library exports: onnxruntime.lib as examples/hello/onnxruntime.def (the one
# entry point of the C API); the providers' single entry point ORT looks up by name.
EXPORTS = {"onnxruntime": ("OrtGetApiBase",)}
PROVIDER_EXPORTS = ("GetProvider",)
PDB_STANDIN = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\x00\x00\x00 (replica stand-in)"
_FIXED_TIME = (2024, 9, 4, 12, 0, 0)  # member time stamps: the same DLLs give the same zip


@dataclass(frozen=True)
class Replica:
    path: Path
    sha256: str
    sha512: str
    size: int
    import_libraries: Mapping[str, bytes]  # file name -> the bytes dlltool made


def header_text(name: str) -> bytes:
    guard = name.upper().replace("/", "_").replace(".", "_")
    return f"// {name}: replica stand-in\r\n#pragma once\r\n#define {guard} 1\r\n".encode()


def import_library(dll_stem: str, exports: Sequence[str], work: Path) -> bytes:
    """A real x64 import library for `<dll_stem>.dll`, made from a .def by mingw's dlltool."""
    definition = work / f"{dll_stem}.def"
    lines = [f"LIBRARY {dll_stem}.dll", "EXPORTS", *(f"    {name}" for name in exports)]
    definition.write_text("\n".join(lines) + "\n")
    output = work / f"{dll_stem}.lib"
    subprocess.run(
        ["x86_64-w64-mingw32-dlltool", "--deterministic-libraries", "--input-def",
         str(definition), "--dllname", f"{dll_stem}.dll", "--output-lib", str(output)],
        check=True,
    )  # fmt: skip
    return output.read_bytes()


def write_release_zip(
    path: Path,
    top: str,
    dlls: Mapping[str, Path],
    libraries: Mapping[str, bytes],
    headers: Sequence[str] = HEADERS,
    top_files: Mapping[str, bytes] = TOP_FILES,
) -> Path:
    """A zip in the release layout: `top/lib/<stem>.{dll,lib,pdb}` for every DLL (a .lib only
    where `libraries` has one), `top/include/<header>`, and `top/<file>` for the top files."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for stem, dll in dlls.items():
            _stream(archive, f"{top}/lib/{stem}.dll", dll)
            if f"{stem}.lib" in libraries:
                _bytes(archive, f"{top}/lib/{stem}.lib", libraries[f"{stem}.lib"])
            _bytes(archive, f"{top}/lib/{stem}.pdb", PDB_STANDIN)
        for header in headers:
            _bytes(archive, f"{top}/include/{header}", header_text(header))
        for name, data in top_files.items():
            _bytes(archive, f"{top}/{name}", data)
    return path


def build_replica(wheel_dlls: Path, folder: Path) -> Replica:
    """The GPU release zip from the DLL folder of the pinned onnxruntime-gpu wheel."""
    work = folder / "defs"
    work.mkdir(parents=True, exist_ok=True)
    libraries = {
        f"{stem}.lib": import_library(stem, EXPORTS.get(stem, PROVIDER_EXPORTS), work)
        for stem in LIB_DLLS
    }
    dlls = {stem: wheel_dlls / f"{stem}.dll" for stem in LIB_DLLS}
    path = write_release_zip(
        folder / ZIP_NAME, TOP, dlls, libraries, top_files=_top_files(wheel_dlls)
    )
    sha256, sha512 = hashlib.sha256(), hashlib.sha512()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            sha256.update(block)
            sha512.update(block)
    return Replica(path, sha256.hexdigest(), sha512.hexdigest(), path.stat().st_size, libraries)


def _top_files(wheel_dlls: Path) -> dict[str, bytes]:
    """The stand-ins, with the real LICENSE and ThirdPartyNotices.txt where the wheel has them
    (onnxruntime/ beside capi/): the same texts the release zip carries."""
    files = dict(TOP_FILES)
    for name in ("LICENSE", "ThirdPartyNotices.txt"):
        real = wheel_dlls.parent / name
        if real.is_file():
            files[name] = real.read_bytes()
    return files


def _info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, _FIXED_TIME)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def _bytes(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    archive.writestr(_info(name), data)


def _stream(archive: zipfile.ZipFile, name: str, source: Path) -> None:
    """Copy a large file into the zip in blocks, never holding it in memory."""
    info = _info(name)
    info.file_size = source.stat().st_size
    with source.open("rb") as reader, archive.open(info, "w") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)


# --- the replica in use: its profile, a cache without the wheel, the module fixture -----------

# The pinned onnxruntime-gpu wheel of the GPU profile: a cache that has it never reads the zip.
ORT_GPU_WHEEL_SHA256 = "522f7495918176cb8c1a3c78bde7152d984f7096acc786c73a27643af8af87c9"


def replica_profile(path: Path, replica: Replica) -> Path:
    """The GPU profile with the onnxruntime zip's pins replaced by the replica's (same URL)."""
    text = (REPO / "manifests" / "profiles" / "ort-1.19.2-gpu-cuda12.toml").read_text()
    pins = {
        'name = "ort-1.19.2-gpu-cuda12"': 'name = "replica-gpu"',
        "c04c6342b9e351d2ec7ebd84ce08f3ea4f20706993b40172234c535ace25f629": replica.sha256,
        "9576eafca59fc7f2af9f62d7ee8aa31208ef965d17f3ad71747d5a9a46cdffd6b3958dc945109d82937555df8bb35319ce92925e66ab707f1ca8e7564ecb3ced": replica.sha512,  # noqa: E501
    }
    for old, new in pins.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def replica(real_dlls: RealDlls) -> Replica:
    require(
        shutil.which("x86_64-w64-mingw32-dlltool") is not None,
        "mingw-w64 is not installed (apt-get install mingw-w64)",
    )
    return kept_replica(real_dlls["onnxruntime-gpu"])


def kept_replica(wheel_dlls: Path) -> Replica:
    """The replica, built once into the test cache and kept there between runs (650 MB that
    every module serving it would otherwise write again): the same DLLs and this module give
    the same zip, so its folder is named by a digest of both. Modules only read it (served over
    HTTP, or a --mirror folder)."""
    inputs = hashlib.sha256(Path(__file__).read_bytes())
    for dll in sorted(wheel_dlls.glob("*.dll")):
        inputs.update(f"{dll.name}:{dll.stat().st_size}".encode())
    folder = test_cache_dir() / "replica" / inputs.hexdigest()[:16]
    record = folder / "replica.json"
    with FileLock(f"{folder}.lock"):
        if not record.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            built = build_replica(wheel_dlls, folder)
            fields = {"sha256": built.sha256, "sha512": built.sha512, "size": built.size}
            record.write_text(json.dumps(fields), encoding="utf-8")
    fields = json.loads(record.read_text(encoding="utf-8"))
    libraries = {name: (folder / "defs" / name).read_bytes() for name in _library_names()}
    return Replica(folder / ZIP_NAME, import_libraries=libraries, **fields)


def _library_names() -> list[str]:
    return [f"{stem}.lib" for stem in LIB_DLLS]
