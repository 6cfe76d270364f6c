"""Which GPUs a bundle's CUDA code serves (bundler.closure.gpu), from the SASS and PTX lists the
issue
measured with cuobjdump on the real DLLs, and the doctor's data file (bundler.render.doctor_dat)."""

from __future__ import annotations

import hashlib

import pytest

from bundler.binary.fatbin import GpuCode
from bundler.closure.gpu import coverage, parse_target, service, target_findings
from bundler.closure.lock import Lock, LockedFile
from bundler.errors import ConfigError
from bundler.findings import CATALOGUE
from bundler.render.doctor_dat import DOCTOR_CHECKS, doctor_data
from bundler.target.profiles import GpuDriver

SIX = ("sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80")
# onnxruntime_providers_cuda.dll 1.19.2: SASS and PTX for the same six architectures
ORT_1_19_2 = {"onnxruntime_providers_cuda.dll": GpuCode(SIX, SIX, 152)}
# ORT 1.22.0's provider: SASS sm_52 sm_61 sm_75 sm_86 sm_89, PTX sm_90
ORT_1_22_0 = {
    "onnxruntime_providers_cuda.dll": GpuCode(
        ("sm_52", "sm_61", "sm_75", "sm_86", "sm_89"), ("sm_90",), 1
    )
}
# cudnn_cnn64_9.dll 9.1.0.70: SASS up to sm_90, PTX sm_90
CUDNN_CNN = {
    "cudnn_cnn64_9.dll": GpuCode(
        ("sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"), ("sm_90",), 1
    )
}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("sm_86", (8, 6)),
        ("sm_120", (12, 0)),
        ("SM_90", (9, 0)),
        ("sm_100", (10, 0)),
    ],
)
def test_targets_are_read_as_compute_capabilities(target: str, expected: tuple[int, int]) -> None:
    assert parse_target(target) == expected


@pytest.mark.parametrize("target", ["86", "sm_8", "compute_86", "sm_86a", ""])
def test_a_misspelt_target_is_a_config_error(target: str) -> None:
    with pytest.raises(ConfigError, match="sm_XY"):
        parse_target(target)


def test_ort_1_19_2_runs_natively_on_ampere_and_by_jit_on_hopper_and_blackwell() -> None:
    assert service(ORT_1_19_2, (8, 6)).state == "native"  # sm_80 SASS runs on 8.6
    assert service(ORT_1_19_2, (8, 9)).state == "native"
    for newer in ((9, 0), (10, 0), (12, 0)):
        served = service(ORT_1_19_2, newer)
        assert served.state == "jit", newer
        assert served.jit == ("onnxruntime_providers_cuda.dll",)
    assert service(ORT_1_19_2, (3, 5)).state == "none"  # Kepler: older than every PTX


def test_ort_1_22_0_has_nothing_for_a100_or_v100() -> None:
    assert service(ORT_1_22_0, (8, 0)).state == "none"  # sm_86 SASS does not run on 8.0
    assert service(ORT_1_22_0, (7, 0)).state == "none"
    assert service(ORT_1_22_0, (8, 6)).state == "native"
    assert service(ORT_1_22_0, (9, 0)).state == "jit"


def test_findings_for_targets() -> None:
    found = target_findings(["sm_86", "sm_90", "sm_35"], ORT_1_19_2)
    assert [item.code for item in found] == ["BA702", "BA701"]
    jit, missing = found
    assert jit.files == ("onnxruntime_providers_cuda.dll",)
    assert "sm_90" in jit.message and "PTX" in jit.message
    assert "sm_35" in missing.message
    assert any("PTX sm_52 sm_60" in line for line in missing.details)
    (a100,) = target_findings(["sm_80"], ORT_1_22_0)
    assert a100.code == "BA701" and a100.files == ("onnxruntime_providers_cuda.dll",)


def test_coverage_reports_ranges_over_the_known_capabilities() -> None:
    both = {**ORT_1_19_2, **CUDNN_CNN}
    found = coverage(both)
    assert found["native"][:2] == ["5.2", "5.3"]  # provider sm_52 and cuDNN sm_50 run there
    assert "8.9" in found["native"] and "9.0" in found["jit"] and "12.0" in found["jit"]
    assert "5.0" in found["none"]  # the provider's oldest code is sm_52
    assert coverage({}) == {"native": [], "jit": [], "none": []}


# --- the doctor's data file ---------------------------------------------------------------------


def _lock() -> Lock:
    files = (
        LockedFile("onnxruntime.dll", "bundled", "a" * 64, 10, "1.19.2.0", imports=("x.dll",)),
        LockedFile("onnxruntime_providers_cuda.dll", "bundled", "b" * 64, 20, sass=SIX, ptx=SIX),
        LockedFile("licenses/onnxruntime/LICENSE", "license", "c" * 64, 3),
    )
    driver = GpuDriver("nvcuda.dll", 12, "527.41", "release notes")
    return Lock(
        "ort-1.19.2-gpu-cuda12",
        "x64",
        "app-local",
        files,
        gpu_driver=driver,
        ort_version="1.19.2",
        loads=("onnxruntime.dll", "onnxruntime_providers_cuda.dll"),
        doctor=True,
    )


def test_the_data_file_ends_with_the_digest_of_everything_before() -> None:
    text = doctor_data(_lock())
    body, _, last = text.rstrip("\n").rpartition("\n")
    assert last == "end\t" + hashlib.sha256((body + "\n").encode()).hexdigest()
    lines = body.split("\n")
    assert lines[0] == "bundle-doctor-data\t2"
    records = [line.split("\t") for line in lines]
    assert ["ort", "1.19.2"] in records
    assert ["driver", "nvcuda.dll", "12", "527.41"] in records
    assert ["file", "20", "b" * 64, "bundled", "onnxruntime_providers_cuda.dll"] in records
    assert ["file", "3", "c" * 64, "license", "licenses/onnxruntime/LICENSE"] in records
    assert ["version", "onnxruntime.dll", "1.19.2.0"] in records
    assert [r[1] for r in records if r[0] == "load"] == [
        "onnxruntime.dll",
        "onnxruntime_providers_cuda.dll",
    ]
    assert ["imports", "onnxruntime.dll", "x.dll"] in records
    gpu = ["gpu", "onnxruntime_providers_cuda.dll", ",".join(SIX), ",".join(SIX)]
    assert gpu in records
    checks = {r[1]: r for r in records if r[0] == "check"}
    assert set(checks) == set(DOCTOR_CHECKS)
    assert checks["BA801"][2:] == ["error", "no-driver", CATALOGUE["BA801"].title]


def test_a_name_with_a_tab_cannot_be_written() -> None:
    bad = LockedFile("a\tb.dll", "bundled", "d" * 64, 1)
    with pytest.raises(ValueError, match="tab"):
        doctor_data(Lock("p", "x64", "app-local", (bad,)))


def test_cufft_is_not_judged_by_its_one_blob() -> None:
    """cufft64_11.dll's fat binary holds one sm_52 blob; its kernels live in .data
    (manifests/cuda/gpu_code.toml). Judged by the blob, no GPU after Maxwell would run it."""
    code = {**ORT_1_19_2, "cufft64_11.dll": GpuCode(("sm_52",), (), 1)}
    assert service(code, (8, 6)).state == "native"
    assert target_findings(["sm_86"], code) == []
    cufft = LockedFile("cufft64_11.dll", "bundled", "e" * 64, 1, sass=("sm_52",), ptx=())
    text = doctor_data(Lock("p", "x64", "app-local", (cufft,)))
    assert "file\t1\t" + "e" * 64 + "\tbundled\tcufft64_11.dll\n" in text
    assert "\ngpu\t" not in text
