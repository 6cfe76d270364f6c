"""The installer of a bundle with execution-provider packs (issue 31), as its users meet it:
`bundle build --ep` writes setup.iss with one component per pack, the real Inno Setup 6.4.1
compiler (ISCC.exe under Wine) compiles it, and a silent install under Wine asks
bundle-doctor.exe --packs which packs this machine can use before anything is copied.

The machine is the stand-in driver (tests/fixtures/standins/nvcuda.c) in the prefix's System32:
its FileVersion is the driver version, BUNDLE_STANDIN_GPUS the devices it reports. The
TensorRT RTX pack needs compute capability 8.0 and driver 580.88 (manifests/eps/
nv-tensorrt-rtx.toml): sm_75 leaves it out, sm_86 installs it. WebGPU needs a Direct3D 12
adapter: Wine's display adapter under Xvfb has one through vkd3d and Mesa's software Vulkan
driver (lavapipe), so the doctor finds it and the setup installs the pack.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundler.eps.plugins import load_pack
from tests.support.cache_links import RELEASES, kept_cache
from tests.support.display import LAVAPIPE
from tests.support.doctor import DRIVER_581, Machine
from tests.support.inno import InnoSetup
from tests.support.paths import HELLO, test_cache_dir
from tests.support.runs import pip_env
from tests.support.scratch import scratch
from tests.support.skips import require

pytestmark = pytest.mark.realdata

PROFILE = "ort-1.31.1-cpu"
PACKS = ("nv-tensorrt-rtx", "webgpu")
TRT = load_pack("nv-tensorrt-rtx")
FOLDER = r"C:\ep packs (test)"


def bundle(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with pip pointed at the pinned wheels (the packs come from PyPI wheels)."""
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        capture_output=True, encoding="utf-8", env={**os.environ, **pip_env()}, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """examples/hello with ORT 1.31.1 (CPU) and two packs, hard-linked from the kept cache of
    released wheels (tests/support/cache_links.kept_cache: fetched on a first run only)."""
    for name in PACKS:
        wheel = load_pack(name).source.pip.wheel
        require(
            (test_cache_dir() / "wheels" / wheel).is_file(),
            f"{wheel} is not in the test cache: run python -m tools.testing.fetch_test_wheels",
        )
    with scratch(tmp_path_factory, "ep-setup") as work:
        packs = [option for name in PACKS for option in ("--ep", name)]
        done = bundle(
            "build", str(HELLO), "--profile", PROFILE, *packs, "--out", str(work / "dist"),
            "--cache-dir", str(kept_cache(RELEASES)), "--link", "--iss-compression", "none",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        yield work


@pytest.fixture(scope="module")
def setup_exe(inno: InnoSetup, built: Path) -> Path:
    return inno.compile(built / "dist" / "setup.iss", built / "output").check().setup_exe


@dataclass
class Target:
    """The machine a setup installs on: the stand-in driver 581.15 in System32, reporting the
    GPUs a test gives; emptied when the test ends."""

    inno: InnoSetup
    machine: Machine
    monkeypatch: pytest.MonkeyPatch
    log: Path

    def install(self, setup: Path, gpus: str, *args: str) -> tuple[int, str, Path]:
        """A silent install of `setup` into FOLDER (emptied first) on a machine with `gpus`."""
        if not self.machine.placed:
            self.machine.driver(DRIVER_581)
        self.monkeypatch.setenv("BUNDLE_STANDIN_GPUS", gpus)
        app = self.inno.unix_path(FOLDER)
        shutil.rmtree(app, ignore_errors=True)
        result = self.inno.install(setup, FOLDER, *args, log=self.log)
        return result.returncode, result.log, app


@pytest.fixture
def target(
    inno: InnoSetup, standins: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Target]:
    with Machine(inno, standins) as machine:
        yield Target(inno, machine, monkeypatch, tmp_path / "setup.log")


def test_the_script_has_a_component_per_pack(built: Path) -> None:
    script = (built / "dist" / "setup.iss").read_text(encoding="utf-8-sig")
    assert script.count("[Components]") == 1
    for name in PACKS:
        component = "ep_" + name.replace("-", "_")
        assert f'Name: "{component}"' in script
        folder = load_pack(name).folder.replace("/", "\\")
        lines = [line for line in script.splitlines() if f'DestDir: "{{app}}\\{folder}"' in line]
        assert lines and all(line.endswith(f"; Components: {component}") for line in lines)


def test_sm_75_leaves_the_tensorrt_rtx_pack_out_and_logs_why(
    setup_exe: Path, target: Target
) -> None:
    code, log, app = target.install(setup_exe, "sm_75")
    assert code == 0, log
    assert (app / "hello.exe").is_file() and (app / "onnxruntime.dll").is_file()
    assert not (app / TRT.folder).exists(), log
    line = next(line for line in log.splitlines() if "EP pack nv-tensorrt-rtx: left out" in line)
    assert "sm_75" in line, line
    listed = (app / "bundle-installed.txt").read_text(encoding="utf-8-sig")
    assert TRT.plugin not in listed  # an upgrade will not look for what was never installed
    audit = bundle("audit", str(app), "--json")  # the install folder, as a CI job audits it
    findings = json.loads(audit.stdout)["findings"]
    assert [f["files"] for f in findings if f["code"] == "BA405"] == [
        [f"{TRT.folder}/{TRT.plugin}"]
    ]
    assert not [f for f in findings if f["code"] == "BA402"], findings


def test_sm_86_installs_the_tensorrt_rtx_pack(setup_exe: Path, target: Target) -> None:
    code, log, app = target.install(setup_exe, "sm_86")
    assert code == 0, log
    assert "EP pack nv-tensorrt-rtx: usable here" in log, log
    folder = app / TRT.folder
    for item in TRT.shipped():
        assert (folder / item.name).stat().st_size == item.size, item.name
    assert "EP pack nv-tensorrt-rtx: left out" not in log


def test_webgpu_is_installed_where_the_doctor_finds_direct3d_12(
    setup_exe: Path, target: Target
) -> None:
    """Wine's DXGI adapter under Xvfb, with Direct3D 12 through vkd3d on Mesa's software Vulkan
    driver: the doctor's d3d12 probe says yes, and the setup installs the pack."""
    require(LAVAPIPE.is_file(), f"{LAVAPIPE} is missing (apt-get install mesa-vulkan-drivers)")
    target.monkeypatch.setenv("VK_ICD_FILENAMES", str(LAVAPIPE))  # Wine passes it on
    code, log, app = target.install(setup_exe, "sm_86")
    assert code == 0, log
    assert "EP pack webgpu: usable here: Direct3D 12 on" in log, log
    assert (app / "ep" / "webgpu" / "onnxruntime_providers_webgpu.dll").is_file()


def test_components_on_the_command_line_win_over_the_doctor(
    setup_exe: Path, target: Target
) -> None:
    code, log, app = target.install(setup_exe, "sm_75", "/COMPONENTS=ep_webgpu,ep_nv_tensorrt_rtx")
    assert code == 0, log
    assert "EP packs: chosen on the command line" in log
    assert (app / TRT.folder / TRT.plugin).is_file() and (app / "ep" / "webgpu").is_dir()


@pytest.fixture(scope="module")
def required_setup(inno: InnoSetup, built: Path) -> Path:
    """The same bundle's script rendered with --require-ep nv-tensorrt-rtx."""
    script = built / "required" / "setup.iss"
    lock = built / "dist" / "bundle.lock.json"
    done = bundle(
        "render", "iss", "--lock", str(lock), "--out", str(script), "--require-ep",
        "nv-tensorrt-rtx", "--iss-compression", "none",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return inno.compile(script, built / "required-output").check().setup_exe


def test_a_required_pack_the_machine_cannot_use_stops_the_setup(
    required_setup: Path, target: Target
) -> None:
    code, log, app = target.install(required_setup, "sm_75")
    assert code == 1, log  # InitializeSetup returned False
    assert "EP pack nv-tensorrt-rtx is required (--require-ep): setup stops" in log
    assert not (app / "hello.exe").exists()


def test_a_required_pack_the_machine_can_use_installs(required_setup: Path, target: Target) -> None:
    code, log, app = target.install(required_setup, "sm_86")
    assert code == 0, log
    assert (app / TRT.folder / TRT.plugin).is_file()


def test_require_ep_of_a_pack_not_shipped_is_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    done = bundle(
        "build", str(HELLO), "--profile", PROFILE, "--ep", "webgpu", "--require-ep", "openvino",
        "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
    )  # fmt: skip
    assert done.returncode == 14, done.stderr
    assert "--require-ep openvino: the bundle ships no pack openvino (its packs: webgpu)" in (
        done.stderr
    )
    assert not out.exists()
