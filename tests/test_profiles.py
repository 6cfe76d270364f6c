"""Profiles: the shipped manifests load and validate; bad manifests fail with file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.eps.plugins import available_packs, load_pack
from bundler.errors import ProfileError
from bundler.target.profiles import PipSource, UrlSource, available_profiles, load_profile
from tests.support.runs import run_bundle

SHIPPED = {
    "ort-1.19.2-gpu-cuda12",
    "ort-1.19.2-cpu",
    "ort-1.19.2-directml",
    "ort-1.19.2-gpu-cuda12-tensorrt",
}
# TensorRT's Windows wheels are not on pypi.org: that profile's TensorRT artifact comes from a
# local install (a `dir` source) only, by design; every other artifact is pinned.
LOCAL_ONLY = {("ort-1.19.2-gpu-cuda12-tensorrt", "tensorrt")}

MINIMAL = """schema_version = 1
name = "mine"
description = "d"
architecture = "x64"
min_windows = "10.0.10240"
vc_runtime = "app-local"
roots = ["onnxruntime.dll"]
"""


def test_the_shipped_profiles_load() -> None:
    assert set(available_profiles()) >= SHIPPED  # the hand-written ones; the catalogue's too
    for name in available_profiles():
        profile = load_profile(name)
        assert profile.name == name
        assert profile.architecture == "x64"
        assert "onnxruntime.dll" in profile.roots


def test_gpu_profile_pins_the_release_zip_with_two_algorithms() -> None:
    gpu = load_profile("ort-1.19.2-gpu-cuda12")
    ort = next(a for a in gpu.artifacts if a.name == "onnxruntime")
    url = next(s for s in ort.sources if isinstance(s, UrlSource))
    assert url.url.endswith("/v1.19.2/onnxruntime-win-x64-gpu-1.19.2.zip")
    assert url.sha512 is not None and len(url.sha512) == 128
    pip = next(s for s in ort.sources if isinstance(s, PipSource))
    assert (pip.package, pip.version) == ("onnxruntime-gpu", "1.19.2")


def test_gpu_profile_roots_and_drivers() -> None:
    gpu = load_profile("ort-1.19.2-gpu-cuda12")
    assert "onnxruntime_providers_cuda.dll" in gpu.roots
    assert gpu.is_driver("NVCUDA.DLL")
    assert not gpu.is_driver("cudart64_12.dll")
    assert [rule.loads for rule in gpu.rules_for("CUDNN64_9.dll")] == [
        ("cudnn_graph64_9.dll", "cudnn_ops64_9.dll", "cudnn_cnn64_9.dll", "cudnn_adv64_9.dll")
    ]


def test_every_provided_dll_of_an_artifact_has_a_pinned_source() -> None:
    for name in SHIPPED:
        for artifact in load_profile(name).artifacts:
            pinned = [s for s in artifact.sources if isinstance(s, UrlSource | PipSource)]
            local_only = (name, artifact.name) in LOCAL_ONLY
            assert bool(pinned) is not local_only, f"{name}: artifact {artifact.name}"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('architecture = "x64"', "key 'architecture' must be one of"),
        ('roots = ["onnxruntime.dll"]', "key 'roots' is required"),
        ('name = "mine"', "key 'name' is required"),
    ],
)
def test_invalid_fields_name_file_and_key(tmp_path: Path, change: str, message: str) -> None:
    text = MINIMAL.replace(change, 'architecture = "mips"' if "arch" in change else "")
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as error:
        load_profile(str(path))
    assert str(path) in str(error.value) and message in str(error.value)


ARTIFACT = '[[artifacts]]\nname = "x"\nversion = "1"\nprovides = ["x.dll"]\n[[artifacts.sources]]\n'


@pytest.mark.parametrize(
    ("added", "message"),
    [
        ('driver_dll = ["nvcuda.dll"]\n', "unknown key"),  # a typo, not ignored
        (
            ARTIFACT
            + 'kind = "pip"\npackage = "x"\nversion = "1"\nwheel = "x.whl"\nsha256 = "ABC"\n',
            "'sha256' must be 64 lower-case hex digits",
        ),
        (
            ARTIFACT
            + f'kind = "url"\nurl = "http://example.invalid/x.zip"\nsha256 = "{"0" * 64}"\n',
            "https://",
        ),
    ],
    ids=["unknown-key", "bad-sha256", "plain-http-url"],
)
def test_a_bad_line_is_refused(tmp_path: Path, added: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL + added)
    with pytest.raises(ProfileError, match=message):
        load_profile(str(path))


def test_invalid_toml_and_schema_version(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n")
    with pytest.raises(ProfileError, match="invalid TOML"):
        load_profile(str(broken))
    future = tmp_path / "future.toml"
    future.write_text(MINIMAL.replace("schema_version = 1", "schema_version = 2"))
    with pytest.raises(ProfileError, match="schema_version 2 is not supported"):
        load_profile(str(future))


def test_cli_lists_and_shows_profiles() -> None:
    listing = run_bundle("profiles")
    assert listing.returncode == 0
    profiles, packs = listing.stdout.split("\n\n")
    rows = profiles.splitlines()[1:]  # under the header: the profile name comes last
    assert {line.split()[-1] for line in rows} == set(available_profiles())
    # then the packs --ep takes: the name first, then its pinned wheel
    pins = {name: load_pack(name).source.pip for name in available_packs()}
    expected = {(name, f"{pip.package}=={pip.version}") for name, pip in pins.items()}
    assert {tuple(line.split()[:2]) for line in packs.splitlines()[2:]} == expected
    assert len(expected) == 3
    shown = run_bundle("profiles", "show", "ort-1.19.2-gpu-cuda12")
    assert shown.returncode == 0
    assert "nvrtc64_120_0.dll -> nvrtc-builtins64_*.dll" in shown.stdout
    assert "driver DLLs:  nvcuda.dll" in shown.stdout


def test_cli_unknown_profile_is_one_line_exit_6(tmp_path: Path) -> None:
    result = run_bundle("profiles", "show", "ort-9.9-gpu")
    assert result.returncode == 6
    assert result.stderr.count("\n") == 1
    assert "unknown profile 'ort-9.9-gpu'" in result.stderr
    assert "did you mean ort-" in result.stderr and "bundle profiles lists all" in result.stderr
    assert "ort-1.19.2-gpu-cuda12" not in result.stderr  # a suggestion, not the whole list


def test_cli_profile_json_is_machine_readable() -> None:
    import json

    shown = run_bundle("profiles", "show", "ort-1.19.2-directml", "--json")
    data = json.loads(shown.stdout)
    assert data["schema_version"] == 1
    assert data["min_windows"] == [10, 0, 19041]
    assert data["artifacts"][0]["sources"][0]["package"] == "onnxruntime-directml"
