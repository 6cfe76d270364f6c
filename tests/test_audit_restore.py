"""Audit precision (issue 17): a broken bundle gets every missing file by name, the list of
what to restore, and no false "not needed".

Synthetic bundles (pefactory images wired like the real GPU set, docs/field-notes.md#import-graph)
with DLLs removed; what the absent DLLs would have loaded comes from the lock file in the folder,
else from the profile's [[files]] block. The differential test on the real GPU bundle, against
Wine's loader, is tests/test_audit_differential.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bundler.audit.judge import audit
from bundler.audit.loader_output import LoaderRun
from bundler.audit.loadproof import LoadProof, proof_findings
from bundler.closure.lock import LOCK_NAME, Lock, LockedFile
from bundler.closure.lockfile import read_lock, write_lock
from bundler.closure.times import TIMES_NAME, write_times
from bundler.findings import Severity
from bundler.target.profiles import available_profiles, load_profile
from tests.support.builds import build
from tests.support.locks import lock_for
from tests.support.paths import GPU, HELLO, REPO
from tests.support.pefactory import PESpec
from tests.support.runs import run_bundle
from tests.support.synthetic_gpu import PROVIDER, synthetic_gpu

HEURISTIC = "cudnn_heuristic64_9.dll"
BUILTINS = "nvrtc-builtins64_124.dll"


def errors_naming(report: object) -> set[str]:
    return {
        name.lower()
        for item in report.findings  # type: ignore[attr-defined]
        if item.severity is Severity.ERROR
        for name in item.files
    }


def codes_for(report: object, name: str) -> set[str]:
    return {f.code for f in report.findings if name in f.files}  # type: ignore[attr-defined]


def without_recorded_files(tmp_path: Path) -> Path:
    """The GPU profile as a custom file, minus its [[files]] block: nothing is recorded."""
    text = load_profile(GPU).path.read_text(encoding="utf-8")
    head = text.split("\n# --- [[files]]", 1)[0]
    assert head != text, "the shipped GPU profile has no [[files]] block"
    path = tmp_path / "no-records.toml"
    path.write_text(head + "\n", encoding="utf-8")
    return path


# --- what an absent DLL would have loaded ----------------------------------------------------


def test_the_profile_records_what_an_absent_provider_imports(tmp_path: Path) -> None:
    """The issue's first case: the provider and a cuDNN sub-library reachable only through it
    are gone. Both are named, nothing the provider needs is "not needed"."""
    folder = synthetic_gpu(tmp_path / "app", without=(PROVIDER, HEURISTIC))
    report = audit(folder, GPU)
    assert {PROVIDER, HEURISTIC} <= errors_naming(report)
    assert not [f for f in report.findings if f.code == "BA303"], report.findings
    assert [item.name for item in report.restore] == [HEURISTIC, PROVIDER]
    (later,) = [f for f in report.findings if f.code == "BA102"]
    assert later.files == (HEURISTIC,) and later.inferred == ("the profile",)
    assert any("inferred from the profile" in line and PROVIDER in line for line in later.details)
    (gone,) = [f for f in report.findings if f.code == "BA101"]
    assert gone.files == (PROVIDER,) and gone.inferred == ()  # the folder shows this need


def test_without_any_record_the_old_blind_spot_stays_visible(tmp_path: Path) -> None:
    """The control: without [[files]] (and no lock) the provider's imports are unknown, so the
    heuristic library goes unreported and the cuDNN DLLs look unused. The records matter."""
    folder = synthetic_gpu(tmp_path / "app", without=(PROVIDER, HEURISTIC))
    report = audit(folder, str(without_recorded_files(tmp_path)))
    assert HEURISTIC.lower() not in errors_naming(report)
    assert "cudnn64_9.dll" in {f.files[0] for f in report.findings if f.code == "BA303"}


def test_the_lock_files_import_tables_come_first(tmp_path: Path) -> None:
    """A lock that records the provider's imports (as build writes it) is what the audit
    uses, and says so; with a profile that records nothing."""
    folder = synthetic_gpu(tmp_path / "app", without=(HEURISTIC,))
    lock = read_lock(lock_for(folder))
    assert lock is not None
    imports = {PROVIDER: ("cudnn64_9.dll", "cublas64_12.dll", "cudart64_12.dll")}
    files = tuple(
        LockedFile(**{**vars(item), "imports": imports.get(item.name, ())}) for item in lock.files
    )
    files += (LockedFile(HEURISTIC, "bundled", "0" * 64, 10, artifact="cudnn"),)
    write_lock(folder / LOCK_NAME, Lock(GPU, "x64", "app-local", files, app="hello.exe"))
    (folder / PROVIDER).unlink()
    report = audit(folder, str(without_recorded_files(tmp_path)))
    assert {PROVIDER, HEURISTIC} <= errors_naming(report)
    (later,) = [f for f in report.findings if f.code == "BA102"]
    assert later.inferred == ("the lock file",)
    assert not [f for f in report.findings if f.code == "BA303"]
    assert {item.name for item in report.restore} == {PROVIDER, HEURISTIC}
    restored = {item.name: item for item in report.restore}
    assert restored[HEURISTIC].artifact == "cudnn" and restored[HEURISTIC].sha256 == "0" * 64


def test_a_locked_dll_the_closure_does_not_reach_is_not_unreferenced(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app", **{"plugin.dll": PESpec()})
    assert codes_for(audit(folder, GPU), "plugin.dll") == {"BA303"}
    lock_for(folder)
    assert codes_for(audit(folder, GPU), "plugin.dll") == set()
    (folder / LOCK_NAME).unlink()
    (folder / "extra.dll").write_bytes((folder / "plugin.dll").read_bytes())
    lock_for(folder)
    os.unlink(folder / "plugin.dll")
    report = audit(folder, GPU)
    assert codes_for(report, "plugin.dll") == {"BA402"}
    assert [item.name for item in report.restore] == ["plugin.dll"]


@pytest.mark.realdata
def test_the_shipped_profiles_records_are_the_pinned_dlls_import_tables(real_dlls: object) -> None:
    """The [[files]] blocks are data measured on the real wheels, not copied from our output:
    the tool reads the pinned DLLs again and must find every block up to date."""
    result = subprocess.run(
        [sys.executable, "-m", "tools.manifests.record_files", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    hand_written = [p for p in available_profiles() if p.startswith("ort-1.19.2-")]
    assert result.stdout.count("up to date") == len(hand_written) == 4


ENTRY = '\n[[files]]\nname = "{name}"\nartifact = "{artifact}"\nsize = {size}\n'


@pytest.mark.parametrize(
    ("name", "artifact", "size", "problem"),
    [
        ("cudart64_12.dll", "cudnn", 5, "does not provide it"),
        ("onnxruntime.dll", "onnxruntime", 5, "twice"),
        ("cudart64_12.dll", "cuda-runtime", 0, "key 'size'"),
    ],
)
def test_a_bad_files_block_is_refused(
    name: str, artifact: str, size: int, problem: str, tmp_path: Path
) -> None:
    text = load_profile(GPU).path.read_text(encoding="utf-8")
    path = tmp_path / "bad.toml"
    path.write_text(text + ENTRY.format(name=name, artifact=artifact, size=size), encoding="utf-8")
    result = run_bundle("profiles", "show", str(path))
    assert result.returncode == 6, result.stdout + result.stderr
    assert problem in result.stderr and "Traceback" not in result.stderr


# --- patterns become file names ---------------------------------------------------------------


def test_a_pattern_rule_names_the_recorded_file(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app", without=(BUILTINS,))
    report = audit(folder, GPU)
    (later,) = [f for f in report.findings if f.code == "BA102"]
    assert later.files == (BUILTINS,) and later.inferred == ("the profile",)
    assert f"{BUILTINS} is missing" in later.message
    assert [item.name for item in report.restore] == [BUILTINS]
    assert report.restore[0].artifact == "nvrtc" and report.restore[0].known_from == "the profile"


def test_a_pattern_stays_a_pattern_only_when_no_name_is_known(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app", without=(BUILTINS,))
    report = audit(folder, str(without_recorded_files(tmp_path)))
    (later,) = [f for f in report.findings if f.code == "BA102"]
    assert later.files == ("nvrtc-builtins64_*.dll",)
    assert "no concrete name is known" in later.message
    assert report.restore[0].note == "no concrete file name is known (a pattern)"


# --- the folder form reads the folder's lock file ---------------------------------------------


def test_the_folder_form_checks_its_lock_file_without_hashing(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app")
    lock_for(folder)
    assert codes_for(audit(folder, GPU), "cufft64_11.dll") == set()
    (folder / "cufft64_11.dll").unlink()
    assert codes_for(audit(folder, GPU), "cufft64_11.dll") == {"BA101", "BA103", "BA402"}
    # Same size, other bytes, same time: only hashing sees it.
    path = folder / "cudart64_12.dll"
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert codes_for(audit(folder, GPU), "cudart64_12.dll") == set()
    assert codes_for(audit(folder, GPU, verify=True), "cudart64_12.dll") == {"BA401"}
    assert codes_for(audit(folder / LOCK_NAME, GPU), "cudart64_12.dll") == {"BA401"}
    # Another size: no hash needed.
    (folder / "cublasLt64_12.dll").write_bytes(data + b"x")
    assert "BA401" in codes_for(audit(folder, GPU), "cublasLt64_12.dll")


def test_a_time_stamp_other_than_the_locks_is_a_warning_that_verify_settles(
    tmp_path: Path,
) -> None:
    folder = synthetic_gpu(tmp_path / "app")
    lock = read_lock(lock_for(folder))
    assert lock is not None
    stamped = tuple(
        LockedFile(**{**vars(item), "mtime_ns": (folder / item.name).stat().st_mtime_ns})
        for item in lock.files
    )
    write_lock(folder / LOCK_NAME, Lock(GPU, "x64", "app-local", stamped, app="hello.exe"))
    assert not [f for f in audit(folder, GPU).findings if f.code == "BA404"]
    path = folder / "cudart64_12.dll"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert not [f for f in audit(folder, GPU).findings if f.code == "BA404"]  # within 2 s
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 60 * 10**9))
    assert codes_for(audit(folder, GPU), "cudart64_12.dll") == {"BA404"}
    assert codes_for(audit(folder, GPU, verify=True), "cudart64_12.dll") == set()


def test_the_times_noted_beside_the_lock_are_ba404s_reference(tmp_path: Path) -> None:
    """The lock records no local time (it is published); the build notes each file's time in
    bundle.times.json, which the cheap check reads, and ignores once the lock is another."""
    folder = synthetic_gpu(tmp_path / "app")
    lock = read_lock(lock_for(folder))
    assert lock is not None and all(item.mtime_ns is None for item in lock.files)
    path = folder / "cudart64_12.dll"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 60 * 10**9))
    assert not [f for f in audit(folder, GPU).findings if f.code == "BA404"]  # no note yet
    write_times(folder, lock)
    noted = json.loads((folder / TIMES_NAME).read_text(encoding="utf-8"))["mtime_ns"]
    assert noted["cudart64_12.dll"] == path.stat().st_mtime_ns
    assert not [f for f in audit(folder, GPU).findings if f.code == "BA404"]
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 60 * 10**9))
    assert codes_for(audit(folder, GPU), "cudart64_12.dll") == {"BA404"}
    assert codes_for(audit(folder, GPU, verify=True), "cudart64_12.dll") == set()
    write_lock(folder / LOCK_NAME, replace(lock, app="other.exe"))  # another build's lock
    assert not [f for f in audit(folder, GPU).findings if f.code == "BA404"]


def test_build_records_imports_and_times_in_the_lock(tmp_path: Path) -> None:
    """Round trip of the new lock keys, as build writes and the audit reads them."""
    entry = LockedFile(PROVIDER, "bundled", "0" * 64, 5, imports=("cudnn64_9.dll",), mtime_ns=123)
    write_lock(tmp_path / LOCK_NAME, Lock(GPU, "x64", "app-local", (entry,)))
    (read,) = read_lock(tmp_path / LOCK_NAME).files  # type: ignore[union-attr]
    assert read == entry and read.imports == ("cudnn64_9.dll",) and read.delay_imports is None


# --- the report as a user sees it -------------------------------------------------------------


def test_the_text_ends_with_the_restore_list_and_json_has_it(tmp_path: Path) -> None:
    folder = synthetic_gpu(tmp_path / "app", without=(PROVIDER, HEURISTIC))
    result = run_bundle("audit", str(folder), "--profile", GPU)
    assert result.returncode == 17, result.stderr
    tail = result.stdout.rstrip().splitlines()[-3:]
    assert tail[0].startswith("RESTORE (2 file(s); `bundle build` into this folder")
    assert tail[1].startswith(f"  {HEURISTIC}  [artifact cudnn 9.1.0.70")
    assert "need inferred from the profile" in tail[1]
    assert tail[2].startswith(f"  {PROVIDER}  [artifact onnxruntime 1.19.2")
    data = json.loads(run_bundle("audit", str(folder), "--profile", GPU, "--json").stdout)
    restore = {item["name"]: item for item in data["restore"]}
    assert set(restore) == {PROVIDER, HEURISTIC}
    assert any("nvidia-cudnn-cu12==9.1.0.70" in text for text in restore[HEURISTIC]["sources"])
    heuristic = [f for f in data["findings"] if f["files"] == [HEURISTIC]]
    assert heuristic[0]["inferred_from"] == ["the profile"]
    assert data["hashes_verified"] is False


def test_a_clean_folder_has_no_restore_list(tmp_path: Path) -> None:
    result = run_bundle("audit", str(synthetic_gpu(tmp_path / "app")), "--profile", GPU)
    assert result.returncode == 0 and "RESTORE" not in result.stdout


# --- two small ones: a failed app run, and what vc_redist provides ----------------------------


def _proof(run: LoaderRun) -> LoadProof:
    return LoadProof("wine", "wine-8.0", None, None, (run,), (), (), (), (), (), (), ())


@pytest.mark.parametrize("code", [0, 3, -1073741515])
def test_an_app_that_exits_non_zero_failed(code: int, tmp_path: Path) -> None:
    from bundler.audit.loadrun import _wine_verdict

    verdict = _wine_verdict("app", code, (), 30)
    run = LoaderRun("hello.exe", "app", ("hello.exe",), code, (), True, False, (), verdict)
    plan = audit(synthetic_gpu(tmp_path / "app"), GPU).plan
    found = proof_findings(_proof(run), plan)
    if code == 0:
        assert verdict == "started, no DLL missing (exit 0)" and found == []
        return
    assert f"FAILED with exit code {code}" in verdict
    (item,) = found
    assert item.code == "BA503" and item.severity is Severity.ERROR
    assert item.files == ("hello.exe",) and f"exit code {code}" in item.message


def test_explain_in_installer_mode_says_vc_redist_provides(tmp_path: Path) -> None:
    vc = ("msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll")
    folder = synthetic_gpu(tmp_path / "app", without=vc)
    lock_for(folder, vc_runtime="installer")
    result = run_bundle("audit", str(folder), "--explain", PROVIDER)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    (redist,) = [line for line in lines if "vc_redist provides" in line]
    assert "MSVCP140.dll" in redist and "VCRUNTIME140_1.dll" in redist
    windows = [line for line in lines if "Windows provides" in line]
    assert all("VCRUNTIME140" not in line for line in windows)


@pytest.mark.realdata
def test_bundle_build_into_the_folder_restores_the_list(gpu_cache: Path, tmp_path: Path) -> None:
    """What the README promises: the restore list, then `bundle build` into the same folder,
    and the audit is clean again."""
    out = tmp_path / "dist"
    args = (str(HELLO), "--out", str(out), "--cache-dir", str(gpu_cache), "--link")
    assert build(*args).returncode == 0
    for name in (PROVIDER, HEURISTIC, BUILTINS):
        (out / name).unlink()
    data = json.loads(run_bundle("audit", str(out), "--json").stdout)
    assert {item["name"] for item in data["restore"]} == {PROVIDER, HEURISTIC, BUILTINS}
    assert all(item["origin"] and item["sha256"] for item in data["restore"])
    rebuilt = build(*args)
    assert rebuilt.returncode == 0, rebuilt.stderr
    result = run_bundle("audit", str(out))
    assert result.returncode == 0, result.stdout
    assert "RESTORE" not in result.stdout
