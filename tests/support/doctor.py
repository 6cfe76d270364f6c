"""bundle-doctor for tests: the machine it looks at and the data file it reads.

`Machine` is what a test puts into a Wine prefix's System32 for the doctor to find (the
stand-in nvcuda.dll of a driver version, another ORT, ...): tests/test_doctor.py runs the doctor
itself, tests/test_installer.py the setup whose preflight runs it. bundle-doctor.exe itself is
the `doctor_exe` fixture (tests/support/mingw.py).

bundle-doctor.dat: the product's renderer (bundler/render/doctor_dat.py) on a built bundle's
lock, with the changes a test needs (other GPU code, fewer load records, another ORT release),
and `seal` for hand-made files (the bad-input cases). `with_packs` adds `ep` records (the
execution-provider packs, issue 31; named `pack` before issue 39) to a rendered file and seals
it again, `with_runtime_pack` a `runtime_pack` record (the runtime pack, issue 32)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from bundler.closure.lock import DOCTOR_DATA, LOCK_NAME, Lock
from bundler.closure.lockfile import read_lock
from bundler.findings import CATALOGUE
from bundler.render.doctor_dat import DOCTOR_CHECKS, doctor_data
from tests.support.wine import Wine

DRIVER_551 = "31.0.15.5161"  # driver 551.61
DRIVER_516 = "31.0.15.1694"  # driver 516.94, below CUDA 12's 527.41
DRIVER_581 = "32.0.15.8115"  # driver 581.15, new enough for CUDA 13 (580.88)
PROVIDER = "onnxruntime_providers_cuda.dll"
# docs/field-notes.md#gpu-code: ORT 1.22.0's provider (all 158 blobs)
PROVIDER_1_22_0 = {PROVIDER: (("sm_52", "sm_61", "sm_75", "sm_86", "sm_89"), ("sm_90",))}
# The catalogue rows the product writes: code, severity, name, title.
# The three packs of manifests/eps/ as ep records: name, folder, plugin, probe, minimum
# compute capability, minimum driver, needs, minimum ORT (the folder, plugin, needs and
# minimum ORT as in the manifests).
NV_PACK = (
    "nv-tensorrt-rtx",
    "ep/nv_tensorrt_rtx",
    "ep/nv_tensorrt_rtx/onnxruntime_providers_nv_tensorrt_rtx.dll",
    "nvidia-cuda",
    "8.0",
    "580.88",
    "an NVIDIA GPU of compute capability >= 8.0 (Ampere or newer) and a driver for CUDA 13 "
    "(>= 580.88)",
    "1.24",
)
OPENVINO_PACK = (
    "openvino",
    "ep/openvino",
    "ep/openvino/onnxruntime_providers_openvino_plugin.dll",
    "intel",
    "-",
    "-",
    "an Intel CPU; for GPU an Intel GPU with its OpenCL driver (OpenCL.dll); for NPU an Intel "
    "NPU with its driver (ze_loader.dll)",
    "1.23",
)
WEBGPU_PACK = (
    "webgpu",
    "ep/webgpu",
    "ep/webgpu/onnxruntime_providers_webgpu.dll",
    "d3d12",
    "-",
    "-",
    "a GPU with a Direct3D 12 driver (D3D12 adapter)",
    "1.24.4",
)
PACKS = (NV_PACK, OPENVINO_PACK, WEBGPU_PACK)
CHECKS = tuple(
    (code, CATALOGUE[code].severity.value, CATALOGUE[code].name, CATALOGUE[code].title)
    for code in DOCTOR_CHECKS
)


class Machine:
    """What a test puts into a prefix's System32, taken out again when its `with` ends. The
    prefix is shared with other tests: a file already there is an error, never replaced."""

    def __init__(self, wine: Wine, standins: Path) -> None:
        self.standins = standins
        self.system32 = wine.prefix / "drive_c" / "windows" / "system32"
        self.placed: list[Path] = []

    def __enter__(self) -> Machine:
        return self

    def __exit__(self, *_: object) -> None:
        for path in self.placed:
            path.unlink(missing_ok=True)

    def place(self, source: Path, folder: Path | None = None) -> None:
        """A copy of `source` in `folder`, System32 unless named."""
        target = (folder or self.system32) / source.name
        assert not target.exists(), f"{target} exists: another test left it"
        shutil.copyfile(source, target)
        self.placed.append(target)

    def driver(self, version: str | None = DRIVER_551) -> None:
        """The stand-in nvcuda.dll of driver `version` in System32; None: no driver at all."""
        if version is None:
            assert not (self.system32 / "nvcuda.dll").exists(), "another test left a driver"
            return
        self.place(self.standins / f"nvcuda-{version}" / "nvcuda.dll")


def changed_lock(
    folder: Path,
    gpu: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    skip_loads: tuple[str, ...] = (),
    **changes: Any,
) -> Lock:
    lock = read_lock(folder / LOCK_NAME)
    assert lock is not None, folder
    files = tuple(
        replace(item, sass=gpu[item.name][0], ptx=gpu[item.name][1])
        if gpu and item.name in gpu
        else item
        for item in lock.files
    )
    loads = tuple(name for name in lock.loads if name not in skip_loads)
    return replace(lock, **{"files": files, "loads": loads, **changes})


def write(
    folder: Path,
    gpu: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    *,
    name: str = DOCTOR_DATA,
    skip_loads: tuple[str, ...] = (),
    **changes: Any,
) -> Path:
    """Writes `folder/name` for the bundle in `folder` (its lock, changed) and returns it."""
    target = folder / name
    target.unlink(missing_ok=True)  # maybe a hard link shared with another copy
    target.write_text(doctor_data(changed_lock(folder, gpu, skip_loads, **changes)))
    return target


def seal(lines: list[tuple[str, ...]]) -> bytes:
    """Records joined with TAB and LF, then the `end` line with the digest of all before it."""
    body = "".join("\t".join(fields) + "\n" for fields in lines).encode()
    return body + b"end\t" + hashlib.sha256(body).hexdigest().encode() + b"\n"


def with_runtime_pack(text: str | bytes, sha256: str) -> bytes:
    """A data file with a `runtime_pack` record after its records (where the product writes
    it, after the `ep` records), sealed again; `sha256` as given, valid or not."""
    text = text.decode() if isinstance(text, bytes) else text
    lines = [tuple(line.split("\t")) for line in text[: text.rindex("end\t")].splitlines()]
    return seal([*lines, ("runtime_pack", sha256)])


def with_packs(text: str, packs: tuple[tuple[str, ...], ...] = PACKS, kind: str = "ep") -> bytes:
    """A data file (`doctor_data`'s output) with an `ep` record per pack after its records
    (ep records come last), sealed again; kind "pack": the record's name before issue 39."""
    body = text[: text.rindex("end\t")]
    lines = [tuple(line.split("\t")) for line in body.splitlines()]
    return seal([*lines, *((kind, *pack) for pack in packs)])
