"""Tier 3: the closure on the real ORT 1.19.2 / CUDA 12.4 / cuDNN 9.1 / MSVC DLLs.

The expected sets (tests/support/gpu_closure.py) are written out from
docs/field-notes.md#import-graph and the issue's acceptance list, not copied from bundle's output.
The app is the mingw-built examples/hello/hello.exe, which imports onnxruntime.dll and nothing else
of ORT."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.gpu_closure import GPU_BUNDLE, GPU_WHEELS, VC_RUNTIME
from tests.support.paths import HELLO
from tests.support.real_dlls import RealDlls
from tests.support.runs import run_bundle

pytestmark = pytest.mark.realdata


def deps_json(*args: str) -> tuple[dict[str, object], int]:
    result = run_bundle("deps", *args, "--json")
    assert result.stdout, result.stderr
    return json.loads(result.stdout), result.returncode


def by_status(plan: dict[str, object], status: str) -> set[str]:
    files = plan["files"]
    assert isinstance(files, list)
    return {item["key"] for item in files if item["status"] == status}


def closure(
    real_dlls: RealDlls, profile: str, *packages: str
) -> tuple[dict[str, object], set[str]]:
    """`bundle deps --json` of hello.exe with `profile`, the DLLs of `packages`' wheels searched:
    the plan, and the names it bundles."""
    plan, code = deps_json(str(HELLO), "--profile", profile, *real_dlls.search_args(*packages))
    assert code == 0, plan
    return plan, by_status(plan, "bundled")


def test_gpu_closure_is_exactly_the_documented_set(real_dlls: RealDlls) -> None:
    plan, bundled = closure(real_dlls, "ort-1.19.2-gpu-cuda12", *GPU_WHEELS)
    assert bundled == GPU_BUNDLE
    assert by_status(plan, "driver") == {"nvcuda.dll"}
    assert by_status(plan, "missing") == set()
    # Nothing of the OS: every bundled file comes out of one of the wheels' DLL folders.
    wheel_folders = {str(real_dlls[package]) for package in GPU_WHEELS}
    for item in plan["files"]:  # type: ignore[attr-defined]
        if item["status"] == "bundled":
            assert str(Path(item["source"]).parent) in wheel_folders
    assert {"kernel32.dll", "advapi32.dll"} <= by_status(plan, "system")
    assert "api-ms-win-crt-runtime-l1-1-0.dll" in by_status(plan, "api-set")


def test_gpu_tree_is_readable_and_names_the_driver(real_dlls: RealDlls) -> None:
    result = run_bundle("deps", str(HELLO), *real_dlls.search_args(*GPU_WHEELS))
    assert result.returncode == 0, result.stderr
    assert "nvcuda.dll  driver" in result.stdout
    assert "Bundled: 21 DLLs" in result.stdout
    assert "Missing: none" in result.stdout


def test_why_shows_the_runtime_rule_chain_through_cudnn64_9(real_dlls: RealDlls) -> None:
    result = run_bundle(
        "deps", str(HELLO), *real_dlls.search_args(*GPU_WHEELS), "--why", "cudnn_ops64_9.dll"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cudnn_ops64_9.dll is bundled")
    direct = (
        "hello.exe -import-> onnxruntime.dll -runtime-> onnxruntime_providers_cuda.dll "
        "-import-> cudnn64_9.dll -runtime-> cudnn_ops64_9.dll"
    )
    assert any(line.strip() == direct for line in lines)
    assert any("cuDNN 9's front DLL" in line for line in lines)


def test_without_cudnn_graph_it_is_missing_with_chains(real_dlls: RealDlls, tmp_path: Path) -> None:
    cudnn = tmp_path / "cudnn"
    cudnn.mkdir()
    for dll in real_dlls["nvidia-cudnn-cu12"].glob("*.dll"):
        if dll.name != "cudnn_graph64_9.dll":
            os.link(dll, cudnn / dll.name)
    others = [package for package in GPU_WHEELS if package != "nvidia-cudnn-cu12"]
    search = [*real_dlls.search_args(*others), "--search", str(cudnn)]
    plan, code = deps_json(str(HELLO), *search)
    assert code == 3
    assert by_status(plan, "missing") == {"cudnn_graph64_9.dll"}

    result = run_bundle("deps", str(HELLO), *search, "--why", "cudnn_graph64_9.dll")
    assert result.returncode == 3
    assert result.stdout.startswith("cudnn_graph64_9.dll is missing")
    assert "cudnn64_9.dll -runtime-> cudnn_graph64_9.dll" in result.stdout
    assert "cudnn_ops64_9.dll -import-> cudnn_graph64_9.dll" in result.stdout

    tree = run_bundle("deps", str(HELLO), *search)
    assert tree.returncode == 3
    assert "Missing: cudnn_graph64_9.dll" in tree.stdout


def test_directml_bundles_directml_dll_as_a_delay_import(real_dlls: RealDlls) -> None:
    plan, bundled = closure(
        real_dlls, "ort-1.19.2-directml", "onnxruntime-directml", "msvc-runtime"
    )
    ort = {"onnxruntime.dll", "onnxruntime_providers_shared.dll"}
    assert bundled == ort | {"directml.dll"} | VC_RUNTIME
    assert {"d3d12.dll", "dxgi.dll", "dxcore.dll"} <= by_status(plan, "system")
    edges = plan["edges"]
    assert {"parent": "onnxruntime.dll", "child": "directml.dll", "kind": "delay-import"} in [
        {key: edge[key] for key in ("parent", "child", "kind")}
        for edge in edges  # type: ignore[attr-defined]
    ]


def test_cpu_profile_closure(real_dlls: RealDlls) -> None:
    _, bundled = closure(real_dlls, "ort-1.19.2-cpu", "onnxruntime", "msvc-runtime")
    assert bundled == {"onnxruntime.dll", "onnxruntime_providers_shared.dll"} | VC_RUNTIME


def test_a_32_bit_exe_against_the_x64_profile_is_a_machine_mismatch(
    real_dlls: RealDlls, mingw_build: Path
) -> None:
    app32 = mingw_build / "x86" / "ortapp.exe"
    result = run_bundle("deps", str(app32), *real_dlls.search_args(*GPU_WHEELS))
    assert result.returncode == 5
    assert result.stdout == ""
    error = result.stderr.strip()
    assert "\n" not in error
    assert str(app32) in error
    assert "x86" in error and "x64" in error
    assert "Traceback" not in result.stderr
