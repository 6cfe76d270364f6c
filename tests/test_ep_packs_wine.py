"""The plugin execution-provider packs of manifests/eps/ (issue 31), proved with Wine as the
loader: ORT 1.31.1 registers each pack from its own folder beside the exe, every DLL of every
pack loads, each factory says what it offers on this machine, a removed DLL is named, and an
ORT below a pack's minimum is refused by the pack itself.

The app is tests/fixtures/src/ep_register.c (built by tests/fixtures/build_ep_register.sh):
it links onnxruntime.dll and calls RegisterExecutionProviderLibrary with each pack's full path,
which ORT loads with LOAD_WITH_ALTERED_SEARCH_PATH. The folder is the one `bundle build
--profile ort-1.31.1-cpu --ep nv-tensorrt-rtx --ep openvino --ep webgpu` makes from the pinned
wheels: the exe, ORT 1.31.1 and the VC++ runtime it imports, and each pack in
ep\\<folder>\\ with the VC++ DLLs ORT does not load itself. The refusals of an older ORT use
the same layout by hand (`lay_out`: bundle itself refuses that combination, exit 25).

The machine is faked where Wine has nothing: the driver DLLs the packs need (nvml.dll,
nvcuda.dll, OpenCL.dll, ze_loader.dll; tests/fixtures/standins/) go into the prefix's System32,
each reporting no device. Wine runs on an Xvfb display, so its DXGI adapter is a GPU to ORT.
Programs run from the prefix's C:\\, not the app folder: the current directory is on the DLL
search path and would hide a pack DLL that only the exe's folder has.

Under Wine no pack gets a device of its own kind ([proof] in each pack file): no CUDA device
behind the stand-in nvcuda.dll, no Intel device on an AMD host, no D3D12 device for Dawn. The
tests name each factory's verdict instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundler.eps.matrix import pair_proof
from bundler.target.profiles import load_profile
from tests.support.display import DisplayWine
from tests.support.mingw import DLLTOOL, GCC, run_build_script
from tests.support.paths import REPO, test_cache_dir
from tests.support.runs import pip_env
from tests.support.scratch import scratch
from tests.support.skips import require
from tests.support.wine import NATIVE_VC_RUNTIME, WineRun
from tools.testing.fetch_test_wheels import core_folder, core_source

pytestmark = pytest.mark.real_tools

EPS = REPO / "manifests" / "eps"
PACKS = {
    path.stem: tomllib.loads(path.read_text(encoding="utf-8"))
    for path in sorted(EPS.glob("*.toml"))
}
ORT = "onnxruntime-1.31.1-cp311-cp311-win_amd64"  # manifests/profiles/ort-1.31.1-cpu.toml
VC_RUNTIME = "msvc_runtime-14.44.35112-cp311-cp311-win_amd64"  # the same profile's msvc-runtime
ORT_VC_RUNTIME = ("msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll")
# The driver stand-ins in System32; opencl=n: Wine's builtin opencl.dll would win otherwise.
DRIVERS = (
    "nvcuda-31.0.15.5161/nvcuda.dll",
    "nvml/nvml.dll",
    "opencl/OpenCL.dll",
    "ze_loader/ze_loader.dll",
)
OVERRIDES = NATIVE_VC_RUNTIME.replace("=n", ",msvcp140_atomic_wait,opencl=n")
DEBUG = "err+module,warn+module"  # warn: a failed LoadLibrary names its file too
_FAILED_LOAD = re.compile(r':warn:module:load_dll Failed to load module L"([^"]+)"')


def windows_path(path: Path) -> str:
    return "Z:" + str(path).replace("/", "\\")


# --- the machine ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ep_wine(display_wine: DisplayWine, standins: Path) -> Iterator[DisplayWine]:
    """The session's display prefix with the driver stand-ins in its System32 for this
    module's tests, and without them again after."""
    with display_wine.drivers_installed([standins / driver for driver in DRIVERS]):
        yield display_wine


@pytest.fixture(scope="module")
def ep_register(tmp_path_factory: pytest.TempPathFactory) -> Path:
    script = REPO / "tests" / "fixtures" / "build_ep_register.sh"
    out = run_build_script(script, tmp_path_factory.mktemp("ep-register"), GCC, DLLTOOL)
    return out / "ep_register.exe"


# --- the folder ----------------------------------------------------------------------------


def extracted(stem: str) -> Path:
    folder = test_cache_dir() / "extracted" / stem
    require(
        (folder / ".complete").is_file(),
        f"{stem} is not in {folder.parent}: run python -m tools.testing.fetch_test_wheels",
    )
    return folder


def pack_source(name: str) -> Path:
    source = PACKS[name]["source"]
    wheel: str = source["wheel"]
    return extracted(wheel.removesuffix(".whl")) / str(source["folder_in_wheel"])


def vc_dll(name: str) -> Path:
    return extracted(VC_RUNTIME) / "msvc_runtime-14.44.35112.data" / "data" / "Scripts" / name


def lay_out(app: Path, exe: Path, ort: str | Path = ORT) -> Path:
    """The bundle: exe, ORT (a wheel's stem, or a folder of its DLLs) and its VC++ runtime
    beside it, each pack in its own folder."""
    app.mkdir(parents=True)
    os.link(exe, app / exe.name)
    core = ort if isinstance(ort, Path) else extracted(ort) / "onnxruntime" / "capi"
    for dll in core.glob("*.dll"):
        os.link(dll, app / dll.name)
    for name in ORT_VC_RUNTIME:
        os.link(vc_dll(name), app / name)
    for name, pack in PACKS.items():
        folder = app / pack["folder"]
        folder.mkdir(parents=True)
        for path in pack_source(name).iterdir():
            if path.name not in pack["target"]["not_shipped"]:
                os.link(path, folder / path.name)
        for vc in pack["target"]["vc_runtime_in_pack"]:
            os.link(vc_dll(vc), folder / vc)
    return app


@pytest.fixture(scope="module")
def app(ep_register: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The proof app's bundle with every pack, as `bundle build --ep` makes it; its cache and
    folder are removed when the module is done."""
    with scratch(tmp_path_factory, "ep-app") as work:
        yield _built_app(ep_register, work)


def _built_app(ep_register: Path, work: Path) -> Path:
    exe = work / "src" / ep_register.name
    exe.parent.mkdir()
    shutil.copy2(ep_register, exe)
    out = work / "app"
    packs = [option for name in PACKS for option in ("--ep", name)]
    args = ["--profile", "ort-1.31.1-cpu", *packs, "--out", str(out)]
    args += ["--cache-dir", str(work / "cache"), "--link"]
    result = subprocess.run(
        [sys.executable, "-m", "bundler", "build", str(exe), *args],
        capture_output=True, encoding="utf-8", env={**os.environ, **pip_env()}, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lock = json.loads((out / "bundle.lock.json").read_text(encoding="utf-8"))
    assert sorted(pack["name"] for pack in lock["eps"]) == sorted(PACKS)
    return out


def plugin(app: Path, name: str) -> str:
    pack = PACKS[name]
    return windows_path(app / pack["folder"] / pack["plugin"])


def register_args(app: Path, *names: str) -> list[str]:
    return [f"{PACKS[name]['registration_name']}={plugin(app, name)}" for name in names]


# --- running it ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One run of ep_register.exe: its exit code, its lines, and what the loader said."""

    returncode: int
    lines: tuple[str, ...]
    loader: WineRun
    failed_loads: tuple[str, ...]  # what a LoadLibrary could not load (Wine's warn lines)

    def __str__(self) -> str:
        return "\n".join(self.lines) + "\n" + "\n".join(self.loader.errors)


def run(wine: DisplayWine, exe: Path, *args: str) -> Run:
    done = wine.program(
        exe, *args, cwd=wine.prefix / "drive_c", debug=DEBUG, overrides=OVERRIDES, timeout=300
    )
    loader = WineRun.parse(done.returncode, done.stdout, done.stderr)
    failed = (m.group(1).replace("\\\\", "\\") for m in _FAILED_LOAD.finditer(done.stderr))
    return Run(
        done.returncode, tuple(done.stdout.splitlines()), loader, tuple(dict.fromkeys(failed))
    )


@pytest.fixture(scope="module")
def registered(ep_wine: DisplayWine, app: Path) -> Run:
    """Every pack registered in one process, each factory asked about every device."""
    whys = [f"--why={pack['ep_name']}" for pack in PACKS.values()]
    return run(ep_wine, app / "ep_register.exe", *whys, *register_args(app, *PACKS))


def hardware(result: Run) -> list[tuple[str, str]]:
    """(type, vendor id) of each device ORT found: ('CPU', '0x1022'), ('GPU', '0x10de')."""
    found = [
        re.fullmatch(r"hardware (\w+) vendor=.* id=(0x[0-9a-f]+)", line) for line in result.lines
    ]
    return [(match.group(1), match.group(2)) for match in found if match]


# --- registration --------------------------------------------------------------------------


def test_ort_1_31_1_registers_every_pack_from_its_own_folder(registered: Run) -> None:
    assert registered.lines[0] == "ort 1.31.1 api 31", registered
    for pack in PACKS.values():
        assert f"registered {pack['registration_name']}" in registered.lines, registered
    assert registered.loader.missing == (), registered
    assert registered.returncode == 0, registered


def test_every_dll_of_every_pack_loads_with_its_imports(ep_wine: DisplayWine, app: Path) -> None:
    """Each DLL loaded as ORT loads a pack (LOAD_WITH_ALTERED_SEARCH_PATH): the ones loaded
    later by name too (OpenVINO's device plugins and NPU compiler, Dawn's dxil.dll and
    dxcompiler.dll, TensorRT), whose imports registration alone never resolves."""
    dlls = sorted(path for pack in PACKS.values() for path in (app / pack["folder"]).glob("*.dll"))
    result = run(ep_wine, app / "ep_register.exe", *(f"--load={windows_path(dll)}" for dll in dlls))
    assert [line for line in result.lines if line.startswith(("loaded", "failed"))] == [
        f"loaded {windows_path(dll)}" for dll in dlls
    ], result
    assert result.loader.missing == (), result
    assert result.returncode == 0, result


# --- what each factory offers --------------------------------------------------------------


def test_webgpu_offers_wines_gpu_and_nothing_else(registered: Run) -> None:
    gpus = [device for device in hardware(registered) if device[0] == "GPU"]
    offered = [line for line in registered.lines if line.startswith("ep-device WebGpu")]
    assert offered == ["ep-device WebGpuExecutionProvider vendor=Microsoft hw=GPU"] * len(gpus), (
        registered
    )


def test_openvino_offers_only_intel_devices(registered: Run) -> None:
    """OpenVINO's factory skips devices whose vendor id is not Intel's (0x8086): on an AMD host
    it offers nothing, not even the CPU; on an Intel host it offers the Intel CPU."""
    intel = [device for device in hardware(registered) if device[1] == "0x8086"]
    offered = [line for line in registered.lines if line.startswith("ep-device OpenVINO")]
    if intel:
        assert offered and all(line.endswith("hw=CPU") for line in offered), registered
    else:
        assert offered == [], registered


def test_tensorrt_rtx_offers_no_device_and_says_why(registered: Run) -> None:
    """No CUDA device under Wine: on the CPU the factory refuses by type, on Wine's DXGI
    adapter (which Wine gives NVIDIA's vendor id) CUDA cannot resolve it."""
    assert not [line for line in registered.lines if line.startswith("ep-device NvTensorRTRTX")]
    why = "why NvTensorRTRTXExecutionProvider hw={} reasons=0x2 notes=NvTensorRTRTX EP {}"
    expected = {
        "CPU": why.format("CPU", "only supports NVIDIA GPU devices"),
        "NVIDIA GPU": why.format(
            "GPU",
            "could not resolve the GPU device properties via CUDA. "
            "Ensure the NVIDIA driver and CUDA runtime are correctly installed.",
        ),
    }
    assert expected["CPU"] in registered.lines, registered
    if ("GPU", "0x10de") in hardware(registered):
        assert expected["NVIDIA GPU"] in registered.lines, registered


# --- a missing DLL is named ----------------------------------------------------------------


def linked_copy(app: Path, target: Path) -> Path:
    for path in app.rglob("*"):
        if path.is_file():
            destination = target / path.relative_to(app)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, destination)
    return target


@pytest.fixture(scope="module")
def broken(ep_wine: DisplayWine, app: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One DLL taken from each pack, in one process (each pack's verdict is its own):
    OpenVINO without tbb12.dll (imported by openvino.dll), WebGPU with
    msvcp140_atomic_wait.dll beside the exe instead of in its folder, TensorRT RTX without
    tensorrt_plugins.dll (loaded by its factory at registration)."""
    copy = linked_copy(app, tmp_path_factory.mktemp("ep-broken") / "app")
    (copy / "ep" / "openvino" / "tbb12.dll").unlink()
    (copy / "ep" / "webgpu" / "msvcp140_atomic_wait.dll").rename(copy / "msvcp140_atomic_wait.dll")
    (copy / "ep" / "nv_tensorrt_rtx" / "tensorrt_plugins.dll").unlink()
    return run(ep_wine, copy / "ep_register.exe", *register_args(copy, *PACKS))


def test_openvino_without_tbb12_is_refused_and_the_loader_names_tbb12(broken: Run) -> None:
    failed = [line for line in broken.lines if line.startswith("failed OpenVINOExecutionProvider")]
    # ORT's message names the first DLL it could not follow by name through the standard
    # search (openvino_onnx_frontend.dll, which is in the pack's folder, not the exe's); Wine's
    # loader names the root cause.
    assert len(failed) == 1 and failed[0].endswith('(Error 126: "Module not found.")'), broken
    assert "tbb12.dll" in broken.loader.missing, broken
    assert broken.returncode == 3, broken


def test_webgpu_needs_msvcp140_atomic_wait_in_its_own_folder(broken: Run) -> None:
    """Beside the exe is not enough: with LOAD_WITH_ALTERED_SEARCH_PATH the loader searches
    the pack's folder instead of the exe's, and ORT has not loaded this one itself. ORT's own
    diagnosis then follows the dependency by name through the standard search, finds the copy
    beside the exe, and cannot say what failed; the loader names it."""
    failed = [line for line in broken.lines if line.startswith("failed WebGpuExecutionProvider")]
    assert len(failed) == 1, broken
    assert failed[0].endswith(
        '" But no dependency issue could be determined. (Error 126: "Module not found.")'
    ), broken
    assert "MSVCP140_ATOMIC_WAIT.dll" in broken.loader.missing, broken


def test_tensorrt_rtx_without_its_plugins_dll_registers_and_the_loader_names_it(
    broken: Run,
) -> None:
    """The factory loads tensorrt_plugins.dll at registration by full path and goes on
    without it: only the loader's failed load names the file."""
    assert "registered NvTensorRTRTXExecutionProvider" in broken.lines, broken
    expected = "\\ep\\nv_tensorrt_rtx\\tensorrt_plugins.dll"
    assert [path for path in broken.failed_loads if path.endswith(expected)], broken


@pytest.fixture(scope="module")
def session_only(ep_wine: DisplayWine, app: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Without the DLLs only a session loads: TensorRT RTX's engine DLL (a delay import that
    its delay-load hook loads from its folder) and Dawn's dxil.dll (loaded when Dawn first
    compiles a shader). TensorRT RTX is registered as "nv_tensorrt_rtx" here, and its factory
    asked for by its usual EP name."""
    copy = linked_copy(app, tmp_path_factory.mktemp("ep-session-only") / "app")
    (copy / "ep" / "nv_tensorrt_rtx" / "tensorrt_rtx_1_7.dll").unlink()
    (copy / "ep" / "webgpu" / "dxil.dll").unlink()
    return run(
        ep_wine,
        copy / "ep_register.exe",
        "--why=NvTensorRTRTXExecutionProvider",
        f"nv_tensorrt_rtx={plugin(copy, 'nv-tensorrt-rtx')}",
        *register_args(copy, "webgpu"),
    )


def test_a_dll_loaded_only_for_a_session_is_not_named_at_registration(session_only: Run) -> None:
    """Registration succeeds without them and no loader names them: only a static check (the
    pack's [[files]] delay imports and [[runtime_loads]]) can find them missing."""
    assert "registered nv_tensorrt_rtx" in session_only.lines, session_only
    assert "registered WebGpuExecutionProvider" in session_only.lines, session_only
    assert session_only.loader.missing == (), session_only
    named = [
        path
        for path in session_only.failed_loads
        if path.lower().endswith(("_1_7.dll", "dxil.dll"))
    ]
    assert named == [], session_only


def test_tensorrt_rtx_takes_its_ep_name_from_the_registration_name(session_only: Run) -> None:
    assert (
        "why NvTensorRTRTXExecutionProvider hw=CPU: "
        "No valid factory found for execution provider 'NvTensorRTRTXExecutionProvider'."
    ) in session_only.lines, session_only


# --- the ORT minimum -----------------------------------------------------------------------


def release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@pytest.fixture(scope="module")
def old_ort(
    ep_register: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Path]]:
    with scratch(tmp_path_factory, "ep-old-ort") as root:
        yield {
            version: lay_out(
                root / version, ep_register, f"onnxruntime-{version}-cp311-cp311-win_amd64"
            )
            for version in ("1.22.1", "1.23.2")
        }


def test_each_pack_refuses_an_ort_below_its_minimum(
    ep_wine: DisplayWine, old_ort: dict[str, Path]
) -> None:
    """The packs check ORT themselves when registered: TensorRT RTX needs 1.24, WebGPU 1.24.4,
    OpenVINO 1.23 (min_ort of each pack file)."""
    refusals = {
        "nv-tensorrt-rtx": "[NvTensorRTRTX EP] Host ORT is too old. Minimum supported API "
        'version is 24, host reports "{v}" (parsed {api}).',
        "webgpu": 'ORT runtime version "{v}" is below the minimum required version "1.24.4".',
        "openvino": "ONNX Runtime version '{v}' (parsed API version: {api}) is below the minimum "
        "supported version 23.",
    }
    for version, folder in old_ort.items():
        api = version.split(".")[1]
        result = run(ep_wine, folder / "ep_register.exe", *register_args(folder, *PACKS))
        assert result.lines[0] == f"ort {version} api {api}", result
        for name, pack in PACKS.items():
            registration = pack["registration_name"]
            # The outcome of the registration only: a pack that registered may go on to list
            # the devices it offers, and which those are depends on the host's processor.
            lines = [
                line
                for line in result.lines
                if line == f"registered {registration}"
                or line.startswith(f"failed {registration}: ")
            ]
            if release(version) >= release(pack["min_ort"]):
                assert lines == [f"registered {registration}"], result
            else:
                assert len(lines) == 1 and lines[0].startswith(f"failed {registration}: "), result
                assert lines[0].endswith(refusals[name].format(v=version, api=api)), result
        assert result.returncode == 3, result


# --- the pack x core proof (issue 40) --------------------------------------------------------

# Rows of manifests/ep-matrix.toml rerun here: a CUDA core and a DirectML core older than
# 1.31.1, each with every pack, and a core that two packs refuse. The proof tool
# (tools/evidence/ep_matrix.py) ran every row once, one process a pair; here each core takes
# all the packs in one process, and every pack's outcome must be the recorded one.
RERUN = ("ort-1.24.4-gpu-cuda12", "ort-1.24.4-directml", "ort-1.23.0-directml")


def core(profile: str) -> Path:
    """The profile's onnxruntime.dll and the DLLs beside it, as the test cache holds them."""
    folder = core_folder(core_source(load_profile(profile))[1], test_cache_dir(), download=False)
    require(folder is not None, f"{profile}'s core: run python -m tools.testing.fetch_test_wheels")
    assert folder is not None
    return folder


def recorded(result: Run, registration: str) -> tuple[str, str]:
    """A pack's outcome in one run, as the proof records it: ("registered", "") or
    ("refused", ORT's message)."""
    for line in result.lines:
        if line == f"registered {registration}":
            return "registered", ""
        if line.startswith(f"failed {registration}: "):
            return "refused", line.removeprefix(f"failed {registration}: ")
    return "crashed", ""


@pytest.fixture(scope="module")
def reruns(
    ep_wine: DisplayWine,
    standins: Path,
    ep_register: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Run]]:
    """Each RERUN core with every pack, in the prefix with dxcore.dll too (Windows 10 2004 has
    it, Wine 8.0 not; ORT 1.22 and later DirectML and GPU builds load it)."""
    with (
        scratch(tmp_path_factory, "ep-reruns") as root,
        ep_wine.drivers_installed([standins / "dxcore" / "dxcore.dll"]),
    ):
        runs = {}
        for profile in RERUN:
            folder = lay_out(root / profile, ep_register, core(profile))
            runs[profile] = run(ep_wine, folder / "ep_register.exe", *register_args(folder, *PACKS))
        yield runs


@pytest.mark.parametrize("profile", RERUN)
def test_an_older_core_registers_each_pack_as_the_proof_recorded(
    reruns: dict[str, Run], profile: str
) -> None:
    result = reruns[profile]
    version = release_of(profile)
    assert result.lines[0] == f"ort {version} api {version.split('.')[1]}", result
    for name, pack in PACKS.items():
        proof = pair_proof(profile, name)
        assert proof is not None and proof.outcome in ("registered", "refused"), (profile, name)
        outcome = recorded(result, pack["registration_name"])
        assert outcome == (proof.outcome, proof.message), result
        # and what min_ort says, independently of the proof file
        assert (outcome[0] == "registered") == (
            release(release_of(profile)) >= release(pack["min_ort"])
        )
    assert result.loader.missing == (), result


def release_of(profile: str) -> str:
    return profile.split("-")[1]


# --- the doctor: the ORT that really loads, beside each pack's minimum (issue 40) ------------

OLD_ORT = "onnxruntime-1.23.2-cp311-cp311-win_amd64"  # manifests/profiles/ort-1.23.2-cpu.toml


def doctor(wine: DisplayWine, app: Path) -> tuple[list[str], dict[str, object]]:
    """The doctor's text report's header and its --json document, run from the prefix's C:\\
    (not the app's folder: the current folder is on the search path too)."""
    exe = app / "bundle-doctor.exe"
    text = wine.program(exe, cwd=wine.prefix / "drive_c", overrides=OVERRIDES, timeout=300)
    document = wine.program(
        exe, "--json", cwd=wine.prefix / "drive_c", overrides=OVERRIDES, timeout=300
    )
    assert document.stdout.startswith("{"), (document.returncode, document.stderr[-3000:])
    return text.stdout.split("\n\n", 1)[0].splitlines(), json.loads(document.stdout)


@pytest.fixture(scope="module")
def shadowed(
    ep_wine: DisplayWine, app: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[tuple[list[str], dict[str, object]], tuple[list[str], dict[str, object]]]]:
    """The doctor of the bundle with every pack, with ORT 1.23.2's onnxruntime.dll in System32:
    first as built (the app's folder comes first in the search order: its own ORT loads), then
    with the bundle's onnxruntime.dll gone (the app would get System32's)."""
    older = extracted(OLD_ORT) / "onnxruntime" / "capi" / "onnxruntime.dll"
    with ep_wine.drivers_installed([older]):
        present = doctor(ep_wine, app)
        copy = linked_copy(app, tmp_path_factory.mktemp("ep-no-ort") / "app")
        (copy / "onnxruntime.dll").unlink()
        yield present, doctor(ep_wine, copy)


def test_the_doctor_prints_the_ort_it_loads_by_name_beside_each_pack_minimum(
    shadowed: tuple[tuple[list[str], dict[str, object]], tuple[list[str], dict[str, object]]],
    app: Path,
) -> None:
    lines, document = shadowed[0]
    own = windows_path(app / "onnxruntime.dll")
    assert f"ONNX Runtime 1.31.1 loaded by name from {own} (the bundle's: 1.31.1)" in lines, lines
    for pack in PACKS.values():
        minimum = pack["min_ort"]
        assert (
            f"EP pack {pack['name']}: needs ONNX Runtime {minimum} or newer; 1.31.1 meets it"
            in (lines)
        ), lines
    assert document["ort"] == {"bundle": "1.31.1", "loaded": "1.31.1", "from": own}
    assert document["eps"] == [
        {"name": pack["name"], "min_ort": pack["min_ort"], "loaded_meets_minimum": True}
        for pack in PACKS.values()
    ]


def test_the_doctor_loads_no_ort_with_gpu_only(ep_wine: DisplayWine, app: Path) -> None:
    """--gpu-only (the installer, before it copies) loads nothing: no ORT line, nulls."""
    exe = app / "bundle-doctor.exe"
    cwd = ep_wine.prefix / "drive_c"
    text = ep_wine.program(exe, "--gpu-only", cwd=cwd, overrides=OVERRIDES, timeout=300)
    assert not [line for line in text.stdout.splitlines() if line.startswith(("ONNX", "EP pack"))]
    document = json.loads(
        ep_wine.program(exe, "--gpu-only", "--json", cwd=cwd, overrides=OVERRIDES).stdout
    )
    assert document["ort"] == {"bundle": "1.31.1", "loaded": None, "from": None}
    assert {pack["loaded_meets_minimum"] for pack in document["eps"]} == {None}


def test_the_doctor_names_a_system32_ort_the_app_would_load_and_the_packs_it_refuses(
    shadowed: tuple[tuple[list[str], dict[str, object]], tuple[list[str], dict[str, object]]],
) -> None:
    lines, document = shadowed[1]
    system32 = "C:\\windows\\system32\\onnxruntime.dll"
    assert [line for line in lines if line.startswith("ONNX Runtime")] == [
        f"ONNX Runtime 1.23.2 loaded by name from {system32} (the bundle's: 1.31.1)"
    ], lines
    for pack in PACKS.values():
        minimum = pack["min_ort"]
        verdict = (
            "1.23.2 meets it"
            if release("1.23.2") >= release(minimum)
            else ("1.23.2 is older: ORT refuses it")
        )
        assert f"EP pack {pack['name']}: needs ONNX Runtime {minimum} or newer; {verdict}" in (
            lines
        ), lines
    found = {item["code"]: item for item in document["findings"]}  # type: ignore[attr-defined]
    assert "onnxruntime.dll is missing from the folder" in found["BA806"]["message"]
    assert found["BA807"]["message"] == (
        f"onnxruntime.dll (loaded by name, as the app loads it, from {system32}) is ONNX "
        "Runtime 1.23.2; the bundle was built for 1.31.1"
    )
