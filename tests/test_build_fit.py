"""A derivation that cannot be silently wrong (issue 18), the unit tier.

What the wheel says about its own build (`onnxruntime/capi/version_info.py`,
docs/field-notes.md#newer-releases: 1.22.0 says CUDA 12.2.128, 1.31.1 says 13.0.88), which component
set fits it, the minimum Windows a system DLL raises, and the one check `profiles new`, `profiles
check` and `bundle build` share: a pin under another version than the DLLs import. Synthetic wheels
and PE images; the real wheels are in tests/test_catalogue.py."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from bundler.binary.pe import read_pe
from bundler.closure.fit import misfits, require_fit
from bundler.closure.resolve import read_inputs, resolve
from bundler.errors import BuildMismatchError
from bundler.rules.derive.build_info import BuildInfo, check_cuda_major, read_build_info
from bundler.rules.derive.facts import Facts, required_windows
from bundler.rules.derive.flavours import available_flavours, load_flavour
from bundler.target.profiles import load_profile
from bundler.target.system import load_system_policy
from tests.support.pefactory import write_pe

VERSION_INFO = "onnxruntime/capi/version_info.py"


def wheel(path: Path, text: str | None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("onnxruntime/capi/onnxruntime.dll", b"MZ")
        if text is not None:
            archive.writestr(VERSION_INFO, text)
    return path


# --- what the wheel says ---------------------------------------------------------------------


def test_version_info_is_read_not_run(tmp_path: Path) -> None:
    text = (
        'use_cuda = True\ncuda_version = "13.0.88"\ncudnn_version = "9"\nvs2019 = False\n'
        'import os\nos.system("touch PWNED")\ncuda_version_twice = cuda_version\n'
    )
    build = read_build_info(wheel(tmp_path / "ort.whl", text))
    assert (build.cuda_version, build.cudnn_version) == ("13.0.88", "9")
    assert build.cuda_major == 13 and build.cuda_minor == (13, 0)
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_a_wheel_without_version_info_states_no_cuda(tmp_path: Path) -> None:
    build = read_build_info(wheel(tmp_path / "cpu.whl", None))
    assert build.cuda_major is None and build.cuda_minor is None
    check_cuda_major(build, "gpu-cuda12", 12)  # nothing to contradict


def test_a_flavour_of_another_cuda_major_is_refused_naming_both() -> None:
    build = BuildInfo("onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64.whl", "13.0.88", "9")
    with pytest.raises(BuildMismatchError) as caught:
        check_cuda_major(build, "gpu-cuda12", 12)
    message = caught.value.message
    assert "CUDA 13.0.88" in message and "gpu-cuda12 is for CUDA 12" in message
    assert "--flavour gpu-cuda13" in message and "\n" not in message
    assert caught.value.exit_code == 21
    check_cuda_major(build, "gpu-cuda13", 13)


# --- which component set ---------------------------------------------------------------------


def test_the_shipped_flavours_and_their_cuda_releases() -> None:
    assert set(available_flavours()) == {
        "gpu-cuda12",
        "gpu-cuda13",
        "cpu",
        "directml",
        "windowsml-directml",
    }
    cu13 = load_flavour("gpu-cuda13")
    assert cu13.gpu_driver is not None and cu13.gpu_driver.cuda_major == 13
    assert cu13.gpu_driver.min_version == "580.88"
    packages = {p.package: p.version for p in cu13.components(None).packages}
    assert packages["nvidia-cuda-runtime"] == "13.0.88"  # CUDA 13.0 Update 1's cudart
    assert packages["nvidia-cudnn-cu13"].startswith("9.")
    for name in ("gpu-cuda12", "gpu-cuda13"):
        for item in load_flavour(name).component_sets:
            assert item.cuda.split(".")[0] == name.removeprefix("gpu-cuda")


def test_windowsml_versions_carry_a_build_stamp_and_directml_is_frozen() -> None:
    """onnxruntime-windowsml 1.30.0.202609102321 is ORT 1.30.0 (docs/catalogue.md); the
    community DirectML package stopped at 1.24.4 (microsoft/DirectML#712)."""
    windowsml = load_flavour("windowsml-directml")
    assert windowsml.build_stamped and windowsml.ort.package == "onnxruntime-windowsml"
    assert windowsml.release("1.30.0.202609102321") == "1.30.0"
    assert load_flavour("cpu").release("1.30.0") == "1.30.0"
    frozen = load_flavour("directml").frozen
    assert frozen is not None and (frozen.last, frozen.successor) == ("1.24.4", windowsml.name)
    assert windowsml.frozen is None and load_flavour("cpu").frozen is None


@pytest.mark.parametrize(
    ("flavour", "cuda", "chosen"),
    [
        ("gpu-cuda12", "12.2.128", "cuda-12.4.1"),  # 1.19.2 ... 1.22.0
        ("gpu-cuda12", "12.4.131", "cuda-12.4.1"),  # the same minor fits
        ("gpu-cuda13", "13.0.88", "cuda-13.0.1"),  # 1.31.1
    ],
)
def test_the_set_that_fits_the_build_is_chosen(flavour: str, cuda: str, chosen: str) -> None:
    components, why = load_flavour(flavour).choose_components(BuildInfo("w.whl", cuda), None)
    assert components.name == chosen
    assert f"build's CUDA {cuda}" in why and "w.whl: onnxruntime/capi/version_info.py" in why


def test_no_set_of_an_older_minor_is_chosen() -> None:
    """A build made with CUDA 12.9 needs a 12.9 runtime or newer: 12.4's is refused."""
    flavour = load_flavour("gpu-cuda12")
    too_new = BuildInfo("w.whl", "12.99.1")
    with pytest.raises(BuildMismatchError, match=r"no component set .* CUDA 12\.99"):
        flavour.choose_components(too_new, None)
    with pytest.raises(BuildMismatchError, match=r"older than the build's 12\.99"):
        flavour.choose_components(too_new, flavour.default_components)
    with pytest.raises(BuildMismatchError, match="another major"):
        flavour.choose_components(BuildInfo("w.whl", "13.0.88"), "cuda-12.4.1")
    with pytest.raises(BuildMismatchError, match="is not cuDNN 8, the build's"):
        flavour.choose_components(BuildInfo("w.whl", "12.2.128", "8"), "cuda-12.4.1")


# --- the minimum Windows ---------------------------------------------------------------------


def test_a_static_import_of_dxcore_raises_the_minimum_windows(tmp_path: Path) -> None:
    """ORT 1.22.0's onnxruntime.dll imports dxcore.dll (docs/field-notes.md#newer-releases), which
    Windows has from 10.0.19041 on (system.toml, Microsoft Learn's DXCore requirements)."""
    ort = read_pe(write_pe(tmp_path / "onnxruntime.dll", imports=("dxcore.dll", "dxgi.dll")))
    facts = Facts((), (), ("onnxruntime.dll",), (), (), {"onnxruntime.dll": "onnxruntime"}, None)
    policy = load_system_policy()
    windows = required_windows(facts, {"onnxruntime.dll": ort}, policy, (10, 0, 10240))
    assert windows.text == "10.0.19041"
    assert "onnxruntime.dll imports dxcore.dll" in windows.why
    plain = read_pe(write_pe(tmp_path / "plain.dll", imports=("dxgi.dll", "KERNEL32.dll")))
    kept = required_windows(facts, {"onnxruntime.dll": plain}, policy, (10, 0, 10240))
    assert kept.text == "10.0.10240" and kept.why == ""


# --- pins of another version than the DLLs import --------------------------------------------


def cuda13_folder(folder: Path) -> Path:
    """hello.exe -> onnxruntime.dll; a CUDA provider that imports cuBLAS 13, beside the CUDA 12
    cuBLAS a 1.19.2 profile pins."""
    folder.mkdir()
    write_pe(folder / "hello.exe", dll=False, imports=("onnxruntime.dll",))
    write_pe(folder / "onnxruntime.dll")
    write_pe(folder / "onnxruntime_providers_shared.dll")
    write_pe(
        folder / "onnxruntime_providers_cuda.dll",
        imports=("cublas64_13.dll", "cublasLt64_13.dll", "onnxruntime_providers_shared.dll"),
    )
    write_pe(folder / "cublas64_12.dll", imports=("cublasLt64_12.dll",))
    write_pe(folder / "cublasLt64_12.dll")
    return folder


def test_a_pin_of_another_version_is_named_with_the_import_that_proves_it(
    tmp_path: Path,
) -> None:
    folder = cuda13_folder(tmp_path / "app")
    profile = load_profile("ort-1.19.2-gpu-cuda12")
    apps = read_inputs([folder / "hello.exe"], profile, [])
    plan = resolve(apps, profile, load_system_policy(), [folder])
    wrong = {item.name: item for item in misfits(plan, profile) if item.pinned_instead}
    assert wrong["cublas64_13.dll"].pinned_instead == "cublas64_12.dll"
    assert wrong["cublas64_13.dll"].importers == ("onnxruntime_providers_cuda.dll",)
    assert wrong["cublasLt64_13.dll"].pinned_instead == "cublasLt64_12.dll"
    assert "cudart64_12.dll" not in wrong  # missing, but no other version of it is pinned here
    with pytest.raises(BuildMismatchError) as caught:
        require_fit(plan, profile)
    assert (
        "onnxruntime_providers_cuda.dll imports cublas64_13.dll, but the profile pins "
        "cublas64_12.dll (artifact cublas)"
    ) in caught.value.message
