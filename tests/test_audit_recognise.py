"""Issue 40, parts 3 and 4: what a folder's ORT is, and which profile its audit uses.

- Without a lock or --profile, `bundle audit` reads the folder's ORT (onnxruntime.dll's version
  resource, the providers and DirectML.dll beside it), picks the matching shipped profile and
  says so; no profile fits: the import closure alone, with a note naming the missing profile.
- A folder whose onnxruntime.dll is another release than the profile's, or whose provider
  comes from another release than its core, is a finding (BA207).
- The CUDA provider's two modes (plugin-capable from its exports, the default mode from the
  "ORT Build Info:" string): measured on the real 1.19.2 and 1.31.1 DLLs (realdata).

Synthetic folders are pefactory images with the file versions the real DLLs carry (1.31.1's
onnxruntime.dll says 1.31.1.1023, 1.24.4's says 1.24.26.316: the build date where the patch
belongs, docs/auditing.md); the real ones are hard links into the test cache's extracted wheels.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pefile
import pytest

from bundler.audit.judge import audit
from bundler.audit.recognise import CLOSURE_ONLY
from bundler.binary.ort_build import build_info, cuda_ep, default_mode, ort_release
from bundler.target.profile_names import release_of
from bundler.target.profiles import CudaEp, available_profiles, load_profile
from tests.support.audits import audit_cli, found
from tests.support.locks import lock_for
from tests.support.paths import GPU, test_cache_dir
from tests.support.pefactory import write_pe
from tests.support.runs import run_bundle
from tests.support.skips import require

ORT_1311 = (1, 31, 1, 1023)  # onnxruntime.dll of onnxruntime-gpu 1.31.1 (its FileVersion)
ORT_1244 = (1, 24, 26, 316)  # onnxruntime.dll of onnxruntime 1.24.4: 2026-03-16 for the patch
VC = ("MSVCP140.dll", "VCRUNTIME140.dll", "KERNEL32.dll")
DML_DELAYED = ("DirectML.dll", "d3d12.dll", "dxgi.dll")
GPU_WORDS = ("cuda", "cudnn", "cublas", "nvrtc", "nvcuda", "cufft")


def directml_folder(folder: Path, version: tuple[int, int, int, int] = ORT_1311) -> Path:
    """A DirectML-enabled ORT as the field's win-x64 folders hold it: onnxruntime.dll that
    delay-loads DirectML with d3d12 and dxgi, DirectML.dll 1.15.4 beside it, no VC++ runtime."""
    write_pe(
        folder / "onnxruntime.dll", imports=VC, delay_imports=DML_DELAYED, file_version=version
    )
    write_pe(folder / "DirectML.dll", imports=("KERNEL32.dll",), file_version=(1, 15, 4, 0))
    return folder


# --- the release in the version resource ---------------------------------------------------------


def test_the_version_resource_names_the_patch_from_1_30_and_the_minor_before() -> None:
    assert ort_release(ORT_1311).text == "1.31.1"  # type: ignore[union-attr]
    older = ort_release(ORT_1244)
    assert older is not None and older.text == "1.24" and older.matches("1.24.4")
    assert not older.matches("1.23.2")
    assert ort_release(None) is None


# --- part 4: the profile a folder names ------------------------------------------------------


def test_a_directml_ort_without_a_profile_gets_its_import_closure_and_a_note(
    tmp_path: Path,
) -> None:
    folder = directml_folder(tmp_path / "win-x64")
    junit = tmp_path / "audit.xml"
    data, code = audit_cli(str(folder), "--junit", str(junit))
    assert code == 17  # the VC++ runtime is missing: the true findings
    assert data["profile"] == CLOSURE_ONLY
    assert data["profile_origin"] == {
        "origin": "none",
        "detail": "none: no shipped profile fits onnxruntime.dll 1.31.1 (its version resource), "
        "a directml build (ort-1.31.1-directml)",
        "missing": "ort-1.31.1-directml",
    }
    (note,) = data["notes"]  # type: ignore[misc]
    assert "bundle profiles new --ort 1.31.1 --flavour directml" in note
    by_code = found(data)
    assert set(by_code) == {"BA101", "BA305"}  # BA305: a System32 onnxruntime.dll (info)
    assert sorted(f["files"][0] for f in by_code["BA101"]) == ["MSVCP140.dll", "VCRUNTIME140.dll"]
    text = str(data["findings"]).lower()
    assert not any(word in text for word in GPU_WORDS), text
    assert "1.19" not in str(data["findings"])  # no other release's files
    properties = {item.get("name"): item.get("value") for item in ET.parse(junit).iter("property")}
    assert properties["profile_origin"] == "none"
    assert properties["profile_missing"] == "ort-1.31.1-directml"


def test_the_table_says_which_profile_was_inferred_and_from_what(tmp_path: Path) -> None:
    write_pe(tmp_path / "onnxruntime.dll", imports=VC, file_version=ORT_1244)
    result = run_bundle("audit", str(tmp_path))
    assert result.returncode == 17, result.stderr  # no VC++ runtime beside it
    assert f"Audit of {tmp_path} for ort-1.24.4-cpu " in result.stdout
    assert (
        "  profile inferred from onnxruntime.dll 1.24 (its version resource), with no execution "
        "provider DLL beside it\n" in result.stdout
    )


def test_a_directml_ort_of_a_release_with_a_profile_gets_that_profile(tmp_path: Path) -> None:
    report = audit(directml_folder(tmp_path, ORT_1244))
    assert report.profile.name == "ort-1.24.4-directml"
    assert report.choice is not None and report.choice.origin == "inferred"
    assert report.choice.detail.endswith("and DirectML.dll")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("other.dll", "no onnxruntime.dll in the folder"),
        ("onnxruntime.dll", "onnxruntime.dll has no version resource"),
    ],
)
def test_without_a_readable_release_the_default_stays_with_a_note(
    tmp_path: Path, name: str, why: str
) -> None:
    write_pe(tmp_path / name, imports=VC)  # no file_version: no version resource
    report = audit(tmp_path)
    assert report.profile.name == GPU and report.choice is not None
    assert report.choice.origin == "default"
    assert report.choice.notes == (
        f"{why}: audited against the default profile {GPU}; name the folder's profile with "
        "--profile",
    )


def test_a_named_profile_of_another_release_is_a_finding(tmp_path: Path) -> None:
    write_pe(tmp_path / "onnxruntime.dll", imports=VC, file_version=ORT_1311)
    data, code = audit_cli(str(tmp_path), "--profile", "ort-1.24.4-cpu")
    assert code == 17
    assert data["profile_origin"]["origin"] == "flag"  # type: ignore[index]
    (mismatch,) = found(data)["BA207"]
    assert mismatch["files"] == ["onnxruntime.dll"]
    assert "onnxruntime.dll is ORT 1.31.1, the profile ort-1.24.4-cpu is ORT 1.24.4" in str(
        mismatch["message"]
    )
    same, _ = audit_cli(str(tmp_path), "--profile", "ort-1.31.1-cpu")
    assert "BA207" not in found(same)


def test_a_lock_of_another_release_than_the_folders_ort_is_a_finding(tmp_path: Path) -> None:
    """An onnxruntime.dll swapped for another release after the build: the lock's profile
    stays the audit's (no inference over a lock), and the release it pins is not the DLL's."""
    write_pe(tmp_path / "onnxruntime.dll", imports=VC, file_version=ORT_1244)
    lock_for(tmp_path, "ort-1.31.1-cpu")
    report = audit(tmp_path)
    assert report.profile.name == "ort-1.31.1-cpu" and report.choice is not None
    assert report.choice.origin == "lock"
    mismatch = [item for item in report.findings if item.code == "BA207"]
    assert [item.message for item in mismatch] == [
        "onnxruntime.dll is ORT 1.24, the profile ort-1.31.1-cpu is ORT 1.31.1: the profile's "
        "run-time rules and pins are not this folder's"
    ]


def test_a_provider_of_another_release_than_its_core_is_a_finding(tmp_path: Path) -> None:
    write_pe(tmp_path / "onnxruntime.dll", imports=VC, file_version=ORT_1311)
    write_pe(tmp_path / "onnxruntime_providers_shared.dll", file_version=ORT_1311)
    write_pe(tmp_path / "onnxruntime_providers_cuda.dll", file_version=(1, 30, 0, 909))
    report = audit(tmp_path, "ort-1.31.1-gpu-cuda13")
    mismatch = [item for item in report.findings if item.code == "BA207"]
    assert [item.files for item in mismatch] == [("onnxruntime_providers_cuda.dll",)]
    assert "onnxruntime_providers_cuda.dll is ORT 1.30.0, onnxruntime.dll is 1.31.1:" in (
        mismatch[0].message
    )


# --- part 3: the CUDA provider's modes ------------------------------------------------------


def test_the_build_info_flag_decides_the_default_mode(tmp_path: Path) -> None:
    assert default_mode(None) is None
    assert default_mode("git-branch=HEAD, fp8-kv-cache=1, build type=Release") == "legacy"
    assert default_mode("git-branch=HEAD, cuda-plugin-ep=1, build type=Release") == "plugin"
    front = write_pe(tmp_path / "onnxruntime.dll")
    assert build_info(front) is None
    with front.open("ab") as handle:  # the string lies in .rdata; an overlay reads the same
        handle.write(b"\0ORT Build Info: git-branch=HEAD, cuda-plugin-ep=1, build type=Release\0")
    assert build_info(front) == "git-branch=HEAD, cuda-plugin-ep=1, build type=Release"
    provider = write_pe(tmp_path / "onnxruntime_providers_cuda.dll")  # exports nothing
    assert cuda_ep(front, provider) == CudaEp(False, "plugin")


def test_every_profile_with_a_cuda_provider_records_its_modes() -> None:
    """Measured on each GPU profile's pinned wheel; plugin-capable from 1.22.0 on."""
    for name in available_profiles():
        profile = load_profile(name)
        cuda = any(
            "onnxruntime_providers_cuda.dll" in artifact.provides for artifact in profile.artifacts
        )
        assert (profile.cuda_ep is not None) is cuda, name
        if profile.cuda_ep is not None:
            release = tuple(int(part) for part in release_of(name).split("."))
            assert profile.cuda_ep == CudaEp(release >= (1, 22), "legacy"), name


def _capi(release: str) -> Path:
    stem = test_cache_dir() / "extracted" / f"onnxruntime_gpu-{release}-cp311-cp311-win_amd64"
    require(
        (stem / ".complete").is_file(),
        f"onnxruntime-gpu {release} not in {stem.parent}: run python -m "
        "tools.testing.fetch_test_wheels",
    )
    return stem / "onnxruntime" / "capi"


def _exports(path: Path) -> list[str]:
    image = pefile.PE(str(path), fast_load=True)
    image.parse_data_directories(
        directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]]
    )
    names = [item.name.decode() for item in image.DIRECTORY_ENTRY_EXPORT.symbols if item.name]
    image.close()
    return names


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("release", "profile", "expected"),
    [
        ("1.31.1", "ort-1.31.1-gpu-cuda13", CudaEp(True, "legacy")),
        ("1.19.2", "ort-1.19.2-gpu-cuda12", CudaEp(False, "legacy")),
    ],
)
def test_the_real_cuda_provider_and_its_profile_say_plugin_capable_and_legacy_by_default(
    release: str, profile: str, expected: CudaEp
) -> None:
    capi = _capi(release)
    provider, front = capi / "onnxruntime_providers_cuda.dll", capi / "onnxruntime.dll"
    # the raw facts, read without bundle's reader: pefile's export table, the DLL's bytes
    assert ("CreateEpFactories" in _exports(provider)) is expected.plugin_capable
    assert "GetProvider" in _exports(provider)
    data = front.read_bytes()
    assert b"ORT Build Info: git-branch=" in data and b"cuda-plugin-ep=" not in data
    assert cuda_ep(front, provider) == expected
    assert load_profile(profile).cuda_ep == expected
    assert expected.describe() == (
        "plugin-capable, legacy by default"
        if expected.plugin_capable
        else "legacy only, legacy by default"
    )


@pytest.mark.realdata
def test_the_real_1_31_1_capi_folder_is_recognised_and_its_cuda_13_stack_missing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "capi"
    folder.mkdir()
    for path in _capi("1.31.1").glob("*.dll"):
        os.link(path, folder / path.name)
    junit = tmp_path / "audit.xml"
    data, code = audit_cli(str(folder), "--junit", str(junit))
    assert code == 17
    assert data["profile"] == "ort-1.31.1-gpu-cuda13"
    assert data["profile_origin"] == {
        "origin": "inferred",
        "detail": "inferred from onnxruntime.dll 1.31.1 (its version resource) and "
        "onnxruntime_providers_cuda.dll",
        "missing": None,
    }
    missing = {f["files"][0].lower() for code in ("BA101", "BA102") for f in found(data)[code]}
    cuda_13 = {"cudart64_13.dll", "cublas64_13.dll", "cublaslt64_13.dll", "cufft64_12.dll"}
    cuda_13 |= {"nvrtc64_130_0.dll", "cudnn64_9.dll", "cudnn_graph64_9.dll"}
    assert cuda_13 <= missing, sorted(missing)
    assert "BA207" not in found(data)
    properties = {item.get("name"): item.get("value") for item in ET.parse(junit).iter("property")}
    assert properties["profile"] == "ort-1.31.1-gpu-cuda13"
    assert properties["profile_origin"] == "inferred"


def test_profiles_show_says_what_the_cuda_provider_is() -> None:
    shown = run_bundle("profiles", "show", "ort-1.31.1-gpu-cuda13")
    assert shown.returncode == 0, shown.stderr
    assert "\n  CUDA EP:      plugin-capable, legacy by default\n" in shown.stdout
    cpu = run_bundle("profiles", "show", "ort-1.31.1-cpu")
    assert "CUDA EP:" not in cpu.stdout
