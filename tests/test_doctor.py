"""bundle-doctor.exe (doctor/), the native checker that ships with a bundle, run for real under
Wine against the real GPU bundle that `bundle build --link` makes for examples/hello.

The machine is faked where Wine has nothing: the stand-in nvcuda.dll
(tests/fixtures/standins/nvcuda.c) goes into the prefix's System32 and reports the GPUs of
BUNDLE_STANDIN_GPUS and the CUDA version of BUNDLE_STANDIN_CUDA. The prefix is the session's
(the `wine` fixture), shared with other modules: every file a test puts into System32 is
removed when it ends. Modified bundles are hard-linked copies; a file a test changes is copied
first, never changed through a link.

`bundle build` ships the doctor (bundler/data/bundle-doctor.exe, which must be doctor/build.sh's
output byte for byte) and writes its data file. Wine cannot initialise
onnxruntime_providers_cuda.dll (error 998 after all its imports were found,
docs/field-notes.md#driver), so the data files of the "healthy machine" runs are the product's
renderer on the lock without that load record (tests/support/doctor.py);
test_the_cuda_provider_fails_under_wine_with_998 runs the bundle exactly as built.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bundler.closure.lock import (
    DOCTOR_DATA,
    LOCK_NAME,
    PACK_MARKER,
    Lock,
    LockedEp,
    PrunedFile,
    RuntimePack,
)
from bundler.closure.lockfile import read_lock
from bundler.findings import CATALOGUE
from bundler.render.doctor_dat import doctor_data
from bundler.target.resources import doctor_exe as shipped_doctor_exe
from tests.support import doctor as data
from tests.support.builds import linked_copy
from tests.support.cache_links import RELEASES, kept_cache
from tests.support.display import LAVAPIPE
from tests.support.doctor import DRIVER_516, DRIVER_551, DRIVER_581, Machine
from tests.support.mingw import run_build_script
from tests.support.paths import HELLO, REPO
from tests.support.runs import pip_env
from tests.support.skips import require
from tests.support.wine import NATIVE_VC_RUNTIME, Wine, program_stderr

pytestmark = pytest.mark.real_tools

PROVIDER = "onnxruntime_providers_cuda.dll"
NO_PROVIDER = (PROVIDER,)
ALLOWED_IMPORTS = {"kernel32.dll", "advapi32.dll", "bcrypt.dll", "version.dll", "msvcrt.dll"}
DATA_ERROR = 22
ALL_CUDNN = tuple(
    f"cudnn_{name}64_9.dll"
    for name in (
        "graph",
        "ops",
        "cnn",
        "adv",
        "engines_precompiled",
        "engines_runtime_compiled",
        "heuristic",
    )
)
# Two runtime packs (issue 32): the lock's, and another release's.
PACK_SHA = hashlib.sha256(b"the runtime of release 1").hexdigest()
OTHER_SHA = hashlib.sha256(b"the runtime of release 2").hexdigest()


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped(gpu_bundle: Path, doctor_exe: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle as a customer gets it (a hard-linked copy), its data file without the load
    record of the CUDA provider, which Wine cannot initialise."""
    folder = linked_copy(gpu_bundle, tmp_path_factory.mktemp("shipped") / "app", without="")
    data.write(folder, skip_loads=NO_PROVIDER)
    return folder


@pytest.fixture
def machine(wine: Wine, standins: Path) -> Iterator[Machine]:
    with Machine(wine, standins) as state:
        yield state


def run(
    wine: Wine,
    exe: Path,
    *args: str,
    gpus: str | None = None,
    cuda: str | None = None,
    overrides: str = NATIVE_VC_RUNTIME,
    path: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """bundle-doctor.exe under Wine, run from its folder, the stand-in driver told what to be.
    `path`: Windows folders Wine puts in front of the process's PATH (WINEPATH); without it the
    PATH is the prefix's own (System32, the Windows folder, ...)."""
    told = {"BUNDLE_STANDIN_GPUS": gpus, "BUNDLE_STANDIN_CUDA": cuda, "WINEPATH": path}
    return wine.program(exe, *args, cwd=exe.parent, overrides=overrides, env=told, timeout=300)


def report(wine: Wine, exe: Path, *args: str, **kwargs: Any) -> tuple[dict[str, Any], int]:
    result = run(wine, exe, "--json", *args, **kwargs)
    assert result.stdout, result.stderr
    document = json.loads(result.stdout)
    assert document["exit_code"] == result.returncode
    return document, result.returncode


def findings(document: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [item for item in document["findings"] if item["code"] == code]


def codes(document: dict[str, Any]) -> list[str]:
    return [item["code"] for item in document["findings"]]


# --- the program itself ---------------------------------------------------------------------


def test_build_is_reproducible_and_imports_only_windows_dlls(
    doctor_exe: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "copy of the sources"
    shutil.copytree(REPO / "doctor", elsewhere / "doctor")
    again = run_build_script(elsewhere / "doctor" / "build.sh", tmp_path / "b")
    assert (again / "bundle-doctor.exe").read_bytes() == doctor_exe.read_bytes()
    # The exe the package ships is exactly what its sources build.
    assert shipped_doctor_exe().read_bytes() == doctor_exe.read_bytes()
    assert b"copy of the sources" not in doctor_exe.read_bytes()
    dump = subprocess.run(
        ["x86_64-w64-mingw32-objdump", "-p", str(doctor_exe)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    imported = {
        line.split(":", 1)[1].strip().lower() for line in dump.splitlines() if "DLL Name:" in line
    }
    assert imported and imported <= ALLOWED_IMPORTS, imported


def test_usage(wine: Wine, doctor_exe: Path) -> None:
    helped = run(wine, doctor_exe, "--help")
    assert helped.returncode == 0 and "usage: bundle-doctor.exe" in helped.stdout
    wrong = run(wine, doctor_exe, "--frobnicate")
    assert wrong.returncode == 2
    assert "unknown argument: --frobnicate" in wrong.stderr and "usage:" in wrong.stderr
    assert "--eps" in helped.stdout and "ep<TAB>NAME<TAB>yes|no<TAB>REASON" in helped.stdout
    assert "--packs      the old spelling of --eps" in helped.stdout
    for flag in ("--eps", "--packs"):
        mixed = run(wine, doctor_exe, flag, "--json")
        assert mixed.returncode == 2 and f"{flag} goes with --data alone" in mixed.stderr


# --- a healthy machine ----------------------------------------------------------------------


@pytest.mark.realdata
def test_a_supported_gpu_with_a_new_driver_finds_nothing(
    wine: Wine, machine: Machine, shipped: Path
) -> None:
    machine.driver()
    document, code = report(wine, shipped / "bundle-doctor.exe", gpus="sm_86")
    assert code == 0, document["findings"]
    assert document["findings"] == []
    assert document["schema_version"] == 1 and document["tool"] == "bundle-doctor"
    assert document["profile"] == "ort-1.19.2-gpu-cuda12"
    assert document["folder"].lower().endswith(shipped.name.lower())
    assert document["machine"]["driver"] == {
        "dll_version": DRIVER_551,
        "driver_version": "551.61",
        "cuda_driver_version": "12.4",
    }
    assert document["machine"]["gpus"] == [
        {"name": "Stand-in GPU sm_86", "capability": "8.6", "sm": "sm_86", "memory_mb": 12288}
    ]
    assert document["summary"] == {"error": 0, "warning": 0, "info": 0}
    # the build's own folder: the lock's runtime pack, no bundle-pack.txt (no setup ran)
    lock = read_lock(shipped / LOCK_NAME)
    assert lock is not None and lock.runtime_pack is not None
    no_setup = {"lock": lock.runtime_pack.sha256, "installed": None, "matches": False}
    assert document["runtime_pack"] == no_setup
    text = run(wine, shipped / "bundle-doctor.exe", gpus="sm_86")
    assert text.returncode == 0
    assert "NVIDIA driver 551.61" in text.stdout and "sm_86" in text.stdout
    assert "0 errors, 0 warnings, 0 info" in text.stdout


@pytest.mark.realdata
def test_the_cuda_provider_fails_under_wine_with_998(
    wine: Wine, machine: Machine, gpu_bundle: Path
) -> None:
    machine.driver()
    document, code = report(wine, gpu_bundle / "bundle-doctor.exe", gpus="sm_86")
    assert code == 17
    [failed] = findings(document, "BA806")
    assert failed["files"] == [PROVIDER] and "error 998" in failed["message"]
    assert codes(document) == ["BA806"]


@pytest.mark.realdata
def test_the_doctor_needs_no_vc_runtime(wine: Wine, machine: Machine, shipped: Path) -> None:
    """The VC++ runtime DLLs disabled (ucrtbase stays: Wine's own DLLs need it; that the doctor
    does not import it is what the objdump test shows). ORT needs the runtime, so nothing is
    loaded here."""
    machine.driver()
    bare = data.write(shipped, name="no-loads.dat", loads=())
    document, code = report(
        wine,
        shipped / "bundle-doctor.exe",
        "--data",
        str(bare),
        gpus="sm_86",
        overrides="vcruntime140,vcruntime140_1,msvcp140,msvcp140_1=",
    )
    assert code == 0, document["findings"]
    assert document["machine"]["gpus"][0]["sm"] == "sm_86"


# --- GPUs and the driver ----------------------------------------------------------------------


@pytest.mark.realdata
def test_newer_gpus_run_the_provider_only_through_ptx_jit(
    wine: Wine, machine: Machine, shipped: Path
) -> None:
    machine.driver()
    document, code = report(wine, shipped / "bundle-doctor.exe", gpus="sm_90,sm_120")
    assert code == 0  # a warning
    jit = findings(document, "BA702")
    assert [item["severity"] for item in jit] == ["warning", "warning"]
    for item, sm in zip(jit, ("sm_90", "sm_120"), strict=True):
        assert PROVIDER in item["files"]
        assert sm in item["message"] and "CUDA_CACHE_MAXSIZE" in item["message"]
        assert any("compute_80 PTX" in line for line in item["details"]), item
    # cuBLAS 12.4 and cuDNN 9.1 carry sm_90 SASS: on Hopper only ORT's own kernels need the JIT
    assert jit[0]["files"] == [PROVIDER]
    assert "cublasLt64_12.dll" in jit[1]["files"]  # its newest SASS is sm_90: 12.0 JITs too


@pytest.mark.realdata
def test_an_old_gpu_is_unserved(wine: Wine, machine: Machine, shipped: Path) -> None:
    machine.driver()
    document, code = report(wine, shipped / "bundle-doctor.exe", gpus="sm_35")
    assert code == 17
    [item] = findings(document, "BA701")
    assert item["severity"] == "error" and PROVIDER in item["files"]
    assert "sm_35" in item["message"] and PROVIDER in item["message"]
    assert "cufft64_11.dll" not in item["files"]  # not judged by its fat binary


@pytest.mark.realdata
def test_sm_80_has_no_code_in_the_1_22_provider(
    wine: Wine, machine: Machine, shipped: Path
) -> None:
    machine.driver()
    newer = data.write(shipped, data.PROVIDER_1_22_0, name="ort-1.22.dat", skip_loads=NO_PROVIDER)
    document, code = report(wine, shipped / "bundle-doctor.exe", "--data", str(newer), gpus="sm_80")
    assert code == 17
    [item] = findings(document, "BA701")
    assert item["files"] == [PROVIDER] and "sm_80" in item["message"]
    assert any("SASS sm_52,sm_61,sm_75,sm_86,sm_89, PTX sm_90" in d for d in item["details"])


@pytest.mark.realdata
def test_a_real_1_22_0_bundle_has_no_code_for_sm_80(
    wine: Wine, machine: Machine, gpu_cache: Path, tmp_path: Path
) -> None:
    """The ORT 1.22.0 GPU bundle as `bundle build --ort 1.22.0` makes it: its lock holds the
    provider's code as read from the real DLL, and the doctor finds none for an A100 (8.0).
    Built from the kept cache of released wheels (tests/support/cache_links.kept_cache): 1.22.0's
    own wheels are fetched and verified on a first run only."""
    out, cache = tmp_path / "dist", kept_cache(RELEASES, seed=gpu_cache)
    built = subprocess.run(
        [sys.executable, "-m", "bundler", "build", str(HELLO), "--ort", "1.22.0", "--out",
         str(out), "--cache-dir", str(cache), "--link"],
        capture_output=True, text=True, env={**os.environ, "BUNDLE_DEBUG": "", **pip_env()},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    machine.driver()
    document, code = report(wine, out / "bundle-doctor.exe", gpus="sm_80")
    assert code == 17
    [item] = findings(document, "BA701")
    assert PROVIDER in item["files"] and "sm_80" in item["message"]
    # docs/field-notes.md#gpu-code: SASS sm_52 61 75 86 89, PTX sm_90 (cuobjdump, every blob)
    provider = next(line for line in item["details"] if line.startswith(PROVIDER))
    assert "sm_52,sm_61,sm_75,sm_86,sm_89" in provider and "PTX sm_90" in provider


@pytest.mark.realdata
def test_an_old_driver_is_too_old(wine: Wine, machine: Machine, shipped: Path) -> None:
    machine.driver(DRIVER_516)
    document, code = report(wine, shipped / "bundle-doctor.exe", gpus="sm_86", cuda="11080")
    assert code == 17
    old = findings(document, "BA802")
    assert "516.94" in old[0]["message"] and "527.41" in old[0]["message"]
    assert "CUDA 11.8" in old[1]["message"]
    assert document["machine"]["driver"]["driver_version"] == "516.94"


@pytest.mark.realdata
def test_no_driver(wine: Wine, machine: Machine, shipped: Path) -> None:
    document, code = report(wine, shipped / "bundle-doctor.exe", gpus="sm_86")
    assert code == 17
    assert codes(document) == ["BA801"]
    assert document["machine"]["driver"] is None and document["machine"]["gpus"] == []
    assert "527.41" in document["findings"][0]["message"]


@pytest.mark.realdata
def test_a_driver_without_a_gpu(wine: Wine, machine: Machine, shipped: Path) -> None:
    machine.driver()
    empty, code = report(wine, shipped / "bundle-doctor.exe", gpus="")
    assert code == 17 and codes(empty) == ["BA803"]
    assert "no CUDA device" in empty["findings"][0]["message"]
    failing, code = report(wine, shipped / "bundle-doctor.exe")  # cuInit fails
    assert code == 17 and codes(failing) == ["BA803"]
    assert "CUDA error 100 (CUDA_ERROR_NO_DEVICE)" in failing["findings"][0]["message"]


# --- the folder -------------------------------------------------------------------------------


@pytest.mark.realdata
def test_a_deleted_cudnn_sub_library(
    wine: Wine, machine: Machine, gpu_bundle: Path, doctor_exe: Path, tmp_path: Path
) -> None:
    folder = linked_copy(gpu_bundle, tmp_path / "app", without="cudnn_ops64_9.dll")
    data.write(folder, skip_loads=NO_PROVIDER)
    machine.driver()
    document, code = report(wine, folder / "bundle-doctor.exe", gpus="sm_86")
    assert code == 17
    [removed] = findings(document, "BA402")
    assert removed["files"] == ["cudnn_ops64_9.dll"]
    failed = {item["files"][0]: item for item in findings(document, "BA806")}
    assert "missing from the folder" in failed["cudnn_ops64_9.dll"]["message"]
    for importer in ("cudnn_cnn64_9.dll", "cudnn_adv64_9.dll"):
        item = failed[importer]
        assert "error 126" in item["message"] and "cudnn_ops64_9.dll is missing" in item["message"]
        assert item["details"] == [f"{importer} -> cudnn_ops64_9.dll"]
        assert item["files"] == [importer, "cudnn_ops64_9.dll"]


@pytest.mark.realdata
def test_verify_finds_a_flipped_byte(
    wine: Wine, machine: Machine, gpu_bundle: Path, doctor_exe: Path, tmp_path: Path
) -> None:
    changed = "cudnn_graph64_9.dll"
    folder = linked_copy(gpu_bundle, tmp_path / "app", without=changed)
    shutil.copyfile(gpu_bundle / changed, folder / changed)  # a copy: the cache stays intact
    with (folder / changed).open("r+b") as file:
        file.seek(4096)
        byte = file.read(1)
        file.seek(4096)
        file.write(bytes([byte[0] ^ 0xFF]))
    data.write(folder, skip_loads=NO_PROVIDER + ALL_CUDNN)  # a corrupt DLL need not load
    machine.driver()
    plain, code = report(wine, folder / "bundle-doctor.exe", gpus="sm_86")
    assert code == 0 and findings(plain, "BA401") == []  # same size: only --verify sees it
    verified, code = report(wine, folder / "bundle-doctor.exe", "--verify", gpus="sm_86")
    assert code == 17
    [item] = findings(verified, "BA401")
    assert item["files"] == [changed] and "SHA-256" in item["message"]


@pytest.mark.realdata
def test_another_onnxruntime_in_system32(
    wine: Wine, machine: Machine, standins: Path, shipped: Path
) -> None:
    machine.driver()
    machine.place(standins / "onnxruntime-1.17.1.0" / "onnxruntime.dll")
    document, code = report(wine, shipped / "bundle-doctor.exe", gpus="sm_86")
    assert code == 0  # a warning; the app loads its own copy by full path
    [item] = findings(document, "BA804")
    assert item["files"] == ["onnxruntime.dll"]
    assert "System32 has 1.17.1.0" in item["message"] and "1.19.24.903" in item["message"]


@pytest.mark.realdata
def test_another_ort_version_than_the_data_says(
    wine: Wine, machine: Machine, shipped: Path
) -> None:
    machine.driver()
    other = data.write(shipped, name="other-ort.dat", skip_loads=NO_PROVIDER, ort_version="1.20.1")
    document, code = report(wine, shipped / "bundle-doctor.exe", "--data", str(other), gpus="sm_86")
    assert code == 17
    [item] = findings(document, "BA807")
    assert "1.19.2" in item["message"] and "1.20.1" in item["message"]


# --- DLLs the build left out for the app's models (--model) ---------------------------------

CNN = "cudnn_cnn64_9.dll"


def windows_path(path: Path) -> str:
    """The folder as the Windows process sees it: Wine maps / to Z:."""
    return "Z:" + str(path).replace("/", "\\")


@pytest.fixture
def pruned_app(doctor_exe: Path, tmp_path: Path) -> Path:
    """A bundle folder with the doctor and a data file the product renders from a lock that
    left cudnn_cnn64_9.dll out (as `bundle build --model` does); no DLL of its own."""
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copyfile(doctor_exe, folder / "bundle-doctor.exe")
    lock = Lock(
        profile="ort-1.19.2-gpu-cuda12",
        architecture="x64",
        vc_runtime="app-local",
        files=(),
        pruned=(PrunedFile(CNN, 1, "no model op runs a convolution"),),
    )
    (folder / DOCTOR_DATA).write_text(doctor_data(lock), encoding="utf-8")
    return folder


def test_a_pruned_dll_on_path_is_a_warning(
    wine: Wine, machine: Machine, pruned_app: Path, tmp_path: Path
) -> None:
    foreign = tmp_path / "other cudnn"
    foreign.mkdir()
    (foreign / CNN).write_bytes(b"MZ not the bundle's cuDNN")
    decoy = tmp_path / "decoy"
    (decoy / CNN).mkdir(parents=True)  # a folder of that name is no DLL
    shown = windows_path(foreign / CNN)
    # quoted with a trailing '\', an empty entry, listed twice in another case: one copy
    path = f'"{windows_path(foreign)}\\";;{windows_path(decoy)};{windows_path(foreign).upper()}'
    exe = pruned_app / "bundle-doctor.exe"
    document, code = report(wine, exe, path=path)
    assert code == 0, document["findings"]  # a warning
    [item] = findings(document, "BA808")
    assert codes(document) == ["BA808"]
    assert item["severity"] == "warning" and item["name"] == "pruned-dll-shadowed"
    assert item["files"] == [CNN]
    assert item["message"].startswith(f"{CNN}: the bundle left it out for its models")
    assert shown in item["message"]
    assert [line.lower() for line in item["details"]] == [shown.lower()]
    assert document["summary"] == {"error": 0, "warning": 1, "info": 0}
    # --gpu-only checks the driver and the GPUs alone
    gpu_only, code = report(wine, exe, "--gpu-only", path=path)
    assert code == 0 and findings(gpu_only, "BA808") == []
    # System32 comes first in the search order: its copy is the one named, PATH's a detail
    machine.place(foreign / CNN)
    both, code = report(wine, exe, path=path)
    [item] = findings(both, "BA808")
    system_copy = "c:\\windows\\system32\\" + CNN  # GetSystemDirectoryW in the prefix
    assert [line.lower() for line in item["details"]] == [system_copy, shown.lower()]
    assert item["details"][0] in item["message"]


def test_a_pruned_dll_nowhere_finds_nothing(wine: Wine, pruned_app: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    # A copy in the bundle's own folder (on PATH too) is no foreign copy: not looked at.
    (pruned_app / CNN).write_bytes(b"MZ")
    path = f"{windows_path(empty)};{windows_path(pruned_app)}"
    document, code = report(wine, pruned_app / "bundle-doctor.exe", path=path)
    assert code == 0
    assert document["findings"] == [], document["findings"]


# --- a bad data file --------------------------------------------------------------------------


def good_data() -> bytes:
    lines = [
        ("bundle-doctor-data", "2"),
        ("tool", "0.1.0"),
        ("profile", "ort-1.19.2-cpu"),
        *(("check", *row) for row in data.CHECKS),
        ("file", "5", "f" * 64, "license", "licenses/ort/LICENSE"),
    ]
    return data.seal(lines)


def edit_a_line(good: bytes) -> bytes:
    return good.replace(b"ort-1.19.2-cpu", b"ort-1.19.9-cpu")


def unknown_record(good: bytes) -> bytes:
    body = good[: good.rindex(b"end\t")].decode() + "colour\tblue\n"
    return data.seal([tuple(line.split("\t")) for line in body.splitlines()])


def with_pruned(name: str) -> Callable[[bytes], bytes]:
    """`good` with a `pruned` record for `name` after its records, sealed again."""

    def make(good: bytes) -> bytes:
        body = good[: good.rindex(b"end\t")].decode() + f"pruned\t{name}\n"
        return data.seal([tuple(line.split("\t")) for line in body.splitlines()])

    return make


BAD_DATA: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda good: good[: len(good) // 2],
    "edited": edit_a_line,
    "wrong first line": lambda good: data.seal([("bundle-doctor-data", "1"), ("tool", "0.1.0")]),
    "unknown record": unknown_record,
    "empty": lambda good: b"",
    "binary": lambda good: bytes(range(256)) * 4,
    "no end line": lambda good: good[: good.rindex(b"end\t")],
    "CRLF line ends": lambda good: good.replace(b"\n", b"\r\n"),
    "a size that is no number": lambda good: resealed(good, b"file\t5\t", b"file\tfive\t"),
    "a record a field short": lambda good: resealed(good, b"\tlicense\t", b"\t"),
    "no profile record": lambda good: resealed(good, b"profile\tort-1.19.2-cpu\n", b""),
    "a pruned record with a folder": with_pruned("..\\x.dll"),
    "a pruned record with a posix folder": with_pruned("sub/x.dll"),
    "a pruned record with a drive": with_pruned("C:x.dll"),
    "an empty pruned record": with_pruned(""),
    "a pruned record before a file record": lambda good: resealed(
        good, b"file\t", b"pruned\tx.dll\nfile\t"
    ),
    "a pack with an unknown probe": lambda good: with_pack(good, probe="amd-gpu"),
    "a pack whose plugin is outside its folder": lambda good: with_pack(
        good, plugin="ep/webgpux/onnxruntime_providers_webgpu.dll"
    ),
    "a pack with a bad minimum capability": lambda good: with_pack(good, capability="sm_80"),
    "a pack with a bad minimum driver": lambda good: with_pack(good, driver="580"),
    "a pack that needs nothing": lambda good: with_pack(good, needs=""),
    "a pack record a field short (no minimum ORT: format 1)": lambda good: with_pack(
        good, min_ort=None
    ),
    "a pack with a bad minimum ORT": lambda good: with_pack(good, min_ort="latest"),
    "a pack listed twice": lambda good: data.with_packs(
        good.decode(), (data.WEBGPU_PACK, data.WEBGPU_PACK)
    ),
    "an ep record before a file record": lambda good: resealed(
        data.with_packs(good.decode(), (data.WEBGPU_PACK,)),
        b"file\t",
        "\t".join(("ep", *data.WEBGPU_PACK)).encode() + b"\nfile\t",
    ),
    "an old pack record before a file record": lambda good: resealed(
        data.with_packs(good.decode(), (data.WEBGPU_PACK,), kind="pack"),
        b"file\t",
        "\t".join(("pack", *data.WEBGPU_PACK)).encode() + b"\nfile\t",
    ),
    "an ep and an old pack record for one pack": lambda good: resealed(
        data.with_packs(good.decode(), (data.WEBGPU_PACK,)),
        b"\nep\t",
        ("\n" + "\t".join(("pack", *data.WEBGPU_PACK)) + "\nep\t").encode(),
    ),
    "a runtime pack in upper case": lambda good: data.with_runtime_pack(good, PACK_SHA.upper()),
    "a runtime pack of 16 digits": lambda good: data.with_runtime_pack(good, PACK_SHA[:16]),
    "an empty runtime pack": lambda good: data.with_runtime_pack(good, ""),
    "a runtime pack record a field long": lambda good: data.with_runtime_pack(
        good, f"{PACK_SHA}\t{OTHER_SHA}"
    ),
    "a runtime pack listed twice": lambda good: data.with_runtime_pack(
        data.with_runtime_pack(good, PACK_SHA), OTHER_SHA
    ),
    "a runtime pack before an ep record": lambda good: data.with_packs(
        data.with_runtime_pack(good, PACK_SHA).decode(), (data.WEBGPU_PACK,)
    ),
}


def with_pack(
    good: bytes,
    *,
    probe: str = "d3d12",
    plugin: str = data.WEBGPU_PACK[2],
    capability: str = "-",
    driver: str = "-",
    needs: str = "a D3D12 GPU",
    min_ort: str | None = "1.24.4",
) -> bytes:
    """`good` with one webgpu pack record, its fields as given (min_ort None: left out)."""
    fields = ("webgpu", "ep/webgpu", plugin, probe, capability, driver, needs)
    return data.with_packs(good.decode(), (fields if min_ort is None else (*fields, min_ort),))


def resealed(good: bytes, old: bytes, new: bytes) -> bytes:
    """`good` with one edit and a digest that matches it: only the format check can refuse it."""
    body = good[: good.rindex(b"end\t")].replace(old, new, 1).decode()
    assert body != good[: good.rindex(b"end\t")].decode(), old
    return data.seal([tuple(line.split("\t")) for line in body.splitlines()])


def test_bad_data_files_exit_22_with_one_line(wine: Wine, doctor_exe: Path, tmp_path: Path) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    exe = folder / "bundle-doctor.exe"
    shutil.copyfile(doctor_exe, exe)
    dat = folder / "bundle-doctor.dat"
    missing = run(wine, exe)
    assert missing.returncode == DATA_ERROR and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "bundle-doctor.dat: not found" in missing.stderr
    (folder / "licenses" / "ort").mkdir(parents=True)
    (folder / "licenses" / "ort" / "LICENSE").write_bytes(b"12345")
    dat.write_bytes(good_data())
    good = run(wine, exe)
    assert good.returncode == 0, (good.stdout, good.stderr)  # the SHA-256 is checked with --verify
    for case, make in BAD_DATA.items():
        dat.write_bytes(make(good_data()))
        result = run(wine, exe)
        assert result.returncode == DATA_ERROR, (case, result.stdout, result.stderr)
        assert result.stdout == "", case
        assert result.stderr.count("\n") == 1, (case, result.stderr)
        assert "bundle-doctor.dat: " in result.stderr, case
        assert "rebuild the bundle with bundle build" in result.stderr, (case, result.stderr)
    dat.write_bytes(edit_a_line(good_data()))
    assert "edited or truncated" in run(wine, exe).stderr
    dat.write_bytes(BAD_DATA["a record a field short"](good_data()))  # what it has, then wants
    assert "a file record has 4 TAB-separated fields, not 5" in run(wine, exe).stderr
    dat.write_bytes(with_pruned("..\\x.dll")(good_data()))
    assert "not a plain DLL file name" in run(wine, exe).stderr
    dat.write_bytes(with_pruned("x.dll")(good_data()))  # a plain name: a valid data file
    assert run(wine, exe).returncode == 0
    dat.write_bytes(with_pack(good_data(), probe="vulkan"))
    for args in ((), ("--eps",), ("--packs",)):
        refused = run(wine, exe, *args)
        assert refused.returncode == DATA_ERROR and refused.stdout == "", args
        assert "the probe 'vulkan' of the EP webgpu is not nvidia-cuda" in refused.stderr
    dat.write_bytes(with_pack(good_data()))  # a valid ep record
    assert run(wine, exe, "--eps").returncode == 0
    dat.write_bytes(data.with_runtime_pack(good_data(), PACK_SHA.upper()))
    refused = run(wine, exe)
    assert refused.returncode == DATA_ERROR
    assert "the runtime pack's SHA-256 is not 64 lowercase hex digits" in refused.stderr
    dat.write_bytes(data.with_runtime_pack(good_data(), PACK_SHA))  # valid; no bundle-pack.txt
    assert run(wine, exe).returncode == 0


def test_the_data_file_format_is_what_the_helper_writes() -> None:
    """The contract in doctor/README.md, checked on the helper's own output."""
    text = good_data().decode()
    lines = text.split("\n")
    assert lines[0] == "bundle-doctor-data\t2" and lines[-1] == ""
    body, end = text[: text.rindex("end\t")], lines[-2]
    assert end == "end\t" + hashlib.sha256(body.encode()).hexdigest()
    assert "\r" not in text


# --- execution-provider packs (bundle build --ep) ---------------------------------------------

NV_PLUGIN = data.NV_PACK[2]
CPU_VENDOR = next(
    line.split(":", 1)[1].strip()
    for line in Path("/proc/cpuinfo").read_text().splitlines()
    if line.startswith("vendor_id")
)
INTEL_CPU = CPU_VENDOR == "GenuineIntel"
# Wine 8.0 without an X display: DXGI has no adapter at all (DXGI_ERROR_UNSUPPORTED).
NO_DXGI = "CreateDXGIFactory1 failed with HRESULT 0x887a0004"


def pack_lines(
    result: subprocess.CompletedProcess[str], head: str = "ep"
) -> dict[str, tuple[str, str]]:
    """--eps' output by pack name: (yes|no, reason), every line checked for its format (its
    first field `head`: "pack" for --packs, the flag's old spelling)."""
    stderr = program_stderr(result.stderr)
    assert result.returncode == 0 and stderr == "", (result.returncode, result.stderr)
    lines = result.stdout.split("\n")  # CRLF read as LF (text mode)
    assert lines[-1] == "", result.stdout
    verdicts = {}
    for line in lines[:-1]:
        kind, name, usable, reason = line.split("\t")
        assert kind == head and usable in ("yes", "no") and reason, line
        verdicts[name] = (usable, reason)
    return verdicts


CPU_LOCK = Lock(profile="ort-1.31.1-cpu", architecture="x64", vc_runtime="app-local", files=())


@pytest.fixture
def cpu_app(doctor_exe: Path, tmp_path: Path) -> Path:
    """A folder with the doctor and the data file of a CPU bundle (no `driver` record) with
    the three packs, none of whose folders is there: --eps judges the machine alone."""
    folder = tmp_path / "setup temp"
    folder.mkdir()
    shutil.copyfile(doctor_exe, folder / "bundle-doctor.exe")
    text = doctor_data(CPU_LOCK)
    assert "\ndriver\t" not in text
    (folder / DOCTOR_DATA).write_bytes(data.with_packs(text))
    return folder


def test_packs_judges_the_tensorrt_rtx_pack_by_driver_and_gpu(
    wine: Wine, standins: Path, cpu_app: Path
) -> None:
    """The TensorRT RTX pack alone (`--data`): the DXGI probes of the others make Wine start
    its desktop process, which holds the run's pipes for some 10 s after the doctor exits."""
    nv_only = cpu_app / "nv-only.dat"
    nv_only.write_bytes(data.with_packs(doctor_data(CPU_LOCK), (data.NV_PACK,)))
    exe = cpu_app / "bundle-doctor.exe"

    def verdict(gpus: str | None = None) -> tuple[str, str]:
        verdicts = pack_lines(run(wine, exe, "--eps", "--data", str(nv_only), gpus=gpus))
        assert list(verdicts) == ["nv-tensorrt-rtx"]
        return verdicts["nv-tensorrt-rtx"]

    with Machine(wine, standins) as machine:
        machine.driver(DRIVER_581)
        assert verdict("sm_86") == ("yes", "Stand-in GPU sm_86 (sm_86), driver 581.15")
        assert verdict("sm_75") == (
            "no",
            "no NVIDIA GPU of compute capability 8.0 or newer: CUDA device 0 "
            "(Stand-in GPU sm_75) is sm_75 (compute capability 7.5)",
        )
        # any GPU that is new enough will do
        assert verdict("sm_75,sm_120") == ("yes", "Stand-in GPU sm_120 (sm_120), driver 581.15")
        usable, reason = verdict()  # cuInit fails
        assert usable == "no" and "CUDA_ERROR_NO_DEVICE" in reason
    with Machine(wine, standins) as machine:
        machine.driver(DRIVER_551)
        assert verdict("sm_86") == ("no", "the NVIDIA driver 551.61 is older than 580.88")
        usable, reason = verdict("sm_75")
        assert usable == "no" and reason.startswith("the NVIDIA driver 551.61 is older than")
        assert "sm_75 (compute capability 7.5)" in reason  # both reasons
    with Machine(wine, standins) as machine:
        machine.driver(None)
        assert verdict("sm_86") == ("no", "no NVIDIA driver (nvcuda.dll is not in System32)")


def test_the_old_names_keep_working(wine: Wine, machine: Machine, cpu_app: Path) -> None:
    """A data file written before issue 39 names its records `pack`, and a script written then
    calls `--packs`: the doctor reads the one as `ep` records and takes the other as the old
    spelling of `--eps`, whose lines still begin with `pack`."""
    old = cpu_app / "old.dat"
    old.write_bytes(data.with_packs(doctor_data(CPU_LOCK), (data.NV_PACK,), kind="pack"))
    exe = cpu_app / "bundle-doctor.exe"
    machine.driver(DRIVER_581)
    verdict = ("yes", "Stand-in GPU sm_86 (sm_86), driver 581.15")
    new_lines = run(wine, exe, "--eps", "--data", str(old), gpus="sm_86")
    assert pack_lines(new_lines) == {"nv-tensorrt-rtx": verdict}
    old_lines = run(wine, exe, "--packs", "--data", str(old), gpus="sm_86")
    assert pack_lines(old_lines, "pack") == {"nv-tensorrt-rtx": verdict}
    assert old_lines.stdout == "pack" + new_lines.stdout.removeprefix("ep")
    # the full report judges an old record as it judges an ep record: its folder is absent
    document, code = report(wine, exe, "--data", str(old), gpus="sm_86")
    assert code == 0 and codes(document) == ["BA813"]


def test_packs_without_a_display_has_no_dxgi_adapter(wine: Wine, cpu_app: Path) -> None:
    """The session prefix has no X display: Wine 8's DXGI then has no adapter, so no D3D12;
    the Intel probe has only the CPU's vendor."""
    verdicts = pack_lines(run(wine, cpu_app / "bundle-doctor.exe", "--eps"))
    assert list(verdicts) == ["nv-tensorrt-rtx", "openvino", "webgpu"]  # the data file's order
    assert verdicts["webgpu"] == ("no", f"no display adapter for Direct3D 12: {NO_DXGI}")
    if INTEL_CPU:
        assert verdicts["openvino"] == ("yes", "an Intel CPU (GenuineIntel)")
    else:
        assert verdicts["openvino"] == (
            "no",
            f"no Intel CPU or GPU: the CPU is {CPU_VENDOR}; adapters: {NO_DXGI}",
        )


WINE_ADAPTER = "NVIDIA GeForce GTX 470 (0x10de)"  # what Wine 8.0's wined3d reports on Xvfb


def test_d3d12_probe_on_a_display(display_wine: Wine, cpu_app: Path) -> None:
    require(LAVAPIPE.is_file(), f"{LAVAPIPE} is missing (apt-get install mesa-vulkan-drivers)")
    exe = cpu_app / "bundle-doctor.exe"
    told = {"VK_ICD_FILENAMES": str(LAVAPIPE)}
    done = display_wine.program(exe, "--eps", cwd=exe.parent, env=told, timeout=300)
    assert pack_lines(done)["webgpu"] == ("yes", f"Direct3D 12 on {WINE_ADAPTER}")
    # without a Vulkan driver vkd3d creates no device: the adapter and the HRESULT are named
    told = {"VK_ICD_FILENAMES": str(cpu_app / "no-vulkan.json")}
    done = display_wine.program(exe, "--eps", cwd=exe.parent, env=told, timeout=300)
    assert pack_lines(done)["webgpu"] == (
        "no",
        f"no adapter with Direct3D 12 (feature level 11_0): {WINE_ADAPTER}: "
        "D3D12CreateDevice 0x80004005",
    )


DIRECT3D_KEY = "HKCU\\Software\\Wine\\Direct3D"


def test_intel_probe_sees_an_intel_adapter(display_wine: Wine, cpu_app: Path) -> None:
    """wined3d reports the PCI ids VideoPciVendorID / VideoPciDeviceID of DIRECT3D_KEY say, for
    a device its table knows (0x0166, HD Graphics 4000; an unknown one is ignored)."""
    exe = cpu_app / "bundle-doctor.exe"
    verdicts = pack_lines(display_wine.program(exe, "--eps", cwd=exe.parent, timeout=300))
    if INTEL_CPU:
        assert verdicts["openvino"] == ("yes", "an Intel CPU (GenuineIntel)")
    else:
        assert verdicts["openvino"] == (
            "no",
            f"no Intel CPU or GPU: the CPU is {CPU_VENDOR}; adapters: {WINE_ADAPTER}",
        )
    values = (("VideoPciVendorID", "0x8086"), ("VideoPciDeviceID", "0x0166"))
    try:
        for name, value in values:
            added = display_wine.program(
                "reg", "add", DIRECT3D_KEY, "/v", name, "/t", "REG_DWORD", "/d", value, "/f"
            )
            assert added.returncode == 0, added.stderr
        verdicts = pack_lines(display_wine.program(exe, "--eps", cwd=exe.parent, timeout=300))
    finally:
        display_wine.program("reg", "delete", DIRECT3D_KEY, "/f")
    intel_gpu = "Intel GPU: Intel(R) HD Graphics 4000 (0x8086)"
    if INTEL_CPU:
        assert verdicts["openvino"] == ("yes", f"an Intel CPU (GenuineIntel); {intel_gpu}")
    else:
        assert verdicts["openvino"] == ("yes", f"{intel_gpu}; the CPU is {CPU_VENDOR}")


def test_the_report_judges_each_installed_pack(
    wine: Wine, machine: Machine, doctor_exe: Path, tmp_path: Path
) -> None:
    """TensorRT RTX installed and usable (BA811), WebGPU installed without a D3D12 device
    (BA812: no display), OpenVINO not installed (BA813): its files are not BA402, while a file
    missing from an installed pack still is."""
    folder = tmp_path / "app"
    (folder / "ep" / "nv_tensorrt_rtx").mkdir(parents=True)
    (folder / "ep" / "webgpu").mkdir()
    shutil.copyfile(doctor_exe, folder / "bundle-doctor.exe")
    present = (NV_PLUGIN, data.WEBGPU_PACK[2])
    absent = ("ep/nv_tensorrt_rtx/cudart64_13.dll", data.OPENVINO_PACK[2], "ep/openvino/tbb12.dll")
    for name in present:
        (folder / name).write_bytes(b"MZ")
    lines = [
        ("bundle-doctor-data", "2"),
        ("tool", "0.1.0"),
        ("profile", "ort-1.31.1-cpu"),
        *(("check", *row) for row in data.CHECKS),
        *(("file", "2", "0" * 64, "ep", name) for name in (*present, *absent)),
        *(("ep", *pack) for pack in data.PACKS),
    ]
    (folder / DOCTOR_DATA).write_bytes(data.seal(lines))
    machine.driver(DRIVER_581)
    document, code = report(wine, folder / "bundle-doctor.exe", gpus="sm_86")
    assert code == 17  # the BA402
    assert codes(document) == ["BA402", "BA812", "BA811", "BA813"]
    [removed] = findings(document, "BA402")
    assert removed["files"] == ["ep/nv_tensorrt_rtx/cudart64_13.dll"]
    [usable] = findings(document, "BA811")
    assert usable["severity"] == "info" and usable["name"] == "ep-pack-usable"
    assert usable["files"] == [NV_PLUGIN]
    assert usable["message"] == (
        "EP pack nv-tensorrt-rtx can run here: Stand-in GPU sm_86 (sm_86), driver 581.15"
    )
    [unusable] = findings(document, "BA812")
    assert unusable["severity"] == "warning" and unusable["name"] == "ep-pack-unusable"
    assert unusable["files"] == [data.WEBGPU_PACK[2]]
    assert unusable["message"] == (
        f"EP pack webgpu has no device here: no display adapter for Direct3D 12: {NO_DXGI}; "
        f"it needs {data.WEBGPU_PACK[6]}"
    )
    [missing] = findings(document, "BA813")
    assert missing["severity"] == "info" and missing["name"] == "ep-pack-not-installed"
    assert missing["files"] == [data.OPENVINO_PACK[2]]
    assert missing["message"] == "EP pack openvino is not installed (ep/openvino is absent)"
    # the machine block names the driver the pack probe found, with no driver record
    assert document["machine"]["driver"]["driver_version"] == "581.15"
    text = run(wine, folder / "bundle-doctor.exe", gpus="sm_86")
    assert "info BA811 ep-pack-usable: EP pack nv-tensorrt-rtx can run here" in text.stdout
    assert "NVIDIA driver 581.15" in text.stdout


# --- the runtime pack (bundle build --runtime-pack, issue 32) ---------------------------------

PACK_LOCK = replace(CPU_LOCK, runtime_pack=RuntimePack(PACK_SHA, ("onnxruntime.dll",), 1))


@pytest.fixture
def pack_app(doctor_exe: Path, tmp_path: Path) -> Path:
    """A folder with the doctor and the data file of a lock with a runtime pack, and no
    bundle-pack.txt (as `bundle build` leaves it): a test writes the one a setup would."""
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copyfile(doctor_exe, folder / "bundle-doctor.exe")
    (folder / DOCTOR_DATA).write_text(doctor_data(PACK_LOCK), encoding="utf-8")
    return folder


def header(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The text report's lines before its first empty line."""
    return result.stdout.split("\n\n", 1)[0].split("\n")


def test_the_data_file_names_the_runtime_pack_once_after_the_packs() -> None:
    webgpu = LockedEp(
        "webgpu", "onnxruntime-webgpu", "1.31.1", "WebGpuExecutionProvider", "webgpu",
        data.WEBGPU_PACK[2], "1.31.1", 1, probe="d3d12", needs="a D3D12 GPU",
    )  # fmt: skip
    text = doctor_data(replace(PACK_LOCK, eps=(webgpu,)))
    records = [line.split("\t") for line in text.splitlines()]
    kinds = [fields[0] for fields in records]
    assert [fields for fields in records if fields[0] == "runtime_pack"] == [
        ["runtime_pack", PACK_SHA]
    ]
    assert kinds[-3:] == ["ep", "runtime_pack", "end"]  # the last record
    row = CATALOGUE["BA406"]
    assert ["check", "BA406", "error", row.name, row.title] in records
    assert "\nruntime_pack\t" not in doctor_data(CPU_LOCK)  # a lock without a runtime pack


def test_the_installed_runtime_pack_is_the_lock_s(wine: Wine, pack_app: Path) -> None:
    exe = pack_app / "bundle-doctor.exe"
    (pack_app / PACK_MARKER).write_bytes(PACK_SHA.upper().encode() + b"\r\n")  # any case
    document, code = report(wine, exe)
    assert code == 0 and document["findings"] == []
    assert document["runtime_pack"] == {"lock": PACK_SHA, "installed": PACK_SHA, "matches": True}
    keys = list(document)
    assert keys[keys.index("folder") + 1] == "runtime_pack"  # a fact of the folder
    text = run(wine, exe)
    assert text.returncode == 0
    assert header(text)[1] == f"Runtime pack {PACK_SHA[:16]}: installed, matches the lock"


def test_another_release_s_runtime_pack_is_ba406(wine: Wine, pack_app: Path) -> None:
    exe = pack_app / "bundle-doctor.exe"
    (pack_app / PACK_MARKER).write_bytes(OTHER_SHA.encode() + b"\r\n")
    document, code = report(wine, exe)
    assert code == 17 and codes(document) == ["BA406"]
    [item] = document["findings"]
    assert item["severity"] == "error" and item["name"] == "runtime-pack-mismatch"
    assert item["files"] == [PACK_MARKER]
    assert item["message"] == (
        f"bundle-pack.txt says the folder holds runtime pack {OTHER_SHA[:16]}, the app's lock "
        f"names {PACK_SHA[:16]}: the app and its runtime come from different releases"
    )
    assert document["runtime_pack"] == {"lock": PACK_SHA, "installed": OTHER_SHA, "matches": False}
    text = run(wine, exe)
    assert text.returncode == 17
    assert header(text)[1] == (
        f"Runtime pack {PACK_SHA[:16]}: the folder holds {OTHER_SHA[:16]} (bundle-pack.txt), "
        "not the lock's"
    )
    assert f"error BA406 runtime-pack-mismatch: {item['message']}" in text.stdout
    # --gpu-only (the installer, before it copies) looks at no file of the folder
    gpu_only, code = report(wine, exe, "--gpu-only")
    assert code == 0 and gpu_only["findings"] == [] and gpu_only["runtime_pack"] is None
    assert "Runtime pack" not in run(wine, exe, "--gpu-only").stdout
    # an empty bundle-pack.txt names no pack: it matches none
    (pack_app / PACK_MARKER).write_bytes(b"\r\n")
    document, code = report(wine, exe)
    assert code == 17 and codes(document) == ["BA406"]
    assert document["findings"][0]["message"].startswith("bundle-pack.txt names no runtime pack")
    assert document["runtime_pack"] == {"lock": PACK_SHA, "installed": "", "matches": False}


def test_a_folder_without_bundle_pack_txt_has_no_finding(wine: Wine, pack_app: Path) -> None:
    """The folder `bundle build` wrote: no setup ran, so no runtime pack was installed."""
    exe = pack_app / "bundle-doctor.exe"
    document, code = report(wine, exe)
    assert code == 0 and document["findings"] == []
    assert document["runtime_pack"] == {"lock": PACK_SHA, "installed": None, "matches": False}
    text = run(wine, exe)
    assert text.returncode == 0
    assert header(text)[1] == (
        f"Runtime pack {PACK_SHA[:16]}: not installed as a pack (no bundle-pack.txt)"
    )


def test_a_data_file_without_the_runtime_pack_says_nothing_of_it(
    wine: Wine, pack_app: Path
) -> None:
    """An older bundle's data file: bundle-pack.txt is compared with nothing."""
    exe = pack_app / "bundle-doctor.exe"
    (pack_app / DOCTOR_DATA).write_text(doctor_data(CPU_LOCK), encoding="utf-8")
    (pack_app / PACK_MARKER).write_bytes(OTHER_SHA.encode() + b"\r\n")
    document, code = report(wine, exe)
    assert code == 0 and document["findings"] == []
    assert document["runtime_pack"] is None
    text = run(wine, exe)
    assert text.returncode == 0
    assert "Runtime pack" not in text.stdout and PACK_MARKER not in text.stdout
