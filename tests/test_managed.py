"""Managed (.NET) apps: a C# ORT host imports only mscoree.dll and reaches ONNX Runtime through
P/Invoke, so its closure is the profile's. Real exes compiled by Debian's mono-mcs from
tests/fixtures/managed/; the closure, build and audit tests use the real CPU-profile DLLs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bundler.binary.pe import read_pe
from bundler.target.system import load_system_policy
from tests.support.paths import CPU, HELLO, REPO
from tests.support.runs import bundle_from_cache, run_bundle
from tests.support.skips import require

SOURCE = REPO / "tests" / "fixtures" / "managed" / "hello_managed.cs"
# mcs -platform values: the PE machine, and whether the CLR runs the exe as x64 on x64 Windows.
PLATFORMS = {
    "anycpu": ("x86", True),  # PE32, IL-only: runs as x64 on 64-bit Windows
    "x64": ("x64", True),  # PE32+
    "x86": ("x86", False),  # 32BITREQUIRED
    "anycpu32bitpreferred": ("x86", False),  # "Prefer 32-bit": 32BITREQUIRED + 32BITPREFERRED
}
RUNS_AS_X64 = [name for name, (_, x64) in PLATFORMS.items() if x64]
RUNS_AS_X86 = [name for name, (_, x64) in PLATFORMS.items() if not x64]
VC_RUNTIME = {"msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll"}


@pytest.fixture(scope="session")
def managed_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C# host compiled for every platform (each in its own folder, as `app.exe`), plus the
    same source as a managed library, OrtHost.dll."""
    mcs = shutil.which("mcs")
    require(mcs is not None, "mcs not found: apt-get install mono-mcs")
    assert mcs is not None
    out = tmp_path_factory.mktemp("managed")
    for platform in PLATFORMS:
        (out / platform).mkdir()
        _mcs(mcs, f"-platform:{platform}", f"-out:{out / platform / 'app.exe'}")
    _mcs(mcs, "-target:library", f"-out:{out / 'OrtHost.dll'}")
    return out


def _mcs(mcs: str, *args: str) -> None:
    subprocess.run([mcs, "-nologo", *args, str(SOURCE)], check=True, capture_output=True)


def deps_json(exe: Path, cache: Path) -> dict[str, object]:
    result = bundle_from_cache(
        "deps", str(exe), "--profile", CPU, "--fetch", "--cache-dir", str(cache), "--json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def bundled(plan: dict[str, object]) -> set[str]:
    files = plan["files"]
    assert isinstance(files, list)
    return {item["key"] for item in files if item["status"] == "bundled"}


def test_mscoree_is_a_windows_dll() -> None:
    assert load_system_policy().is_system("MSCOREE.DLL", (10, 0, 10240))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_managed_exe_imports_only_mscoree(managed_build: Path, platform: str) -> None:
    info = read_pe(managed_build / platform / "app.exe")
    machine, runs_as_x64 = PLATFORMS[platform]
    assert info.managed and not info.is_dll
    assert (info.machine, info.imports, info.delay_imports) == (machine, ("mscoree.dll",), ())
    assert info.runs_as("x64") is runs_as_x64


@pytest.mark.parametrize("platform", RUNS_AS_X86)
def test_a_32_bit_managed_exe_is_refused_for_x64(managed_build: Path, platform: str) -> None:
    result = run_bundle("deps", str(managed_build / platform / "app.exe"), "--profile", CPU)
    assert result.returncode == 5
    assert "32BITREQUIRED" in result.stderr and "/platform:x64" in result.stderr


@pytest.mark.realdata
@pytest.mark.parametrize("platform", RUNS_AS_X64)
def test_deps_gives_the_profile_closure(
    managed_build: Path, cpu_cache: Path, platform: str
) -> None:
    """The managed exe needs what the profile's roots need: hello.exe's closure minus what only
    hello.exe's own imports bring in (nothing: it imports onnxruntime.dll, a profile root)."""
    exe = managed_build / platform / "app.exe"
    plan = deps_json(exe, cache=cpu_cache)
    hello = deps_json(HELLO, cache=cpu_cache)
    edges = hello["edges"]
    assert isinstance(edges, list)
    hello_imports = {e["child"] for e in edges if e["parent"] == "hello.exe"}
    assert hello_imports - {"onnxruntime.dll"} <= {"kernel32.dll", "msvcrt.dll"}
    assert bundled(plan) == bundled(hello)
    assert {"onnxruntime.dll", "onnxruntime_providers_shared.dll"} | VC_RUNTIME <= bundled(plan)
    files = {item["key"]: item for item in plan["files"]}  # type: ignore[attr-defined]
    assert files["app.exe"]["managed"] is True
    assert files["mscoree.dll"]["status"] == "system"
    assert not [key for key, item in files.items() if item["status"] == "missing"]
    tree = bundle_from_cache(
        "deps", str(exe), "--profile", CPU, "--fetch", "--cache-dir", str(cpu_cache)
    )
    assert tree.returncode == 0, tree.stderr
    first = tree.stdout.splitlines()[0]
    assert first.startswith("app.exe  app") and "managed (.NET)" in first


@pytest.mark.realdata
@pytest.mark.parametrize("platform", RUNS_AS_X64)
def test_build_and_audit_of_a_managed_app(
    managed_build: Path, cpu_cache: Path, tmp_path: Path, platform: str
) -> None:
    out = tmp_path / "dist"
    exe = managed_build / platform / "app.exe"
    result = bundle_from_cache(
        "build", str(exe), "--profile", CPU, "--out", str(out), "--cache-dir", str(cpu_cache)
    )
    assert result.returncode == 0, result.stderr
    shipped = {path.name.lower() for path in out.glob("*.dll")}
    assert shipped == {"onnxruntime.dll", "onnxruntime_providers_shared.dll"} | VC_RUNTIME
    assert not (out / "mscoree.dll").exists()
    # A real C# app also ships its managed assemblies (the NuGet package's wrapper DLL): the
    # CLR loads them by metadata, so they are neither "unreferenced" nor a wrong machine type.
    shutil.copy(managed_build / "OrtHost.dll", out / "OrtHost.dll")
    audit = run_bundle("audit", str(out), "--json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    report = json.loads(audit.stdout)
    severities = {item["code"]: item["severity"] for item in report["findings"]}
    assert "error" not in severities.values() and "warning" not in severities.values(), severities
