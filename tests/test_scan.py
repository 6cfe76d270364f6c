"""`bundle scan` and `bundle profiles check`: runtime loads found in the binaries' own bytes.

Three tiers. A program compiled here with mingw (a real LoadLibraryW import, real string constants:
a plain name, a wide name, a printf pattern, a message naming a DLL) pins the string reader and the
kinds down. The real ORT / CUDA / cuDNN DLLs must give every runtime rule of the GPU profile: the
expected set below was read from docs/field-notes.md#import-graph and `strings -a` / `strings -el`
on the pinned wheels, not from the scanner's output. `profiles check` passes on the three shipped
profiles and fails when a rule is deleted or a DLL gains a name."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bundler.rules.scan import Confidence, Kind, Pool, dll_strings, pattern_regex, scan
from bundler.target.profiles import load_profile
from bundler.target.system import load_system_policy
from tests.support.mingw import compile_c
from tests.support.paths import CPU, DIRECTML, GPU
from tests.support.pefactory import PESpec, write_pe
from tests.support.profiles import without_rule
from tests.support.real_dlls import RealDlls
from tests.support.runs import fetch, pip_env, run_bundle

LOADER_C = r"""
#include <windows.h>
#include <stdio.h>
const char plain[] = "helper_plugin.dll";
const wchar_t wide[] = L"wide_plugin.dll";
const char pattern[] = "engine64_%d_0.dll";
const char message[] = "error: failed to open missing_thing.dll.";
int main(int argc, char **argv) {
    HMODULE a = LoadLibraryA(plain);
    HMODULE b = LoadLibraryW(wide);
    char name[64];
    snprintf(name, sizeof name, pattern, argc);
    HMODULE c = LoadLibraryA(name);
    if (!a && !b && !c) puts(message);
    return 0;
}
"""


@pytest.fixture(scope="module")
def loader_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scan-src")
    (folder / "loader.c").write_text(LOADER_C)
    return compile_c(folder / "loader.c", folder / "loader.exe", "-O1")


def pool_with(folder: Path, *names: str) -> Pool:
    for name in names:
        (folder / name).write_bytes(b"MZ")
    return Pool.of([folder])


def test_a_name_imported_under_another_version_is_a_fallback(tmp_path: Path) -> None:
    """Imports outrank strings: ORT 1.31.1's CUDA provider imports cublas64_13.dll and names
    cublas64_12.dll as text (docs/field-notes.md#newer-releases). With both in the pool, the _12
    string is a fallback, not a runtime load; a name of a family it does not import stays a load."""
    provider = write_pe(tmp_path / "provider.dll", PESpec(imports=("cublas64_13.dll",)))
    with provider.open("ab") as handle:  # strings after the image, as in a real binary's data
        handle.write(b"\0cublas64_12.dll\0cudart64_12.dll\0cublas64_13.dll\0")
    (tmp_path / "pool").mkdir()
    pool = pool_with(tmp_path / "pool", "cublas64_12.dll", "cublas64_13.dll", "cudart64_12.dll")
    kinds = {c.name: c.kind for c in scan(provider, pool, load_system_policy()).candidates}
    assert kinds == {
        "cublas64_12.dll": Kind.FALLBACK,
        "cublas64_13.dll": Kind.IMPORTED,
        "cudart64_12.dll": Kind.RUNTIME,
    }
    result = run_bundle("scan", str(provider), "--pool", str(tmp_path / "pool"))
    assert result.returncode == 0, result.stderr
    assert any(
        line.split()[:2] == ["fallback", "cublas64_12.dll"] for line in result.stdout.splitlines()
    )


def test_strings_ascii_wide_cut_at_non_name_bytes() -> None:
    data = b"\0abc.dll\0\0\0" + "wide.DLL".encode("utf-16-le") + b"\0\0C:\\dir\\deep.dll.\0"
    found = {(e.text, e.encoding, e.standalone) for e in dll_strings(data)}
    assert found == {
        ("abc.dll", "ascii", True),
        ("wide.DLL", "utf-16le", True),
        ("deep.dll", "ascii", False),  # inside a path followed by "."
    }


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("nvrtc64_%d_0.dll", "nvrtc64_120_0.dll", True),
        ("nvrtc64_%d_0.dll", "nvrtc64_12x_0.dll", False),
        ("cudnn_%s64_9.dll", "cudnn_ops64_9.dll", True),
        ("lib%02u.dll", "lib07.dll", True),
        ("lib%02u.dll", "lib.dll", False),
    ],
)
def test_printf_patterns(pattern: str, name: str, matches: bool) -> None:
    assert (pattern_regex(pattern).fullmatch(name) is not None) is matches


def test_a_compiled_loader_gives_each_kind(loader_exe: Path, tmp_path: Path) -> None:
    pool = pool_with(tmp_path, "helper_plugin.dll", "wide_plugin.dll", "engine64_7_0.dll")
    result = scan(loader_exe, pool, load_system_policy())
    assert any(item.endswith("!LoadLibraryA") for item in result.loader_imports)
    kinds = {item.name.lower(): (item.kind, item.confidence) for item in result.candidates}
    assert kinds["helper_plugin.dll"] == (Kind.RUNTIME, Confidence.HIGH)
    assert kinds["wide_plugin.dll"] == (Kind.RUNTIME, Confidence.HIGH)
    assert kinds["engine64_7_0.dll"] == (Kind.RUNTIME, Confidence.MEDIUM)  # via the pattern
    assert kinds["missing_thing.dll"][0] is Kind.ABSENT
    assert kinds["kernel32.dll"][0] is Kind.IMPORTED
    engine = next(item for item in result.candidates if item.name == "engine64_7_0.dll")
    assert engine.pattern == "engine64_%d_0.dll"
    data = loader_exe.read_bytes()
    for candidate in result.candidates:  # every offset points at the string it reports
        for evidence in candidate.evidence:
            codec = "ascii" if evidence.encoding == "ascii" else "utf-16-le"
            raw = evidence.text.encode(codec)
            assert data[evidence.offset : evidence.offset + len(raw)] == raw


def test_scan_cli_json(loader_exe: Path, tmp_path: Path) -> None:
    pool_with(tmp_path, "helper_plugin.dll")
    result = run_bundle("scan", str(loader_exe), "--pool", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)["files"]
    runtime = [c["name"] for c in files[0]["candidates"] if c["kind"] == "runtime"]
    assert runtime == ["helper_plugin.dll"]
    assert [p["text"] for p in files[0]["unmatched_patterns"]] == ["engine64_%d_0.dll"]


def test_scan_refuses_a_missing_file(tmp_path: Path) -> None:
    result = run_bundle("scan", str(tmp_path / "nope.dll"))
    assert result.returncode == 4 and "nope.dll: not a file" in result.stderr


# --- the real DLLs ------------------------------------------------------------------------------

# (scanned DLL, runtime load) as `strings` shows them in the pinned 1.19.2 / CUDA 12.4 / cuDNN
# 9.1.0.70 binaries. Driver DLLs (nvcuda, nvldumd, nvldumdx) are named by most CUDA DLLs and
# checked apart: the rule that matters is cudart64_12.dll -> nvcuda.dll.
EXPECTED_RUNTIME = {
    ("onnxruntime.dll", "onnxruntime_providers_shared.dll"),
    ("onnxruntime.dll", "onnxruntime_providers_cuda.dll"),
    ("cudnn64_9.dll", "cudnn_graph64_9.dll"),
    ("cudnn64_9.dll", "cudnn_ops64_9.dll"),
    ("cudnn64_9.dll", "cudnn_cnn64_9.dll"),
    ("cudnn64_9.dll", "cudnn_adv64_9.dll"),
    ("cudnn_graph64_9.dll", "cudnn_cnn64_9.dll"),
    ("cudnn_graph64_9.dll", "cudnn_engines_precompiled64_9.dll"),
    ("cudnn_graph64_9.dll", "cudnn_engines_runtime_compiled64_9.dll"),
    ("cudnn_graph64_9.dll", "cudnn_heuristic64_9.dll"),
    ("cudnn_graph64_9.dll", "nvrtc64_120_0.dll"),  # through the pattern nvrtc64_%d_0.dll
    ("cudnn_adv64_9.dll", "cublaslt64_12.dll"),
    ("cudnn_adv64_9.dll", "cudnn_cnn64_9.dll"),
    ("cudnn_engines_precompiled64_9.dll", "cublaslt64_12.dll"),
    ("cudnn_engines_precompiled64_9.dll", "cudnn_cnn64_9.dll"),
    ("nvrtc64_120_0.dll", "nvrtc-builtins64_124.dll"),
}
DRIVERS = {"nvcuda.dll", "nvldumd.dll", "nvldumdx.dll"}
# Names the scan reports that are no load of this bundle, and why (kind absent: no such DLL
# among the GPU profile's).
FALSE_POSITIVES = {
    "onnxruntime_providers_tensorrt.dll": "in the ORT wheel, needs TensorRT: not in this profile",
    "onnxruntime_providers_cann.dll": "another vendor's provider, not in the GPU build",
    "onnxruntime_providers_cuda_ut.dll": "ORT's unit-test build of the CUDA provider",
    "onnxruntime_providers_dnnl.dll": "another provider, not in the GPU build",
    "onnxruntime_providers_migraphx.dll": "AMD's provider, not in the GPU build",
    "onnxruntime_providers_openvino.dll": "Intel's provider, not in the GPU build",
    "onnxruntime_providers_rocm.dll": "AMD's provider, not in the GPU build",
    "onnxruntime_providers_vitisai.dll": "AMD's provider, not in the GPU build",
    "zlibwapi.dll": "cuDNN 8 needed zlib; cuDNN 9 names it but does not need it",
    "cask_profile_interface.dll": "an optional NVIDIA profiling hook",
    "nvjitlink_120_0.dll": "cuFFT's LTO callbacks only: not used by ORT",
    "cudart64_124_127.dll": "cudart's own export name (CUDART64_124_127.DLL)",
    "cublas.dll": "cuBLAS's own original file name",
    "cublaslt.dll": "cuBLASLt's own original file name",
    "cufft.dll": "cuFFT's own original file name",
    "akernel32.dll": "bytes before 'kernel32.dll' that happen to be name characters",
}


@pytest.mark.realdata
def test_the_real_gpu_dlls_give_the_profiles_runtime_loads(gpu_bundle: Path) -> None:
    profile = load_profile(GPU)
    pool = Pool.of([gpu_bundle], profile.driver_dlls)
    policy = load_system_policy()
    found: set[tuple[str, str]] = set()
    absent: set[str] = set()
    for dll in sorted(gpu_bundle.glob("*.dll")):
        result = scan(dll, pool, policy)
        found |= {(dll.name.lower(), c.key) for c in result.of_kind(Kind.RUNTIME)}
        absent |= {c.key for c in result.of_kind(Kind.ABSENT)}
    assert {pair for pair in found if pair[1] not in DRIVERS} == EXPECTED_RUNTIME
    assert ("cudart64_12.dll", "nvcuda.dll") in found
    assert absent - set(FALSE_POSITIVES) == set(), "unexplained names"


def search_args(folder: Path) -> list[str]:
    return ["--source", "dir", "--search", str(folder), "--offline"]


def check(*args: str) -> tuple[dict[str, object], int]:
    result = run_bundle("profiles", "check", *args, "--json")
    assert result.stdout, result.stderr
    return json.loads(result.stdout), result.returncode


@pytest.mark.realdata
def test_profiles_check_passes_on_the_gpu_profile(gpu_cache: Path) -> None:
    data, code = check(GPU, "--cache-dir", str(gpu_cache), "--offline")
    assert code == 0, data["drifts"]
    assert data["ok"] is True and len(data["scanned"]) == 21  # type: ignore[arg-type]


@pytest.mark.realdata
def test_profiles_check_passes_on_the_cpu_profile(cpu_cache: Path) -> None:
    data, code = check(CPU, "--cache-dir", str(cpu_cache), "--offline")
    assert code == 0, data["drifts"]


@pytest.mark.realdata
def test_profiles_check_passes_on_the_directml_profile(real_dlls: RealDlls, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fetched = fetch("--profile", DIRECTML, "--cache-dir", str(cache), env=pip_env())
    assert fetched.returncode == 0, fetched.stderr
    data, code = check(DIRECTML, "--cache-dir", str(cache), "--offline")
    assert code == 0, data["drifts"]


@pytest.mark.realdata
def test_profiles_check_fails_without_one_rule(gpu_bundle: Path, tmp_path: Path) -> None:
    profile = without_rule(load_profile(GPU).path, tmp_path / "gpu.toml", "nvrtc64_120_0.dll")
    data, code = check(str(profile), *search_args(gpu_bundle))
    assert code == 6
    drifts = [(d["kind"], d["trigger"], d["name"]) for d in data["drifts"]]  # type: ignore[attr-defined]
    assert drifts == [("evidence-without-rule", "nvrtc64_120_0.dll", "nvrtc-builtins64_124.dll")]


@pytest.mark.realdata
def test_profiles_check_fails_when_a_dll_gains_a_name(gpu_bundle: Path, tmp_path: Path) -> None:
    folder = tmp_path / "dlls"
    folder.mkdir()
    for path in gpu_bundle.glob("*.dll"):
        os.link(path, folder / path.name)
    patched = folder / "cudnn64_9.dll"
    patched.unlink()  # a real copy: the hard link would carry the patch into the cache
    shutil.copyfile(gpu_bundle / "cudnn64_9.dll", patched)
    with patched.open("ab") as handle:
        handle.write(b"\0cufft64_11.dll\0")
    clean, clean_code = check(GPU, *search_args(gpu_bundle))
    assert clean_code == 0, clean["drifts"]
    data, code = check(GPU, *search_args(folder))
    assert code == 6
    drifts = [(d["kind"], d["trigger"], d["name"]) for d in data["drifts"]]  # type: ignore[attr-defined]
    assert drifts == [("evidence-without-rule", "cudnn64_9.dll", "cufft64_11.dll")]


@pytest.mark.realdata
def test_a_documented_exception_accepts_a_pair_and_goes_stale(
    gpu_bundle: Path, tmp_path: Path
) -> None:
    source = without_rule(load_profile(GPU).path, tmp_path / "base.toml", "nvrtc64_120_0.dll")
    exception = (
        '\n[[scan_exceptions]]\nfile = "nvrtc64_120_0.dll"\nname = "nvrtc-builtins64_124.dll"\n'
        'why = "test: accepted"\n'
    )
    excepted = tmp_path / "excepted.toml"
    excepted.write_text(source.read_text() + exception)
    data, code = check(str(excepted), *search_args(gpu_bundle))
    assert code == 0, data["drifts"]
    assert [d["kind"] for d in data["drifts"]] == ["excepted"]  # type: ignore[attr-defined]
    stale = tmp_path / "stale.toml"
    stale.write_text(load_profile(GPU).path.read_text() + exception)
    data, code = check(str(stale), *search_args(gpu_bundle))
    assert code == 6
    assert [d["kind"] for d in data["drifts"]] == ["stale-exception"]  # type: ignore[attr-defined]
