"""`bundle build` as a release pipeline runs it, judged by Wine's loader where it matters.

The GPU bundle is built with --link from the session's fetched cache (hard links: the 2.4 GB
set is prepared once per run). Each negative check removes one file from a hard-linked copy of
the built folder, to show the loader check can fail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bundler.closure.lockfile import read_lock, write_lock
from bundler.target.resources import doctor_exe
from tests.support.builds import GENERATED, build, linked_copy
from tests.support.paths import CPU, HELLO, hello_app
from tests.support.pefactory import PESpec, write_pe
from tests.support.runs import hello_cpu, run_bundle
from tests.support.wine import Wine

CUDA_PROVIDER = "onnxruntime_providers_cuda.dll"


def build_json(*args: str) -> dict[str, object]:
    result = build(*args, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the bundle loads under a real PE loader ------------------------------------------------


@pytest.mark.realdata
def test_gpu_bundle_runs_and_the_cuda_provider_finds_all_its_dlls(
    gpu_bundle: Path, wine: Wine
) -> None:
    run = wine.run(gpu_bundle / "hello.exe", "--try-provider", CUDA_PROVIDER)
    assert "ORT version: 1.19.2" in run.stdout, run.errors
    # 126 = a dependency of the provider is missing; 998 = it loaded them all, then found no GPU.
    assert f"LoadLibrary {CUDA_PROVIDER}: error 126" not in run.stdout
    assert f"LoadLibrary {CUDA_PROVIDER}:" in run.stdout
    assert run.missing == (), run.errors


@pytest.mark.realdata
def test_without_vcruntime140_1_the_app_does_not_start(
    gpu_bundle: Path, wine: Wine, tmp_path: Path
) -> None:
    broken = linked_copy(gpu_bundle, tmp_path / "broken", "vcruntime140_1.dll")
    run = wine.run(broken / "hello.exe")
    assert run.returncode != 0
    assert "ORT version" not in run.stdout
    assert "vcruntime140_1.dll" in {name.lower() for name in run.missing}


@pytest.mark.realdata
def test_without_cudnn64_9_the_cuda_provider_fails_with_126(
    gpu_bundle: Path, wine: Wine, tmp_path: Path
) -> None:
    broken = linked_copy(gpu_bundle, tmp_path / "broken", "cudnn64_9.dll")
    run = wine.run(broken / "hello.exe", "--try-provider", CUDA_PROVIDER)
    assert "ORT version: 1.19.2" in run.stdout
    assert f"LoadLibrary {CUDA_PROVIDER}: error 126" in run.stdout
    assert "cudnn64_9.dll" in {name.lower() for name in run.missing}


@pytest.mark.realdata
def test_cpu_bundle_runs(cpu_cache: Path, wine: Wine, tmp_path: Path) -> None:
    out = tmp_path / "cpu"
    result = build(*hello_cpu(out, cpu_cache))
    assert result.returncode == 0, result.stderr
    run = wine.run(out / "hello.exe")
    assert run.returncode == 0, run.errors
    assert run.stdout.strip() == "ORT version: 1.19.2"
    assert run.missing == ()


# --- the lock file, licences, idempotence -----------------------------------------------------


@pytest.mark.realdata
def test_lock_file_describes_every_file(gpu_bundle: Path) -> None:
    lock = json.loads((gpu_bundle / "bundle.lock.json").read_text())
    assert lock["schema_version"] == 2
    files = {item["name"]: item for item in lock["files"]}
    on_disk = {
        p.relative_to(gpu_bundle).as_posix()
        for p in gpu_bundle.rglob("*")
        if p.is_file() and p.name not in GENERATED
    }
    assert set(files) == on_disk
    for name, item in files.items():
        assert sha256(gpu_bundle / name) == item["sha256"], name
        assert (gpu_bundle / name).stat().st_size == item["size"]
    cudnn = files["cudnn_ops64_9.dll"]
    assert cudnn["origin"] == "pip:nvidia-cudnn-cu12==9.1.0.70"
    assert cudnn["member"] == "nvidia/cudnn/bin/cudnn_ops64_9.dll"
    assert cudnn["file_version"] == "9.1.0.70"
    assert "cudnn64_9.dll -runtime-> cudnn_ops64_9.dll" in cudnn["why"]
    assert lock["driver_requirements"] == ["nvcuda.dll"]
    licences = sorted(name for name in files if name.startswith("licenses/"))
    assert "licenses/onnxruntime/ThirdPartyNotices.txt" in licences
    assert "licenses/cudnn/License.txt" in licences
    assert "licenses/cublas/License.txt" in licences


@pytest.mark.realdata
def test_the_bundle_carries_the_doctor_and_the_gpu_code_of_its_dlls(gpu_bundle: Path) -> None:
    """bundle-doctor.exe is a locked file of its own kind, bundle-doctor.dat a view of the lock,
    and the lock records each DLL's CUDA code: ORT 1.19.2's provider has SASS and PTX for
    sm_52 60 61 70 75 80 (measured with cuobjdump, docs/field-notes.md#gpu-code)."""
    lock = json.loads((gpu_bundle / "bundle.lock.json").read_text())
    files = {item["name"]: item for item in lock["files"]}
    assert files["bundle-doctor.exe"]["kind"] == "doctor"
    assert (gpu_bundle / "bundle-doctor.exe").read_bytes() == doctor_exe().read_bytes()
    assert lock["doctor"] is True and lock["ort_version"] == "1.19.2"
    six = ["sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80"]
    provider = files["onnxruntime_providers_cuda.dll"]
    assert provider["sass"] == six and provider["ptx"] == six
    assert files["onnxruntime.dll"]["sass"] == []  # read, and no fat binary in it
    assert (
        lock["loads"][:3]
        == [
            "onnxruntime.dll",
            "onnxruntime_providers_shared.dll",
            "onnxruntime_providers_cuda.dll",
        ]
        or lock["loads"][0] == "onnxruntime.dll"
    )
    assert "cudnn_ops64_9.dll" in lock["loads"]
    data = (gpu_bundle / "bundle-doctor.dat").read_text()
    assert data.startswith("bundle-doctor-data\t2\n")
    assert f"gpu\tonnxruntime_providers_cuda.dll\t{','.join(six)}\t{','.join(six)}\n" in data


def test_no_doctor_ships_neither_file(tmp_path: Path, cpu_cache: Path) -> None:
    out = tmp_path / "out"
    result = build(*hello_cpu(out, cpu_cache, "--no-doctor"))
    assert result.returncode == 0, result.stderr
    assert not (out / "bundle-doctor.exe").exists() and not (out / "bundle-doctor.dat").exists()
    lock = json.loads((out / "bundle.lock.json").read_text())
    assert lock["doctor"] is False and "bundle-doctor.exe" not in {f["name"] for f in lock["files"]}
    shipped = build(*hello_cpu(tmp_path / "with", cpu_cache))
    assert shipped.returncode == 0, shipped.stderr
    assert (tmp_path / "with" / "bundle-doctor.dat").is_file()


@pytest.mark.realdata
def test_second_build_copies_and_hashes_nothing(gpu_bundle: Path, gpu_cache: Path) -> None:
    data = build_json(str(HELLO), "--out", str(gpu_bundle), "--cache-dir", str(gpu_cache), "--link")
    counters = data["counters"]
    assert isinstance(counters, dict)
    assert (counters["copied"], counters["linked"], counters["hashed"]) == (0, 0, 0)
    assert counters["skipped"] == len(data["steps"])  # type: ignore[arg-type]


@pytest.mark.realdata
def test_rebuild_next_to_the_exe_keeps_the_lock_and_passes_locked(
    cpu_cache: Path, tmp_path: Path
) -> None:
    app = hello_app(tmp_path / "app")
    args = [str(app / "hello.exe"), "--profile", CPU, "--cache-dir", str(cpu_cache)]
    assert build(*args).returncode == 0
    first = (app / "bundle.lock.json").read_text()
    assert '"origin": "pip:onnxruntime==1.19.2"' in first
    again = build_json(*args, "--locked")
    assert again["counters"]["copied"] == 0  # type: ignore[index]
    assert (app / "bundle.lock.json").read_text() == first


@pytest.mark.realdata
def test_dry_run_writes_nothing(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    data = build_json(*hello_cpu(out, cpu_cache), "--dry-run")
    assert data["dry_run"] is True
    assert {step["action"] for step in data["steps"]} == {"copy"}  # type: ignore[union-attr]
    assert not out.exists()


@pytest.mark.realdata
def test_killed_build_leaves_no_partial_dll_and_the_rerun_completes(
    gpu_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "bundler", "build", str(HELLO), "--out", str(out),
        "--cache-dir", str(gpu_cache), "--copy",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(out.glob(".*.bundle-tmp")):
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    # Killed mid-way: the lock file, written last, is absent (the build did not finish).
    assert not (out / "bundle.lock.json").exists(), "the build finished before it was killed"
    # Whatever has a final name is complete: identical to its source in the cache.
    sources = {p.name: p for p in (gpu_cache / "extracted").rglob("*.dll")}
    for dll in out.glob("*.dll"):
        assert dll.stat().st_size == sources[dll.name].stat().st_size
        assert sha256(dll) == sha256(sources[dll.name])
    rerun = build(str(HELLO), "--out", str(out), "--cache-dir", str(gpu_cache), "--copy")
    assert rerun.returncode == 0, rerun.stderr
    assert not list(out.glob(".*.bundle-tmp"))
    lock = json.loads((out / "bundle.lock.json").read_text())
    for item in lock["files"]:
        if item["name"].endswith(".dll"):
            assert (out / item["name"]).stat().st_size == item["size"]
    shutil.rmtree(out)  # 2.6 GB of copies: do not keep them in pytest's retained temp dirs


# --- refusals: one line, documented exit code, nothing written ---------------------------------


@pytest.mark.parametrize(
    ("case", "code", "expected"),
    [
        ("x86", 5, "built for x86"),
        ("not-pe", 4, "not a valid PE file"),
        ("missing", 4, "does not exist"),
        ("profile", 6, "unknown profile 'ort-9-gpu'"),
    ],
)
def test_bad_input_is_one_line_with_exit_code_and_nothing_written(
    tmp_path: Path, mingw_build: Path, case: str, code: int, expected: str
) -> None:
    exe = {
        "x86": mingw_build / "x86" / "ortapp.exe",
        "not-pe": tmp_path / "notes.exe",
        "missing": tmp_path / "absent.exe",
        "profile": HELLO,
    }[case]
    if case == "not-pe":
        exe.write_text("not a program\n")
    out = tmp_path / "out"
    profile = "ort-9-gpu" if case == "profile" else CPU
    result = build(
        str(exe), "--profile", profile, "--out", str(out), "--cache-dir", str(tmp_path / "c")
    )
    assert result.returncode == code
    assert result.stderr.count("\n") == 1 and expected in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert not (tmp_path / "c").exists()  # refused before anything was fetched


@pytest.mark.realdata
def test_a_different_file_of_the_user_is_not_overwritten(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_pe(out / "onnxruntime.dll", PESpec(file_version=(1, 18, 0, 0)))
    args = hello_cpu(out, cpu_cache)
    refused = build(*args)
    assert refused.returncode == 12
    assert "version 1.18.0.0" in refused.stderr and "version 1.19.24.830" in refused.stderr
    assert not (out / "msvcp140.dll").exists()
    forced = build(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "onnxruntime.dll").stat().st_size > 10_000_000


@pytest.mark.realdata
def test_an_identical_copy_made_by_hand_is_adopted(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = hello_cpu(out, cpu_cache)
    assert build(*args).returncode == 0
    (out / "bundle.lock.json").unlink()  # as if the DLLs had been put there by hand
    ort = out / "onnxruntime.dll"
    os.utime(ort, (1_000_000_000, 1_000_000_000))
    data = build_json(*args)
    steps = {step["name"]: step["action"] for step in data["steps"]}  # type: ignore[union-attr]
    assert steps["onnxruntime.dll"] == "touch"
    assert data["counters"]["copied"] == 0  # type: ignore[index]
    again = build_json(*args)
    assert {step["action"] for step in again["steps"]} == {"skip"}  # type: ignore[union-attr]


@pytest.mark.realdata
def test_clean_removes_only_what_an_earlier_build_wrote(
    gpu_cache: Path, cpu_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    gpu = [str(HELLO), "--out", str(out), "--cache-dir", str(gpu_cache), "--link"]
    assert build(*gpu).returncode == 0
    (out / "readme.txt").write_text("mine")
    switched = build_json(
        *hello_cpu(out, cpu_cache),
        "--link",
        "--clean",
    )
    assert not (out / "cudnn64_9.dll").exists()
    assert not (out / "licenses" / "cudnn").exists() or not any(
        (out / "licenses" / "cudnn").iterdir()
    )
    assert (out / "readme.txt").read_text() == "mine"
    assert (out / "onnxruntime.dll").exists()
    assert switched["counters"]["removed"] > 20  # type: ignore[index]


@pytest.mark.realdata
def test_locked_detects_a_changed_result(cpu_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = hello_cpu(out, cpu_cache)
    assert build(*args).returncode == 0
    assert build(*args, "--locked").returncode == 0
    lock_path = out / "bundle.lock.json"
    recorded = read_lock(lock_path)
    assert recorded is not None
    files = tuple(f for f in recorded.files if f.name != "msvcp140_1.dll")
    write_lock(lock_path, dataclasses.replace(recorded, files=files))  # an older result's lock
    drifted = build(*args, "--locked")
    assert drifted.returncode == 13
    assert "msvcp140_1.dll: new in the bundle" in drifted.stderr


@pytest.mark.realdata
def test_old_vc_runtime_is_refused_naming_both_versions(cpu_cache: Path, tmp_path: Path) -> None:
    old = tmp_path / "old-vc"
    write_pe(old / "msvcp140.dll", PESpec(file_version=(14, 29, 30133, 0)))
    out = tmp_path / "out"
    result = build(
        str(HELLO), "--profile", CPU, "--out", str(out), "--cache-dir", str(cpu_cache),
        "--search", str(old),
    )  # fmt: skip
    assert result.returncode == 11
    assert "14.29.30133.0" in result.stderr and "14.40" in result.stderr
    assert not out.exists()


@pytest.mark.realdata
def test_installer_mode_ships_vc_redist_instead_of_the_dlls(
    cpu_cache: Path, tmp_path: Path
) -> None:
    redist = write_pe(tmp_path / "vc_redist.x64.exe", PESpec(dll=False))
    out = tmp_path / "out"
    data = build_json(
        str(HELLO), "--profile", CPU, "--out", str(out), "--cache-dir", str(cpu_cache),
        "--vc-runtime", "installer", "--vc-redist", str(redist),
    )  # fmt: skip
    assert (out / "vc_redist.x64.exe").read_bytes() == redist.read_bytes()
    assert not (out / "msvcp140.dll").exists() and not (out / "vcruntime140_1.dll").exists()
    kinds = {item["name"]: item["kind"] for item in data["lock"]["files"]}  # type: ignore[index]
    assert kinds["vc_redist.x64.exe"] == "installer"


@pytest.mark.realdata
def test_sbom_lists_every_shipped_file_with_hash_supplier_and_licence(
    cpu_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = [
        *hello_cpu(out, cpu_cache),
        "--sbom",
    ]
    assert build(*args).returncode == 0
    bom = json.loads((out / "bundle.cdx.json").read_text())
    assert (bom["bomFormat"], bom["specVersion"]) == ("CycloneDX", "1.5")
    components = {c["name"]: c for c in bom["components"]}
    ort = components["onnxruntime.dll"]
    assert ort["hashes"] == [{"alg": "SHA-256", "content": sha256(out / "onnxruntime.dll")}]
    assert ort["supplier"] == {"name": "Microsoft Corporation"}
    assert ort["licenses"] == [{"expression": "MIT"}]
    assert ort["purl"] == "pkg:pypi/onnxruntime@1.19.2"
    assert "vcruntime140_1.dll" in components
    from cyclonedx.schema import SchemaVersion  # a test extra: the Windows tier lacks it
    from cyclonedx.validation.json import JsonStrictValidator

    validator = JsonStrictValidator(SchemaVersion.V1_5)
    assert validator.validate_str((out / "bundle.cdx.json").read_text()) is None
    first = (out / "bundle.cdx.json").read_bytes()
    assert build(*args).returncode == 0
    assert (out / "bundle.cdx.json").read_bytes() == first  # reproducible


@pytest.mark.realdata
def test_bare_build_reads_bundle_toml(cpu_cache: Path, tmp_path: Path) -> None:
    app = hello_app(
        tmp_path / "app",
        '[build]\nexe = "hello.exe"\nprofile = "ort-1.19.2-cpu"\nout = "dist"\nsbom = true\n',
    )
    result = build("--cache-dir", str(cpu_cache), cwd=app)
    assert result.returncode == 0, result.stderr
    assert (app / "dist" / "hello.exe").is_file()
    assert (app / "dist" / "onnxruntime.dll").is_file()
    assert (app / "dist" / "bundle.cdx.json").is_file()
    bad = app / "bundle.toml"
    bad.write_text('[build]\nexe = "hello.exe"\nprofiel = "x"\n')
    typo = build("--cache-dir", str(cpu_cache), cwd=app)
    assert typo.returncode == 14 and "unknown key(s): profiel" in typo.stderr


def test_bare_build_without_config_says_what_is_missing(tmp_path: Path) -> None:
    result = run_bundle("build", cwd=tmp_path)
    assert result.returncode == 14
    assert "no EXE given and no bundle.toml" in result.stderr


def test_build_with_a_missing_search_folder_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = build(
        str(HELLO), "--profile", CPU, "--out", str(out), "--cache-dir", str(tmp_path / "c"),
        "--search", str(tmp_path / "no-such-folder"),
    )  # fmt: skip
    assert result.returncode == 4
    assert result.stderr.count("\n") == 1 and "no-such-folder: no such folder" in result.stderr
    assert not out.exists() and not (tmp_path / "c").exists()


def test_deps_fetch_refuses_a_32_bit_exe_before_downloading(
    mingw_build: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    app32 = mingw_build / "x86" / "ortapp.exe"
    result = run_bundle("deps", "--fetch", "--cache-dir", str(cache), str(app32))
    assert result.returncode == 5 and "built for x86" in result.stderr
    assert not cache.exists()
