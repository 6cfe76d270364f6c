"""`bundle audit PATH --run`: the load proof, judged against Wine's real loader.

Real data: the GPU folder `bundle build --link` makes for examples/hello, whole and with one
DLL removed from a hard-linked copy. The disagreements are made for real too, with tiny
synthetic exes (tests/support/pefactory.py) that Wine really starts: one imports cryptbase.dll,
which
the system policy counts as part of Windows and Wine 8 does not implement (the loader reports
it missing, the audit does not); one imports msvcr120.dll, which is not part of Windows (the
audit reports it missing) but Wine has a builtin for (the loader loads it).

Most runs use the session's warm prefix (the `wine` fixture) through WINEPREFIX, as a user's
own prefix; the first test lets bundle create its private prefix under the cache dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundler.audit.judge import audit
from bundler.audit.loadrun import prove_load
from bundler.closure.plan import Status
from bundler.findings import Severity
from tests.support.builds import broken_copy
from tests.support.gpu_closure import CUDNN
from tests.support.mingw import compile_c
from tests.support.paths import GPU
from tests.support.pefactory import write_pe
from tests.support.scratch import scratch
from tests.support.wine import Wine, require_wine

PROVIDER = "onnxruntime_providers_cuda.dll"
# docs/field-notes.md#import-graph: what loads only at run time (cudnn64_9.dll imports nothing and
# loads its sub-libraries; cuDNN loads NVRTC, NVRTC its builtins), and which of them import which.
CUDNN_SUBS = tuple(sorted(CUDNN - {"cudnn64_9.dll", "cudnn_graph64_9.dll"}))
# runtime-only DLL -> the runtime-only DLLs that import it (docs/field-notes.md#import-graph)
IMPORTED_BY = {
    "cudnn_graph64_9.dll": set(CUDNN_SUBS),
    "cudnn_ops64_9.dll": {"cudnn_cnn64_9.dll", "cudnn_adv64_9.dll"},
}
RUNTIME_LOADED = (PROVIDER, "cudnn_graph64_9.dll", *CUDNN_SUBS, "nvrtc64_120_0.dll")
LOAD_PROOF_KEYS = {
    "loader",
    "loader_version",
    "prefix",
    "dll_overrides",
    "runs",
    "missing",
    "audit_missing",
    "agrees",
    "loader_only",
    "audit_only",
    "skipped",
    "doctor",
}


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache dir of bundle's own, where --run keeps its private prefix (a Wine prefix of
    about 1 GB, removed when the module is done)."""
    with scratch(tmp_path_factory, "run-cache") as folder:
        yield folder


def bundle_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "BUNDLE_DEBUG": "", **extra}
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    return env


def audit_run(
    folder: Path, env: dict[str, str], *args: str, cwd: Path | None = None
) -> tuple[dict[str, object], int, str]:
    """`bundle audit FOLDER --run --json` as a user runs it: document, exit code, stderr."""
    command = [sys.executable, "-m", "bundler", "audit", str(folder), "--run", "--json", *args]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    assert result.stdout, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data, result.returncode, result.stderr


def in_prefix(wine: Wine) -> dict[str, str]:
    return bundle_env(WINEPREFIX=str(wine.prefix))


def proof_of(data: dict[str, object]) -> dict[str, object]:
    proof = data["load_proof"]
    assert isinstance(proof, dict)
    return proof


def runs_of(data: dict[str, object]) -> dict[str, dict[str, Any]]:
    runs = proof_of(data)["runs"]
    assert isinstance(runs, list)
    return {run["target"]: run for run in runs}


def codes(data: dict[str, object]) -> set[str]:
    return {item["code"] for item in data["findings"]}  # type: ignore[attr-defined]


def processes_in(prefix: Path, *, naming: str = "") -> list[str]:
    """Command lines of the live processes running with WINEPREFIX=prefix (Linux /proc)."""
    wanted = f"WINEPREFIX={prefix}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if wanted in env and naming in command:
            found.append(command)
    return found


def synthetic_app(folder: Path, *imports: str) -> Path:
    """A tiny exe Wine really starts (its entry point returns 1), importing `imports`."""
    folder.mkdir()
    write_pe(folder / "tool.exe", dll=False, imports=("KERNEL32.dll", *imports))
    return folder


# --- the real GPU bundle --------------------------------------------------------------------------


@pytest.mark.realdata
def test_clean_gpu_bundle_loads_in_a_private_prefix(
    gpu_bundle: Path, private_cache: Path, tmp_path: Path
) -> None:
    require_wine()
    env = bundle_env(BUNDLE_CACHE_DIR=str(private_cache))
    env.pop("WINEPREFIX", None)
    data, code, stderr = audit_run(gpu_bundle, env)
    prefix = private_cache / "wineprefix"
    assert code == 0, (stderr, data["findings"])
    assert f"setting up the Wine prefix {prefix}" in stderr
    proof = proof_of(data)
    assert set(proof) == LOAD_PROOF_KEYS
    assert proof["loader"] == "wine" and proof["prefix"] == str(prefix)
    assert str(proof["loader_version"]).startswith("wine-")
    assert proof["agrees"] is True
    assert proof["missing"] == {"absent": [], "unusable": [], "cascades": [], "driver": []}
    # every VC++ runtime name is forced native, the shipped ones and the rest alike
    assert "vcruntime140_1" in str(proof["dll_overrides"]).split("=")[0].split(",")
    runs = runs_of(data)
    assert runs["hello.exe"]["kind"] == "app" and runs["hello.exe"]["exit_code"] == 0
    assert runs["hello.exe"]["command"][:2] == ["wine", str(gpu_bundle / "hello.exe")]
    assert all(run["loader_lines"] == [] for run in runs.values()), runs
    loaded = {name for name, run in runs.items() if run["kind"] == "dll"}
    for name in RUNTIME_LOADED:  # loaded itself, or imported by a DLL that was
        assert name in loaded or loaded & IMPORTED_BY.get(name, set()), (name, loaded)
    # a complete CUDA provider gets past its imports and fails in its initialisation (no GPU)
    assert runs[PROVIDER]["exit_code"] == 3 and "no GPU" in str(runs[PROVIDER]["verdict"])
    assert all(runs[name]["exit_code"] == 4 for name in loaded - {PROVIDER}), runs
    # The bundle ships bundle-doctor.exe: --run runs it under the same loader, for its report
    # on this machine (no NVIDIA driver here), which is shown and never counted.
    assert "bundle-doctor.exe" not in runs
    doctor = proof["doctor"]
    assert doctor["tool"] == "bundle-doctor" and doctor["exit_code"] == 17
    assert "BA801" in {item["code"] for item in doctor["findings"]}
    assert "BA801" not in {item["code"] for item in data["findings"]}

    # A second --run reuses the prefix, and once done nothing keeps running in it.
    app = synthetic_app(tmp_path / "tool")
    _, _, again = audit_run(app, env)
    assert "setting up" not in again
    deadline = time.monotonic() + 15
    while processes_in(prefix) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_in(prefix) == []


@pytest.mark.realdata
def test_a_relative_folder_runs_the_app_it_names(gpu_bundle: Path, wine: Wine) -> None:
    """PATH as a user types it, relative to the current folder: the runs (cwd = the folder)
    must still start that exe, not a path relative to the folder itself."""
    data, code, stderr = audit_run(Path(gpu_bundle.name), in_prefix(wine), cwd=gpu_bundle.parent)
    assert code == 0, stderr
    run = runs_of(data)["hello.exe"]
    assert run["exit_code"] == 0, run  # Wine's "file not found" would be exit 53
    assert run["command"][1] == str(gpu_bundle / "hello.exe")


@pytest.mark.realdata
def test_without_cudnn64_9_loader_and_audit_agree(
    gpu_bundle: Path, wine: Wine, tmp_path: Path
) -> None:
    broken = broken_copy(gpu_bundle, tmp_path / "b", "cudnn64_9.dll")
    data, code, stderr = audit_run(broken, in_prefix(wine))
    assert code == 17, stderr
    proof = proof_of(data)
    assert proof["agrees"] is True
    assert proof["missing"] == {
        "absent": ["cudnn64_9.dll"],
        "unusable": [],
        "cascades": [],
        "driver": [],
    }
    assert proof["audit_missing"] == ["cudnn64_9.dll"]
    lines = runs_of(data)[PROVIDER]["loader_lines"]
    assert len(lines) == 1, lines
    line = lines[0]
    assert ":err:module:import_dll Library cudnn64_9.dll (which is needed by " in line
    assert line.endswith(f'{PROVIDER}") not found')
    assert {"BA101", "BA103"} <= codes(data) and not codes(data) & {"BA501", "BA502"}


@pytest.mark.realdata
def test_without_vcruntime140_1_the_loader_reports_it_too(
    gpu_bundle: Path, wine: Wine, tmp_path: Path
) -> None:
    """Forcing the absent DLL native is the point: Wine's builtin would hide it."""
    broken = broken_copy(gpu_bundle, tmp_path / "b", "vcruntime140_1.dll")
    data, code, stderr = audit_run(broken, in_prefix(wine))
    assert code == 17, stderr
    proof = proof_of(data)
    missing = proof["missing"]
    assert isinstance(missing, dict)
    assert [name.lower() for name in missing["absent"]] == ["vcruntime140_1.dll"]
    # present, but failed because they import it (docs/field-notes.md#import-graph)
    cascades = {name.lower() for name in missing["cascades"]}
    assert {"msvcp140.dll", "msvcp140_1.dll", "onnxruntime.dll"} <= cascades, missing
    assert runs_of(data)["hello.exe"]["exit_code"] != 0
    assert proof["agrees"] is True
    assert {"BA101", "BA105"} <= codes(data) and not codes(data) & {"BA501", "BA502"}


# --- disagreements, made for real -----------------------------------------------------------------


def test_a_system_dll_wine_lacks_is_an_error(
    wine: Wine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = synthetic_app(tmp_path / "app", "cryptbase.dll")
    report = audit(app, GPU)
    item = report.plan.file("cryptbase.dll")
    assert item is not None and item.status is Status.SYSTEM  # what makes this a disagreement
    assert not [f for f in report.findings if "cryptbase.dll" in f.files]
    monkeypatch.setenv("WINEPREFIX", str(wine.prefix))
    proved = prove_load(report)
    proof = proved.load_proof
    assert proof is not None
    assert proof.loader_only == ("cryptbase.dll",) and proof.audit_only == ()
    assert not proof.agrees
    (disagreement,) = [f for f in proved.findings if f.code == "BA501"]
    assert disagreement.severity is Severity.ERROR and disagreement.files == ("cryptbase.dll",)
    assert "counts it as part of Windows" in disagreement.message
    assert any("Library cryptbase.dll (which is needed by" in line for line in disagreement.details)
    assert proved.findings[0].severity is Severity.ERROR  # still sorted errors first
    assert "DISAGREES" in proof.summary_lines()[-1]


def test_a_wine_builtin_hiding_a_missing_dll_is_a_warning(
    wine: Wine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = synthetic_app(tmp_path / "app", "msvcr120.dll")
    report = audit(app, GPU)
    assert [f.code for f in report.findings if "msvcr120.dll" in f.files] == ["BA101"]
    monkeypatch.setenv("WINEPREFIX", str(wine.prefix))
    proved = prove_load(report)
    proof = proved.load_proof
    assert proof is not None
    (run,) = proof.runs
    assert run.lines == () and run.exit_code == 1  # started: the entry point returns 1
    assert proof.audit_only == ("msvcr120.dll",) and proof.loader_only == ()
    (warning,) = [f for f in proved.findings if f.code == "BA502"]
    assert warning.severity is Severity.WARNING and warning.files == ("msvcr120.dll",)
    json.dumps(proved.to_dict())  # the whole report stays JSON-able


# --- limits ---------------------------------------------------------------------------------------


def test_a_run_past_its_time_limit_is_stopped_with_the_private_wineserver(
    private_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_wine()
    monkeypatch.delenv("WINEPREFIX", raising=False)
    app = synthetic_app(tmp_path / "app")
    notes: list[str] = []
    proved = prove_load(audit(app, GPU), timeout=0.001, cache_dir=private_cache, note=notes.append)
    proof = proved.load_proof
    assert proof is not None
    (run,) = proof.runs
    assert run.exit_code is None and "stopped" in run.verdict
    assert proof.to_dict()["runs"][0]["timed_out"] is True
    assert processes_in(private_cache / "wineprefix") == []  # the server was killed, not left
    assert "stopped at the time limit" in proof.summary_lines()[-1]


def test_a_run_past_its_time_limit_leaves_a_users_prefix_running(
    wine: Wine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = synthetic_app(tmp_path / "app")
    monkeypatch.setenv("WINEPREFIX", str(wine.prefix))
    proved = prove_load(audit(app, GPU), timeout=0.001)
    assert proved.load_proof is not None and proved.load_proof.runs[0].exit_code is None
    assert processes_in(wine.prefix, naming="tool.exe") == []
    assert processes_in(wine.prefix, naming="wineserver") != []  # the user's server stays


@pytest.mark.skipif(os.name == "nt", reason="Windows is a loader of its own")
def test_run_without_a_loader_is_a_clear_error(tmp_path: Path) -> None:
    app = synthetic_app(tmp_path / "app")
    no_wine = str(Path(sys.executable).parent)
    assert shutil.which("wine", path=no_wine) is None
    command = [sys.executable, "-m", "bundler", "audit", str(app), "--run"]
    result = subprocess.run(command, capture_output=True, text=True, env=bundle_env(PATH=no_wine))
    assert result.returncode == 19, result.stderr
    assert "--run needs a Windows loader" in result.stderr
    assert "Traceback" not in result.stderr


INSTALLER_DLL = r"""
#include <windows.h>
/* Leaves a mark in the current folder when run: what loading must never do. */
__declspec(dllexport) HRESULT __stdcall DllInstall(BOOL install, LPCWSTR line)
{
    HANDLE h = CreateFileW(L"dllinstall-ran.txt", GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, 0, NULL);
    if (h != INVALID_HANDLE_VALUE)
        CloseHandle(h);
    return S_OK;
}
"""
PLAIN_DLL = "__declspec(dllexport) int plain(void) { return 1; }\n"


def compile_dll(source: str, target: Path) -> Path:
    c_file = target.with_suffix(".c")
    c_file.write_text(source)
    compile_c(c_file, target, "-shared", "-s")
    c_file.unlink()
    return target


@pytest.mark.mingw
def test_a_root_exporting_dllinstall_is_not_loaded(
    wine: Wine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """regsvr32 /n /i runs DllInstall when a DLL has one: the proof must not run it."""
    folder = tmp_path / "dlls"
    folder.mkdir()
    # Two of the GPU profile's roots, loaded at run time when present.
    compile_dll(INSTALLER_DLL, folder / "onnxruntime_providers_shared.dll")
    compile_dll(PLAIN_DLL, folder / "onnxruntime.dll")
    monkeypatch.setenv("WINEPREFIX", str(wine.prefix))
    proof = prove_load(audit(folder, GPU)).load_proof
    assert proof is not None
    assert [(run.target, run.verdict) for run in proof.runs] == [("onnxruntime.dll", "loaded")]
    assert [name for name, _ in proof.skipped] == ["onnxruntime_providers_shared.dll"]
    assert not (folder / "dllinstall-ran.txt").exists()
    # What the guard prevents: regsvr32 itself does run it.
    wine.program("regsvr32", "/s", "/n", "/i", "onnxruntime_providers_shared.dll", cwd=folder)
    assert (folder / "dllinstall-ran.txt").exists()
