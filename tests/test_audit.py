"""`bundle audit`: a shipped folder judged as the customer's machine will see it.

Two tiers. Synthetic bundles (pefactory images named and wired like the real GPU set,
docs/field-notes.md#import-graph) pin each cheap check down on its own. Real data: the folders
`bundle build --link` makes for examples/hello audit clean, and each field failure is made from
a hard-linked copy of the built GPU folder by deleting or replacing real DLLs; a file that gets
patched is always a copy first, never a hard link into the session's cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pefile
import pytest

from bundler.audit.checks import CHECKS
from bundler.audit.judge import audit
from bundler.audit.loadproof import FINDING_CODES
from bundler.binary.signatures import FINDING_CODES as SIGNATURE_CODES
from bundler.closure.lock import LOCK_NAME
from bundler.disk.digest import file_sha256
from bundler.findings import CATALOGUE, DOCTOR_CODES, Severity
from bundler.target.profiles import versioned
from tests.support.audits import audit_cli, codes, found
from tests.support.builds import broken_copy, build, patched_copy
from tests.support.locks import lock_for
from tests.support.paths import CPU, DIRECTML, GPU, HELLO, REPO
from tests.support.pefactory import PESpec, write_pe
from tests.support.runs import fetch, pip_env, run_bundle
from tests.support.synthetic_gpu import PROVIDER, synthetic_gpu
from tools.docs.findings_page import catalogue_markdown

# --- the catalogue --------------------------------------------------------------------------------


def test_every_catalogue_code_has_one_check_and_the_readme_documents_it() -> None:
    # BA5xx come from the load proof (--run), BA6xx from --signatures, BA8xx from
    # bundle-doctor.exe on the target: no check of their own
    codes = [*CHECKS, *FINDING_CODES, *SIGNATURE_CODES, *DOCTOR_CODES]
    assert sorted(codes) == list(CATALOGUE) and len(set(codes)) == len(codes)
    assert catalogue_markdown() in (REPO / "docs" / "auditing.md").read_text(encoding="utf-8")


def test_versioned_names_give_family_and_version() -> None:
    assert versioned("cudart64_110.dll") == ("cudart", "110")
    assert versioned("cudnn_ops_infer64_8.dll") == ("cudnn", "8")
    assert versioned("cublasLt64_12.dll") == ("cublaslt", "12")
    assert versioned("nvrtc64_120_0.dll") == ("nvrtc", "120")
    assert versioned("nvrtc-builtins64_124.dll") == ("nvrtc-builtins", "124")
    assert versioned("onnxruntime_providers_cuda.dll") is None
    assert versioned("vcruntime140_1.dll") is None


# --- synthetic bundles: one check at a time -------------------------------------------------


def test_complete_synthetic_bundle_has_only_the_shadowing_note(tmp_path: Path) -> None:
    report = audit(synthetic_gpu(tmp_path), GPU)
    assert [(f.code, f.files) for f in report.findings] == [("BA305", ("onnxruntime.dll",))]
    assert report.exit_code() == 0 and report.exit_code(strict=True) == 0


@pytest.mark.posix_only(
    reason="needs a folder holding two names that differ only by case: Windows' file system "
    "(and Wine's Z:) opens the existing file for the second name"
)
def test_two_names_differing_by_case(tmp_path: Path) -> None:
    synthetic_gpu(tmp_path)
    write_pe(tmp_path / "CUDART64_12.DLL")
    report = audit(tmp_path, GPU)
    clash = [f for f in report.findings if f.code == "BA304"]
    assert [f.files for f in clash] == [("CUDART64_12.DLL", "cudart64_12.dll")]
    assert report.exit_code() == 17


def test_debug_crt_import(tmp_path: Path) -> None:
    app = PESpec(dll=False, imports=("onnxruntime.dll", "VCRUNTIME140D.dll", "ucrtbased.dll"))
    report = audit(synthetic_gpu(tmp_path, **{"hello.exe": app}), GPU)
    debug = [f for f in report.findings if f.code == "BA204"]
    assert len(debug) == 1 and debug[0].files == ("hello.exe",)
    assert "imports ucrtbased.dll, VCRUNTIME140D.dll" in debug[0].message
    assert debug[0].fix == "rebuild hello.exe in Release (/MD, not /MDd)"


def test_app_local_api_set_ucrt_and_known_dll_copies(tmp_path: Path) -> None:
    copies = ("api-ms-win-crt-runtime-l1-1-0.dll", "ucrtbase.dll", "kernel32.dll")
    synthetic_gpu(tmp_path, **{name: PESpec() for name in copies})
    report = audit(tmp_path, GPU)
    assert sorted(f.files[0] for f in report.findings if f.code == "BA302") == sorted(copies)
    assert not [f for f in report.findings if f.code == "BA303"]  # explained once, not twice
    assert report.exit_code() == 0 and report.exit_code(strict=True) == 18


def test_unreferenced_tensorrt_provider_is_a_warning(tmp_path: Path) -> None:
    trt = PESpec(imports=("nvinfer_10.dll", "cudnn64_9.dll"))
    synthetic_gpu(tmp_path, **{"onnxruntime_providers_tensorrt.dll": trt})
    data, code = audit_cli(str(tmp_path), "--profile", GPU)
    assert code == 0
    assert [f["files"] for f in found(data)["BA303"]] == [["onnxruntime_providers_tensorrt.dll"]]
    assert data["summary"] == {"error": 0, "warning": 1, "info": 1, "files": 23}
    _, strict = audit_cli(str(tmp_path), "--profile", GPU, "--strict")
    assert strict == 18


def test_cuda_and_cudnn_of_other_majors_beside_the_provider(tmp_path: Path) -> None:
    synthetic_gpu(
        tmp_path,
        without=("cudart64_12.dll", "cudnn64_9.dll"),
        **{"cudart64_110.dll": PESpec(), "cudnn64_8.dll": PESpec()},
    )
    report = audit(tmp_path, GPU)
    mismatch = {f.files: f for f in report.findings if f.code == "BA201"}
    assert set(mismatch) == {("cudart64_110.dll",), ("cudnn64_8.dll",)}
    assert mismatch[("cudart64_110.dll",)].fix == (
        "replace cudart64_110.dll with cudart64_12.dll (the profile's pinned CUDA/cuDNN artifacts)"
    )
    provider = next(f for f in report.findings if f.code == "BA103")
    assert "missing cudnn64_9.dll ← onnxruntime_providers_cuda.dll" in provider.message
    assert "cudart64_12.dll ← onnxruntime_providers_cuda.dll" in provider.message


def test_a_missing_trigger_still_needs_what_it_loads_at_run_time(tmp_path: Path) -> None:
    """cudnn64_9.dll is gone: its sub-libraries are still needed (not "unreferenced"), and a
    missing one of them is still reported, as one only the runtime rules can see."""
    synthetic_gpu(tmp_path, without=("cudnn64_9.dll", "cudnn_graph64_9.dll"))
    report = audit(tmp_path, GPU)
    by_code = {(f.code, f.files[0]) for f in report.findings}
    assert ("BA101", "cudnn64_9.dll") in by_code
    assert ("BA102", "cudnn_graph64_9.dll") in by_code
    assert not [f for f in report.findings if f.code == "BA303"]


def test_providers_shared_missing(tmp_path: Path) -> None:
    report = audit(synthetic_gpu(tmp_path, without=("onnxruntime_providers_shared.dll",)), GPU)
    assert {"BA104", "BA101", "BA103"} <= {f.code for f in report.findings}


def test_vc_runtime_older_than_the_newest_linker(tmp_path: Path) -> None:
    old = PESpec(file_version=(14, 29, 30133, 0), linker_version=(14, 29))
    report = audit(synthetic_gpu(tmp_path, **{"vcruntime140.dll": old}), GPU)
    too_old = [f for f in report.findings if f.code == "BA202"]
    assert [f.files for f in too_old] == [("vcruntime140.dll",)]
    assert "older than onnxruntime.dll's MSVC linker 14.40" in too_old[0].message
    assert "ship a VC++ runtime >= 14.40" in too_old[0].fix


def test_unreadable_and_truncated_files_are_reported_by_name(tmp_path: Path) -> None:
    synthetic_gpu(tmp_path)
    (tmp_path / "junk.dll").write_bytes(b"MZ but nothing else")
    whole = (tmp_path / "cufft64_11.dll").read_bytes()
    (tmp_path / "cufft64_11.dll").write_bytes(whole[: len(whole) // 2])
    report = audit(tmp_path, GPU)
    unreadable = {f.files[0]: f.message for f in report.findings if f.code == "BA001"}
    assert set(unreadable) == {"junk.dll", "cufft64_11.dll"}
    assert "truncated PE file" in unreadable["cufft64_11.dll"]
    assert "cufft64_11.dll" in {f.files[0] for f in report.findings if f.code == "BA101"}


def test_a_32_bit_exe_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    synthetic_gpu(tmp_path)
    write_pe(tmp_path / "tool.exe", machine="x86", dll=False)
    report = audit(tmp_path, GPU)
    assert [f.files for f in report.findings if f.code == "BA205"] == [("tool.exe",)]


def test_installer_mode_lock_expects_no_vc_runtime_in_the_folder(tmp_path: Path) -> None:
    vc = ("msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll")
    synthetic_gpu(tmp_path, without=vc)
    lock_for(tmp_path, vc_runtime="installer")
    assert codes(tmp_path) == ["BA305"]
    (tmp_path / LOCK_NAME).unlink()
    assert "BA105" in codes(tmp_path)  # without the lock: app-local, as the profile says


def test_lock_file_checks_hashes_removals_and_additions(tmp_path: Path) -> None:
    lock = lock_for(synthetic_gpu(tmp_path))
    data, code = audit_cli(str(lock))
    assert code == 0 and data["lock"] == str(lock)
    (tmp_path / "cufft64_11.dll").unlink()
    write_pe(tmp_path / "extra.dll")
    blob = bytearray((tmp_path / "cudart64_12.dll").read_bytes())
    blob[-1] ^= 0xFF
    (tmp_path / "cudart64_12.dll").write_bytes(bytes(blob))
    data, code = audit_cli(str(lock))
    by_code = found(data)
    assert code == 17
    assert [f["files"] for f in by_code["BA401"]] == [["cudart64_12.dll"]]
    assert [f["files"] for f in by_code["BA402"]] == [["cufft64_11.dll"]]
    assert [f["files"] for f in by_code["BA403"]] == [["extra.dll"]]
    # The folder alone (PATH is not the lock file) hashes nothing: the flipped byte passes.
    folder_only, _ = audit_cli(str(tmp_path))
    assert "BA401" not in found(folder_only)


def test_json_document_follows_the_schema(tmp_path: Path) -> None:
    data, code = audit_cli(str(synthetic_gpu(tmp_path, without=("cudnn64_9.dll",))))
    assert code == 17
    assert data["schema_version"] == 1
    assert data["profile"] == GPU and data["lock"] is None
    assert set(data) == {
        "schema_version",
        "tool_version",
        "folder",
        "lock",
        "profile",
        "profile_origin",  # where the profile came from (issue 40): here its ORT, 1.19
        "notes",
        "summary",
        "findings",
        "suppressed",
        "archive",
        "load_proof",
        "signatures_checked",
        "hashes_verified",
        "restore",
        "gpu",
        "eps",
        "packs",  # the name before "eps", the same list
        "plan",
    }
    assert data["eps"] == data["packs"] == []  # no lock, no EP packs
    assert data["profile_origin"]["origin"] == "inferred"  # type: ignore[index]
    provider = found(data)["BA103"][0]
    assert set(provider) == {
        "code",
        "name",
        "severity",
        "title",
        "files",
        "message",
        "fix",
        "details",
        "inferred_from",
    }
    assert provider["severity"] == "error" and provider["name"] == "provider-fails-126"
    missing = found(data)["BA101"][0]
    chain = (
        "hello.exe -import-> onnxruntime.dll -runtime-> onnxruntime_providers_cuda.dll "
        "-import-> cudnn64_9.dll"
    )
    assert chain in missing["details"]  # type: ignore[operator]
    plan = data["plan"]
    assert isinstance(plan, dict)
    assert plan["missing"] == ["cudnn64_9.dll"] and plan["driver"] == ["nvcuda.dll"]
    assert plan["statuses"]["missing"] == 1


def test_table_groups_by_severity_and_says_the_fix(tmp_path: Path) -> None:
    synthetic_gpu(tmp_path, without=("cudnn_graph64_9.dll",), **{"nvcuda.dll": PESpec()})
    result = run_bundle("audit", str(tmp_path))
    assert result.returncode == 17, result.stderr
    text = result.stdout
    assert text.index("ERROR (2)") < text.index("INFO (1)")
    assert "  BA102  cudnn_graph64_9.dll is missing" in text
    assert "  BA301  nvcuda.dll belongs to the GPU driver" in text
    assert "fix: remove nvcuda.dll from the folder" in text
    tail = text.rstrip().splitlines()[-4:]
    assert tail[0] == "3 finding(s): 2 errors, 0 warnings, 1 info"
    assert (
        tail[1] == ""
        and tail[2].startswith("RESTORE (1 file(s)")
        and tail[3].startswith("  cudnn_graph64_9.dll")
    )


@pytest.mark.parametrize(
    ("target", "code", "expected"),
    [
        ("app.zip", 10, "it cannot be audited"),
        ("absent", 4, "does not exist"),
    ],
)
def test_refused_paths(tmp_path: Path, target: str, code: int, expected: str) -> None:
    (tmp_path / "app.zip").write_bytes(b"PK")
    result = run_bundle("audit", str(tmp_path / target))
    assert result.returncode == code
    assert expected in result.stderr


def test_severity_order_in_the_report(tmp_path: Path) -> None:
    synthetic_gpu(tmp_path, without=("vcruntime140_1.dll",), **{"stray.dll": PESpec()})
    severities = [f.severity for f in audit(tmp_path, GPU).findings]
    assert severities == sorted(severities, key=list(Severity).index)


# --- real data: the folders bundle build makes, and field failures made from them -----------


@pytest.fixture(scope="module")
def cpu_bundle(cpu_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("audit-cpu")
    args = ["--profile", CPU, "--out", str(out), "--cache-dir", str(cpu_cache), "--link"]
    result = build(str(HELLO), *args)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def directml_bundle(real_dlls: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("fetch-dml") / "cache"
    fetched = fetch("--profile", DIRECTML, "--cache-dir", str(cache), env=pip_env())
    assert fetched.returncode == 0, fetched.stderr
    out = tmp_path_factory.mktemp("audit-dml")
    args = ["--profile", DIRECTML, "--out", str(out), "--cache-dir", str(cache), "--link"]
    result = build(str(HELLO), *args)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.realdata
@pytest.mark.parametrize("via_lock", [False, True])
def test_built_gpu_bundle_audits_clean(gpu_bundle: Path, via_lock: bool) -> None:
    path = gpu_bundle / LOCK_NAME if via_lock else gpu_bundle
    data, code = audit_cli(str(path), "--strict")
    assert code == 0, data["findings"]
    assert [(f["code"], f["files"]) for f in data["findings"]] == [  # type: ignore[union-attr]
        ("BA305", ["onnxruntime.dll"])
    ]
    assert data["profile"] == GPU  # from the lock file: no --profile given
    # 21 bundled DLLs, hello.exe and bundle-doctor.exe
    assert data["summary"] == {"error": 0, "warning": 0, "info": 1, "files": 23}
    plan = data["plan"]
    assert isinstance(plan, dict)
    assert plan["statuses"]["bundled"] == 21 and plan["driver"] == ["nvcuda.dll"]


@pytest.mark.realdata
def test_built_cpu_bundle_audits_clean(cpu_bundle: Path) -> None:
    data, code = audit_cli(str(cpu_bundle / LOCK_NAME), "--strict")
    assert code == 0, data["findings"]
    assert data["profile"] == CPU
    assert data["summary"] == {"error": 0, "warning": 0, "info": 1, "files": 8}  # the doctor too


@pytest.mark.realdata
def test_built_directml_bundle_audits_clean(directml_bundle: Path) -> None:
    data, code = audit_cli(str(directml_bundle / LOCK_NAME), "--strict")
    assert code == 0, data["findings"]
    assert data["profile"] == DIRECTML
    shadowed = sorted(f["files"][0] for f in found(data)["BA305"])  # type: ignore[index]
    assert shadowed == ["DirectML.dll", "onnxruntime.dll"]


@pytest.mark.realdata
def test_no_vcruntime140_1(gpu_bundle: Path, tmp_path: Path) -> None:
    data, code = audit_cli(str(broken_copy(gpu_bundle, tmp_path / "b", "vcruntime140_1.dll")))
    assert code == 17
    part = found(data)["BA105"]
    assert [f["files"] for f in part] == [["VCRUNTIME140_1.dll"]]
    assert "onnxruntime.dll" in part[0]["message"]  # type: ignore[operator]
    assert "VCRUNTIME140_1.dll" in {f["files"][0] for f in found(data)["BA101"]}  # type: ignore[index]


@pytest.mark.realdata
def test_no_cudnn64_9_the_cuda_provider_fails_with_126(gpu_bundle: Path, tmp_path: Path) -> None:
    data, code = audit_cli(str(broken_copy(gpu_bundle, tmp_path / "b", "cudnn64_9.dll")))
    assert code == 17
    assert [f["message"] for f in found(data)["BA103"]] == [
        "onnxruntime_providers_cuda.dll will fail with error 126 and ORT falls back to CPU: "
        "missing cudnn64_9.dll ← onnxruntime_providers_cuda.dll"
    ]
    assert [f["files"] for f in found(data)["BA101"]] == [["cudnn64_9.dll"]]
    assert "BA303" not in found(data)  # its sub-libraries are still needed, not "unused"


@pytest.mark.realdata
def test_no_cudnn_graph64_9_is_caught_by_the_runtime_rules_alone(
    gpu_bundle: Path, tmp_path: Path
) -> None:
    data, code = audit_cli(str(broken_copy(gpu_bundle, tmp_path / "b", "cudnn_graph64_9.dll")))
    assert code == 17
    by_code = found(data)
    # The provider itself still loads; the folder's lock file misses the DLL too.
    assert set(by_code) == {"BA102", "BA305", "BA402"}
    later = by_code["BA102"][0]
    assert later["files"] == ["cudnn_graph64_9.dll"]
    assert "cudnn64_9.dll (runtime)" in later["message"]  # type: ignore[operator]
    assert any("-runtime-> cudnn_graph64_9.dll" in chain for chain in later["details"])  # type: ignore[attr-defined]


@pytest.mark.realdata
def test_cuda_provider_with_no_cuda_dlls_at_all(gpu_bundle: Path, tmp_path: Path) -> None:
    nvidia = [path.name for path in gpu_bundle.glob("*.dll") if path.name.startswith(("cu", "nv"))]
    assert len(nvidia) == 14  # cuBLAS 2, cudart, cuFFT, cuDNN 8, NVRTC 2
    data, code = audit_cli(str(broken_copy(gpu_bundle, tmp_path / "b", *nvidia)))
    assert code == 17
    (provider,) = found(data)["BA103"]
    cuda = ["cublasLt64_12.dll", "cublas64_12.dll", "cudnn64_9.dll", "cufft64_11.dll"]
    assert sorted(provider["files"]) == sorted([PROVIDER, *cuda, "cudart64_12.dll"])  # type: ignore[arg-type]


@pytest.mark.realdata
def test_a_32_bit_dll_under_a_bundled_name(gpu_bundle: Path, tmp_path: Path) -> None:
    broken = broken_copy(gpu_bundle, tmp_path / "b", "cudart64_12.dll")
    write_pe(broken / "cudart64_12.dll", machine="x86", file_version=(6, 14, 11, 12040))
    data, code = audit_cli(str(broken))
    assert code == 17
    machine = found(data)["BA205"]
    assert [f["files"] for f in machine] == [["cudart64_12.dll"]]
    assert "built for x86, the profile targets x64" in machine[0]["message"]  # type: ignore[operator]
    assert "cudart64_12.dll ← onnxruntime_providers_cuda.dll" in found(data)["BA103"][0]["message"]  # type: ignore[operator]


@pytest.mark.realdata
def test_nvcuda_copied_in(gpu_bundle: Path, tmp_path: Path) -> None:
    broken = broken_copy(gpu_bundle, tmp_path / "b")
    write_pe(broken / "nvcuda.dll", file_version=(31, 0, 15, 5161))
    data, code = audit_cli(str(broken))
    assert code == 17
    assert [f["files"] for f in found(data)["BA301"]] == [["nvcuda.dll"]]
    assert "BA303" not in found(data)


@pytest.mark.realdata
def test_cudnn_sub_libraries_from_different_builds(gpu_bundle: Path, tmp_path: Path) -> None:
    broken = broken_copy(gpu_bundle, tmp_path / "b")
    ops = patched_copy(gpu_bundle / "cudnn_ops64_9.dll", broken / "cudnn_ops64_9.dll")
    image = pefile.PE(str(ops), fast_load=True)
    image.parse_data_directories([pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]])
    fixed = image.VS_FIXEDFILEINFO[0]
    offset = fixed.get_file_offset()
    assert (fixed.Signature, fixed.FileVersionLS) == (0xFEEF04BD, (0 << 16) | 70)
    image.close()
    with ops.open("r+b") as handle:  # FileVersionLS is the 4th DWORD: 9.1.0.70 -> 9.1.0.71
        handle.seek(offset + 12)
        handle.write(((0 << 16) | 71).to_bytes(4, "little"))
    data, code = audit_cli(str(broken))
    assert code == 17
    (mixed,) = found(data)["BA203"]
    assert mixed["files"] == ["cudnn_ops64_9.dll"]
    assert mixed["message"] == (
        "cudnn_ops64_9.dll differ from the other cuDNN libraries (9.1.0.70)"
    )
    assert "9.1.0.71: cudnn_ops64_9.dll" in mixed["details"]  # type: ignore[operator]
    assert file_sha256(gpu_bundle / "cudnn_ops64_9.dll") != file_sha256(ops)


@pytest.mark.realdata
def test_lock_file_audit_catches_one_flipped_byte(gpu_bundle: Path, tmp_path: Path) -> None:
    broken = broken_copy(gpu_bundle, tmp_path / "b")
    name = "onnxruntime_providers_shared.dll"
    victim = patched_copy(gpu_bundle / name, broken / name)
    with victim.open("r+b") as handle:
        handle.seek(victim.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0x01]))
    _, folder_code = audit_cli(str(broken))
    assert folder_code == 0  # the folder still resolves: only the hashes can tell
    data, code = audit_cli(str(broken / LOCK_NAME))
    assert code == 17
    assert set(found(data)) == {"BA401", "BA305"}
    assert [f["files"] for f in found(data)["BA401"]] == [[name]]


@pytest.mark.realdata
def test_audit_reads_the_folder_not_path_or_the_cache(
    gpu_bundle: Path, gpu_cache: Path, tmp_path: Path
) -> None:
    """PATH names a folder holding cudnn64_9.dll and the cache has it too: neither counts."""
    broken = broken_copy(gpu_bundle, tmp_path / "b", "cudnn64_9.dll")
    env = {
        **os.environ,
        "BUNDLE_DEBUG": "",
        "BUNDLE_CACHE_DIR": str(gpu_cache),
        "PATH": f"{gpu_bundle}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    command = [sys.executable, "-m", "bundler", "audit", str(broken)]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 17, result.stderr
    assert "  BA101  cudnn64_9.dll is missing" in result.stdout


# --- GPU code (docs/doctor.md#gpu-code) -----------------------------------------------------------


@pytest.mark.realdata
def test_the_audit_reports_which_gpus_the_bundle_serves(gpu_bundle: Path, tmp_path: Path) -> None:
    """ORT 1.19.2's provider has SASS up to sm_80 and compute_80 PTX; cuBLAS 12.4 and cuDNN 9.1
    have SASS up to sm_90 (docs/field-notes.md#gpu-code): native up to 8.9, JIT from 9.0."""
    data, code = audit_cli(str(gpu_bundle))
    assert code == 0, data["findings"]
    gpu = data["gpu"]
    assert isinstance(gpu, dict)
    assert {"5.2", "7.5", "8.0", "8.6", "8.9"} <= set(gpu["native"])
    assert {"9.0", "10.0", "12.0"} <= set(gpu["jit"]) and "5.0" in gpu["none"]
    assert gpu["dlls"]["onnxruntime_providers_cuda.dll"]["sass"][-1] == "sm_80"
    assert gpu["not_judged"] == ["cufft64_11.dll"] and gpu["targets"] == []
    text = run_bundle("audit", str(gpu_bundle)).stdout
    assert "GPU CODE" in text and "PTX JIT at first use: compute capability 9.0" in text
    # Target GPUs declared by the profile: sm_86 is fine, sm_90 JIT only, sm_35 unserved.
    profile = tmp_path / "with-targets.toml"
    shipped = (REPO / "manifests" / "profiles" / f"{GPU}.toml").read_text()
    profile.write_text(
        shipped.replace("[gpu_driver]", 'gpus = ["sm_86", "sm_90", "sm_35"]\n\n[gpu_driver]', 1)
    )
    data, code = audit_cli(str(gpu_bundle), "--profile", str(profile))
    assert code == 17
    by_code = found(data)
    [jit] = by_code["BA702"]
    assert jit["files"] == ["onnxruntime_providers_cuda.dll"] and "sm_90" in str(jit["message"])
    [unserved] = by_code["BA701"]
    assert "sm_35" in str(unserved["message"])
    assert "onnxruntime_providers_cuda.dll" in unserved["files"]  # type: ignore[operator]
