"""The Wine harness (tests/support/wine.py) and the ground truth it gives, on hand-assembled
folders.

Each folder is put together by hand from the real wheels' DLLs (hard links, the GPU set is
~2.4 GB), so what is present and what is missing is known without bundle: these tests prove
that Wine's verdict matches, before other tests use Wine to judge bundle's output.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.support.paths import HELLO
from tests.support.real_dlls import RealDlls
from tests.support.wine import Wine, WineRun

realdata = pytest.mark.realdata  # every test but the parser's

VERSION_LINE = "ORT version: 1.19.2"
VC_RUNTIME = ("msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll")
CUDA_PROVIDER = "onnxruntime_providers_cuda.dll"
LOAD_LINE = re.compile(rf"^LoadLibrary {re.escape(CUDA_PROVIDER)}: (ok|error (\d+))$", re.M)


def assemble(folder: Path, parts: dict[Path, tuple[str, ...]], *, without: str = "") -> Path:
    """Hard-link the named DLLs (glob patterns) of each source folder into `folder`, leave out
    `without`, copy hello.exe in, and return the exe's path."""
    folder.mkdir()
    left_out = False
    for source, patterns in parts.items():
        for pattern in patterns:
            matches = sorted(source.glob(pattern))
            assert matches, f"{pattern} not in {source}"
            for dll in matches:
                if dll.name == without:
                    left_out = True
                else:
                    os.link(dll, folder / dll.name)
    assert left_out or not without, f"{without} is not in the set: nothing was left out"
    return Path(shutil.copy2(HELLO, folder / "hello.exe"))


def cpu_set(real_dlls: RealDlls) -> dict[Path, tuple[str, ...]]:
    return {
        real_dlls["onnxruntime"]: ("onnxruntime.dll", "onnxruntime_providers_shared.dll"),
        real_dlls["msvc-runtime"]: VC_RUNTIME,
    }


def gpu_set(real_dlls: RealDlls) -> dict[Path, tuple[str, ...]]:
    return {
        real_dlls["onnxruntime-gpu"]: (
            "onnxruntime.dll",
            "onnxruntime_providers_shared.dll",
            CUDA_PROVIDER,
        ),
        real_dlls["nvidia-cuda-runtime-cu12"]: ("cudart64_12.dll",),
        real_dlls["nvidia-cublas-cu12"]: ("cublas64_12.dll", "cublasLt64_12.dll"),
        real_dlls["nvidia-cufft-cu12"]: ("cufft64_11.dll",),
        real_dlls["nvidia-cudnn-cu12"]: ("cudnn*.dll",),
        real_dlls["nvidia-cuda-nvrtc-cu12"]: ("nvrtc64_120_0.dll", "nvrtc-builtins64_124.dll"),
        real_dlls["msvc-runtime"]: VC_RUNTIME,
    }


def explain(run: WineRun) -> str:
    return f"exit {run.returncode}\nstdout:\n{run.stdout}\nerr lines:\n" + "\n".join(run.errors)


def loader_line(dll: str, importer: str) -> str:
    """One unresolved-import line, spelled as Wine 8 prints it (the path's backslashes doubled)."""
    path = rf"Z:\\tmp\\cpu\\{importer}"
    return f'0024:err:module:import_dll Library {dll} (which is needed by L"{path}") not found'


def test_parse_reads_the_loader_lines() -> None:
    """Abridged from a real run of the CPU set without vcruntime140_1.dll."""
    stderr = "\n".join(
        [
            "it looks like wine32 is missing, you should install it.",
            "0064:fixme:ntdll:NtQuerySystemInformation info_class SYSTEM_PERFORMANCE_INFORMATION",
            "0064:err:systray:initialize_systray Could not create tray window",
            loader_line("VCRUNTIME140_1.dll", "MSVCP140.dll"),
            loader_line("MSVCP140.dll", "onnxruntime.dll"),
            loader_line("VCRUNTIME140_1.dll", "onnxruntime.dll"),
            r'0024:err:module:LdrInitializeThunk Importing dlls for L"Z:\\tmp\\cpu\\hello.exe"'
            " failed, status c0000135",
        ]
    )
    run = WineRun.parse(53, "", stderr)
    assert run.missing == ("VCRUNTIME140_1.dll", "MSVCP140.dll")
    assert run.errors == tuple(stderr.splitlines()[2:])


@realdata
def test_cpu_set_runs(wine: Wine, real_dlls: RealDlls, tmp_path: Path) -> None:
    run = wine.run(assemble(tmp_path / "cpu", cpu_set(real_dlls)))
    assert run.returncode == 0, explain(run)
    assert VERSION_LINE in run.stdout.splitlines(), explain(run)
    assert run.missing == (), explain(run)


@realdata
def test_cpu_set_without_vcruntime140_1_fails_to_start(
    wine: Wine, real_dlls: RealDlls, tmp_path: Path
) -> None:
    folder = tmp_path / "cpu"
    run = wine.run(assemble(folder, cpu_set(real_dlls), without="vcruntime140_1.dll"))
    assert run.returncode != 0, explain(run)
    assert VERSION_LINE not in run.stdout, explain(run)
    # Spelled as in the importers' import tables. The loader reports the cascade: msvcp140,
    # msvcp140_1 and onnxruntime are present but fail because of what they import.
    assert set(run.missing) == {
        "VCRUNTIME140_1.dll",
        "MSVCP140.dll",
        "MSVCP140_1.dll",
        "onnxruntime.dll",
    }, explain(run)
    assert run.absent_from(folder) == ("VCRUNTIME140_1.dll",), explain(run)


@realdata
def test_same_folder_starts_with_wines_builtin_vc_runtime(
    wine: Wine, real_dlls: RealDlls, tmp_path: Path
) -> None:
    """Why force_native_vc defaults to True: Wine's builtins would hide the missing DLL."""
    exe = assemble(tmp_path / "cpu", cpu_set(real_dlls), without="vcruntime140_1.dll")
    run = wine.run(exe, force_native_vc=False)
    assert run.returncode == 0, explain(run)
    assert run.missing == (), explain(run)


@realdata
def test_gpu_set_loads_the_cuda_provider_up_to_the_driver(
    wine: Wine, real_dlls: RealDlls, tmp_path: Path
) -> None:
    """All of the provider's DLL dependencies are present, so it gets as far as running its
    initialisers; without a GPU (and under Wine) that ends in error 998 (ERROR_NOACCESS, an
    access violation inside onnxruntime_providers_cuda.dll), not 126 (a DLL not found)."""
    folder = tmp_path / "gpu"
    run = wine.run(assemble(folder, gpu_set(real_dlls)), "--try-provider", CUDA_PROVIDER)
    assert VERSION_LINE in run.stdout.splitlines(), explain(run)
    loaded = LOAD_LINE.search(run.stdout)
    assert loaded, explain(run)
    assert loaded.group(2) != "126", explain(run)
    bundled = {path.name.lower() for path in folder.iterdir()}
    assert not [name for name in run.missing if name.lower() in bundled], explain(run)


@realdata
def test_gpu_set_without_cudnn_cannot_load_the_cuda_provider(
    wine: Wine, real_dlls: RealDlls, tmp_path: Path
) -> None:
    exe = assemble(tmp_path / "gpu", gpu_set(real_dlls), without="cudnn64_9.dll")
    run = wine.run(exe, "--try-provider", CUDA_PROVIDER)
    assert run.returncode == 3, explain(run)
    assert VERSION_LINE in run.stdout.splitlines(), explain(run)
    loaded = LOAD_LINE.search(run.stdout)
    assert loaded, explain(run)
    assert loaded.group(1) == "error 126", explain(run)
    assert run.missing == ("cudnn64_9.dll",), explain(run)
