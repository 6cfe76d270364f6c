"""`bundle profiles new`: a profile derived from a release's wheels.

Network code runs against a real HTTP server on 127.0.0.1 that serves PEP 691 project pages
built by this test from the wheels in the test cache (their SHA-256 and size computed here);
pip takes the wheels from the same cache (find-links), so nothing reaches the internet. The
1.19.2 derivation must reproduce the shipped GPU profile as data; a 1.20.2 derivation must
build a bundle that Wine's loader accepts the way it accepts the 1.19.2 one.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundler.acquire.download import DownloadPolicy
from bundler.errors import FetchError, ProfileError
from bundler.rules.derive.flavours import available_flavours, load_flavour
from bundler.rules.derive.index import find_wheel, wheel_rank
from bundler.target.profiles import PipSource, Profile, is_pattern, load_profile, load_profile_file
from tests.support.cache_links import RELEASES, kept_cache
from tests.support.httpserver import HttpServer
from tests.support.package_index import ORT_120, entry, page, profiles_new
from tests.support.package_index import local_index as local_index  # the module fixture
from tests.support.paths import HELLO
from tests.support.real_dlls import RealDlls
from tests.support.runs import pip_env
from tests.support.wine import Wine

CUDA_PROVIDER = "onnxruntime_providers_cuda.dll"
# ORT_120's, on https://pypi.org/simple/onnxruntime-gpu/ (PEP 691), read with curl on 2026-12-01
ORT_120_SHA256 = "d0eafd873e4336949c89e6c7429a68e7e1d0233d9cb363e9780ca76c3c6f865c"
FAST = DownloadPolicy(allow_http=True, connect_timeout=2, read_timeout=2, retries=0, backoff=0)


# --- the index client, on a synthetic PEP 691 page -----------------------------------------


def test_the_wheel_for_the_flavours_python_and_platform_is_pinned(
    http_server: HttpServer,
) -> None:
    http_server.serve_bytes(
        "/simple/demo-pkg/",
        page(
            entry("demo_pkg-1.0-py3-none-win_amd64.whl", "1" * 64, size=10),
            entry("demo_pkg-1.0-cp311-cp311-win_amd64.whl", "2" * 64, size=20),
            entry("demo_pkg-1.0-cp312-cp312-win_amd64.whl", "3" * 64, size=30),
            entry("demo_pkg-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "4" * 64),
            entry("demo_pkg-1.1-cp311-cp311-win_amd64.whl", "5" * 64),
            entry("demo_pkg-1.0.tar.gz", "6" * 64),
        ),
    )
    pin = find_wheel("Demo_Pkg", "1.0", "3.11", "x64", http_server.url("/simple/"), FAST)
    assert (pin.wheel, pin.sha256, pin.size) == (
        "demo_pkg-1.0-cp311-cp311-win_amd64.whl",
        "2" * 64,
        20,
    )
    assert pin.url == http_server.url("/files/demo_pkg-1.0-cp311-cp311-win_amd64.whl")
    assert pin.page == http_server.url("/simple/demo-pkg/")
    sent = http_server.requests_for("/simple/demo-pkg/")
    assert len(sent) == 1


def test_a_yanked_wheel_is_never_pinned(http_server: HttpServer) -> None:
    http_server.serve_bytes(
        "/simple/demo/",
        page(
            entry("demo-1.0-cp311-cp311-win_amd64.whl", "1" * 64, yanked="broken build"),
            entry("demo-1.0-py3-none-win_amd64.whl", "2" * 64),
        ),
    )
    pin = find_wheel("demo", "1.0", "3.11", "x64", http_server.url("/simple"), FAST)
    assert pin.wheel == "demo-1.0-py3-none-win_amd64.whl"


@pytest.mark.parametrize(
    ("route", "body", "message"),
    [
        ("/simple/demo/", None, "HTTP 404"),
        ("/simple/demo/", page(api="2.0"), "not a PEP 691 project page"),
        (
            "/simple/demo/",
            page(entry("demo-1.0-cp39-cp39-win_amd64.whl", "1" * 64)),
            "no win_amd64",
        ),
        ("/simple/demo/", page(entry("demo-1.0-py3-none-win_amd64.whl", "XYZ")), "no SHA-256"),
    ],
)
def test_index_problems_are_fetch_errors_naming_the_page(
    http_server: HttpServer, route: str, body: bytes | None, message: str
) -> None:
    if body is not None:
        http_server.serve_bytes(route, body)
    with pytest.raises(FetchError, match=message) as caught:
        find_wheel("demo", "1.0", "3.11", "x64", http_server.url("/simple/"), FAST)
    assert http_server.url(route) in str(caught.value)


def test_plain_http_index_is_refused_unless_allowed(http_server: HttpServer) -> None:
    http_server.serve_bytes(
        "/simple/demo/", page(entry("demo-1.0-py3-none-win_amd64.whl", "1" * 64))
    )
    strict = DownloadPolicy(connect_timeout=2, read_timeout=2, retries=0)
    with pytest.raises(FetchError, match="refusing plain HTTP"):
        find_wheel("demo", "1.0", "3.11", "x64", http_server.url("/simple/"), strict)
    assert http_server.requests == []


@pytest.mark.parametrize(
    ("name", "package", "version", "rank"),
    [
        ("onnxruntime_gpu-1.19.2-cp311-cp311-win_amd64.whl", "onnxruntime-gpu", "1.19.2", 0),
        ("nvidia_cudnn_cu12-9.1.0.70-py3-none-win_amd64.whl", "nvidia-cudnn-cu12", "9.1.0.70", 4),
        ("onnxruntime_gpu-1.19.2-cp311-cp311-win32.whl", "onnxruntime-gpu", "1.19.2", None),
        ("onnxruntime_gpu-1.19.20-cp311-cp311-win_amd64.whl", "onnxruntime-gpu", "1.19.2", None),
        ("onnxruntime-1.19.2-cp311-cp311-win_amd64.whl", "onnxruntime-gpu", "1.19.2", None),
        ("onnxruntime_gpu-1.19.2-cp312-cp312-win_amd64.whl", "onnxruntime-gpu", "1.19.2", None),
    ],
)
def test_wheel_tags(name: str, package: str, version: str, rank: int | None) -> None:
    assert wheel_rank(name, package, version, "3.11", "win_amd64") == rank


def test_every_shipped_flavour_loads_and_picks_its_default_components() -> None:
    assert {"gpu-cuda12", "cpu", "directml"} <= set(available_flavours())
    gpu = load_flavour("gpu-cuda12")
    assert gpu.ort.package == "onnxruntime-gpu"
    assert {p.package: p.version for p in gpu.components(None).packages} == {
        "nvidia-cuda-runtime-cu12": "12.4.127",
        "nvidia-cublas-cu12": "12.4.5.8",
        "nvidia-cufft-cu12": "11.2.1.3",
        "nvidia-cuda-nvrtc-cu12": "12.4.127",
        "nvidia-cudnn-cu12": "9.1.0.70",
        "msvc-runtime": "14.44.35112",
    }
    with pytest.raises(ProfileError, match="no component set 'cuda-99'"):
        gpu.components("cuda-99")
    assert load_flavour("directml").ort.package == "onnxruntime-directml"


# --- real wheels: a local PEP 691 index built from the test cache ----------------------------


def expand(names: tuple[str, ...], pool: set[str]) -> set[str]:
    """Names in lower case, a pattern replaced by the real DLLs it stands for."""
    out: set[str] = set()
    for name in names:
        if is_pattern(name):
            found = {dll for dll in pool if fnmatch.fnmatchcase(dll, name.lower())}
            assert found, f"{name} matches no DLL of the release"
            out |= found
        else:
            out.add(name.lower())
    return out


def as_data(profile: Profile, pool: set[str]) -> dict[str, object]:
    return {
        "artifacts": {
            (a.name, a.version, frozenset(expand(a.provides, pool))) for a in profile.artifacts
        },
        "pins": {
            (a.name, s.package, s.version, s.wheel, s.sha256)
            for a in profile.artifacts
            for s in a.sources
            if isinstance(s, PipSource)
        },
        "roots": expand(profile.roots, pool),
        "drivers": {name.lower() for name in profile.driver_dlls},
        "rules": {
            (rule.trigger.lower(), loaded)
            for rule in profile.runtime_rules
            for loaded in expand(rule.loads, pool)
        },
        "gpu_driver": profile.gpu_driver,
        "cuda_ep": profile.cuda_ep,
        "vc_runtime": profile.vc_runtime,
        "min_windows": profile.min_windows,
    }


def release_pool(real_dlls: RealDlls) -> set[str]:
    return {
        path.name.lower()
        for package in real_dlls.folders
        for path in real_dlls[package].glob("*.dll")
    }


@pytest.mark.realdata
def test_deriving_1_19_2_reproduces_the_shipped_gpu_profile(
    local_index: str, gpu_cache: Path, real_dlls: RealDlls, tmp_path: Path
) -> None:
    out = tmp_path / "derived.toml"
    result = profiles_new(
        local_index, gpu_cache, "--ort", "1.19.2", "--flavour", "gpu-cuda12", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    pool = release_pool(real_dlls)
    derived = as_data(load_profile_file(out), pool)
    shipped = as_data(load_profile("ort-1.19.2-gpu-cuda12"), pool)
    for key in shipped:
        assert derived[key] == shipped[key], key
    text = out.read_text()
    assert f"{local_index}onnxruntime-gpu/" in text  # the pin's provenance
    assert "names 'cudnn_ops64_9.dll' at offset 0x" in text  # a rule's evidence
    assert "MSVC linker 14.40" in text  # the VC++ floor's


@pytest.fixture(scope="module")
def ort_120(
    local_index: str,
    real_dlls: RealDlls,
    gpu_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Path]]:
    """The 1.20.2 profile, derived into the kept cache of released wheels (tests/support/
    cache_links.kept_cache). The release pins the session's CUDA 12.4 and cuDNN wheels (the
    same SHA-256s as 1.19.2's), so the cache is seeded with the session's archives as hard
    links and only the ORT 1.20.2 wheel comes through pip, on a first run (a cache hit for the
    rest is a fetch by SHA-256 too). The derived profile goes when the module is done."""
    folder = tmp_path_factory.mktemp("ort-1.20.2")
    cache, out = kept_cache(RELEASES, seed=gpu_cache), folder / "ort-1.20.2-gpu-cuda12.toml"
    result = profiles_new(
        local_index, cache, "--ort", "1.20.2", "--flavour", "gpu-cuda12", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    yield cache, out
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.realdata
def test_the_1_20_2_profile_pins_the_indexed_wheel_and_passes_its_own_check(
    ort_120: tuple[Path, Path],
) -> None:
    cache, out = ort_120
    profile = load_profile_file(out)
    assert profile.name == "ort-1.20.2-gpu-cuda12"
    ort = next(a for a in profile.artifacts if a.name == "onnxruntime")
    assert ort.sources == (PipSource("onnxruntime-gpu", "1.20.2", ORT_120, ORT_120_SHA256),)
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "bundler",
            "profiles",
            "check",
            str(out),
            "--cache-dir",
            str(cache),
            "--offline",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BUNDLE_DEBUG": ""},
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.realdata
def test_a_bundle_built_with_the_1_20_2_profile_loads_under_wine(
    ort_120: tuple[Path, Path], wine: Wine, tmp_path: Path
) -> None:
    cache, profile = ort_120
    out = tmp_path / "bundle"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "bundler",
            "build",
            str(HELLO),
            "--profile",
            str(profile),
            "--out",
            str(out),
            "--cache-dir",
            str(cache),
            "--link",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env(PIP_FIND_LINKS="/nonexistent")},
    )
    assert build.returncode == 0, build.stderr
    run = wine.run(out / "hello.exe", "--try-provider", CUDA_PROVIDER)
    assert "ORT version: 1.20.2" in run.stdout, run.errors
    # 126 = a dependency of the provider is missing; 998 = it loaded them all, then found no GPU.
    assert f"LoadLibrary {CUDA_PROVIDER}: error 126" not in run.stdout
    assert f"LoadLibrary {CUDA_PROVIDER}:" in run.stdout
    assert run.missing == (), run.errors
