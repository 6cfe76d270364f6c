"""The hand-written TensorRT variant of the GPU profile (not derived: TensorRT's Windows wheels
are not on pypi.org). It must load, and its closure must need TensorRT's three DLLs, which only
a local TensorRT folder provides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.target.profiles import DirSource, PipSource, load_profile
from tests.support.gpu_closure import GPU_WHEELS
from tests.support.paths import HELLO
from tests.support.pefactory import write_pe
from tests.support.real_dlls import RealDlls
from tests.support.runs import run_bundle

PROFILE = "ort-1.19.2-gpu-cuda12-tensorrt"
TENSORRT = ("nvinfer_10.dll", "nvinfer_plugin_10.dll", "nvonnxparser_10.dll")


def test_the_tensorrt_profile_loads_and_says_it_was_not_derived() -> None:
    profile = load_profile(PROFILE)
    assert "onnxruntime_providers_tensorrt.dll" in profile.roots
    assert "onnxruntime_providers_tensorrt.dll" in profile.rules_for("onnxruntime.dll")[0].loads
    tensorrt = next(a for a in profile.artifacts if a.name == "tensorrt")
    assert set(tensorrt.provides) == set(TENSORRT)
    assert all(isinstance(source, DirSource) for source in tensorrt.sources)
    assert {source.env for source in tensorrt.sources if isinstance(source, DirSource)} == {
        "TENSORRT_PATH"
    }
    assert "NOT DERIVED" in profile.path.read_text()


def test_the_tensorrt_profile_repeats_the_gpu_profiles_pins() -> None:
    gpu, trt = load_profile("ort-1.19.2-gpu-cuda12"), load_profile(PROFILE)
    pins = [
        {s for a in p.artifacts for s in a.sources if isinstance(s, PipSource)} for p in (gpu, trt)
    ]
    assert pins[0] == pins[1]
    assert set(gpu.runtime_rules) - set(trt.runtime_rules) == {gpu.rules_for("onnxruntime.dll")[0]}


def deps(real_dlls: RealDlls, *extra: str) -> tuple[int, dict[str, object]]:
    args = [str(HELLO), "--profile", PROFILE, *real_dlls.search_args(*GPU_WHEELS), *extra]
    result = run_bundle("deps", *args, "--json")
    return result.returncode, json.loads(result.stdout)


def statuses(plan: dict[str, object]) -> dict[str, str]:
    files = plan["files"]
    assert isinstance(files, list)
    return {item["key"]: item["status"] for item in files}


@pytest.mark.realdata
def test_without_tensorrt_the_three_nvinfer_dlls_are_missing(real_dlls: RealDlls) -> None:
    code, plan = deps(real_dlls)
    assert code == 3
    missing = {key for key, status in statuses(plan).items() if status == "missing"}
    assert missing == set(TENSORRT)


@pytest.mark.realdata
def test_a_tensorrt_folder_resolves_them(real_dlls: RealDlls, tmp_path: Path) -> None:
    folder = tmp_path / "TensorRT-10.2.0.19" / "lib"
    for name in TENSORRT:
        write_pe(folder / name, machine="x64", dll=True)
    code, plan = deps(real_dlls, "--search", str(folder))
    assert code == 0, plan
    found = statuses(plan)
    assert all(found[name] != "missing" for name in TENSORRT)
    sources = {item["key"]: item["source"] for item in plan["files"]}  # type: ignore[attr-defined]
    assert all(Path(sources[name]).parent == folder for name in TENSORRT)
