"""Windows system policy: what it must contain, what it must never contain, and cross-checks
against Wine and the import tables of the real DLLs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bundler.binary.pe import read_pe
from bundler.target.system import load_system_policy
from tests.support.paths import REPO
from tests.support.real_dlls import RealDlls
from tests.support.skips import require

WIN10 = (10, 0, 10240)

# Redistributables and driver DLLs: listing any of these as "system" would silently drop them from a
# bundle (docs/field-notes.md#import-graph and #vc-runtime).
NEVER_SYSTEM = [
    "msvcp140.dll",
    "msvcp140_1.dll",
    "vcruntime140.dll",
    "vcruntime140_1.dll",
    "concrt140.dll",
    "vcomp140.dll",
    "nvcuda.dll",
    "nvml.dll",
    "directml.dll",
    "onnxruntime.dll",
    "cudart64_12.dll",
]


@pytest.mark.parametrize("name", NEVER_SYSTEM)
def test_redistributables_and_drivers_are_never_system(name: str) -> None:
    policy = load_system_policy()
    assert not policy.is_system(name, (10, 0, 99999))
    assert not policy.is_api_set(name)


@pytest.mark.parametrize(
    "name", ["KERNEL32.dll", "advapi32.dll", "ucrtbase.dll", "d3d12.dll", "dxgi.dll", "ole32.dll"]
)
def test_core_windows_dlls_are_system_on_windows_10(name: str) -> None:
    assert load_system_policy().is_system(name, WIN10)


def test_api_set_prefixes_match_case_insensitively() -> None:
    policy = load_system_policy()
    assert policy.is_api_set("API-MS-WIN-CRT-runtime-l1-1-0.dll")
    assert policy.is_api_set("ext-ms-win-gdi-draw-l1-1-0.dll")
    assert not policy.is_api_set("apix.dll")


def test_dxcore_depends_on_the_minimum_windows_version() -> None:
    policy = load_system_policy()
    assert not policy.is_system("dxcore.dll", WIN10)
    assert policy.is_system("dxcore.dll", (10, 0, 19041))


@pytest.mark.realdata
def test_every_import_of_the_real_dlls_is_accounted_for(real_dlls: RealDlls) -> None:
    """Each name the real ORT/CUDA/cuDNN/MSVC DLLs import is an API set, a system DLL, or one
    of the real DLLs themselves; only TensorRT (not part of any profile) is left over."""
    policy = load_system_policy()
    files = {
        dll.name.lower(): dll
        for folder in real_dlls.folders.values()
        for dll in folder.glob("*.dll")
    }
    unaccounted = set()
    for dll in files.values():
        info = read_pe(dll)
        for name in info.imports + info.delay_imports:
            key = name.lower()
            if not (
                policy.is_api_set(key) or policy.is_system(key, (10, 0, 19041)) or key in files
            ):
                unaccounted.add(key)
    assert unaccounted == {"nvinfer_10.dll", "nvinfer_plugin_10.dll", "nvonnxparser_10.dll"}


@pytest.mark.posix_only(reason="runs Wine, which runs on the Linux side only")
def test_wine_cross_check_finds_no_unreviewed_gap() -> None:
    require(
        shutil.which("wine64") is not None or shutil.which("wine") is not None,
        "Wine is not installed (apt-get install wine64)",
    )
    result = subprocess.run(
        [sys.executable, "-m", "tools.manifests.crosscheck_system_dlls", "--strict"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(0 not yet reviewed)" in result.stdout


def test_system_manifest_ships_with_provenance() -> None:
    text = (REPO / "manifests" / "windows" / "system.toml").read_text()
    assert text.count("source = ") >= 3
    assert Path(REPO / "tools" / "manifests" / "crosscheck_system_dlls.py").is_file()
