"""The installer as its users meet it: `bundle build` writes setup.iss, the real Inno Setup
6.4.1 compiler (ISCC.exe under Wine) compiles it, the setup installs silently under Wine + Xvfb
into a folder whose path has spaces and parentheses, and the installed app runs.

All tests share one Wine prefix (the `inno` fixture), so each one sets the state it depends on
(the stand-in nvcuda.dll in System32, the VC++ runtime registry key) before it installs.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doctor import DRIVER_516, DRIVER_551, Machine
from tests.support.inno import VC_REDIST_LOG, InnoSetup
from tests.support.paths import CPU, GPU, HELLO, REPO
from tests.support.real_dlls import RealDlls
from tests.support.runs import bundle_from_cache as bundle
from tests.support.wineprefix import replace_file

pytestmark = pytest.mark.realdata

VERSION_LINE = "ORT version: 1.19.2"
CUDA_PROVIDER = "onnxruntime_providers_cuda.dll"
VC_KEY = r"HKLM\SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64"
GOLDEN = REPO / "tests" / "golden"


def build(exe: Path, out: Path, cache: Path, *args: str) -> Path:
    result = bundle("build", str(exe), "--out", str(out), "--cache-dir", str(cache), *args)
    assert result.returncode == 0, result.stderr
    return out / "setup.iss"


@pytest.fixture
def machine(inno: InnoSetup, standins: Path) -> Iterator[Machine]:
    """The prefix's System32 as a test sets it (the stand-in driver), emptied when it ends.
    The GPUs the stand-in reports come from BUNDLE_STANDIN_GPUS, which setup passes on."""
    with Machine(inno, standins) as state:
        yield state


def installed(inno: InnoSetup, folder: str) -> Path:
    return inno.unix_path(folder)


# --- CPU: every CI run ---------------------------------------------------------------------


def test_cpu_setup_compiles_installs_into_a_hard_path_and_the_app_runs(
    inno: InnoSetup, cpu_cache: Path, tmp_path: Path
) -> None:
    """The script exactly as users get it (lzma2), compiled from another working directory."""
    script = build(HELLO, tmp_path / "dist", cpu_cache, "--profile", CPU)
    compiled = inno.compile(script, tmp_path / "output").check()
    assert [path.name for path in compiled.files] == ["hello-1.0.0.0-setup.exe"]
    folder = r"C:\Program Files\bundle test (x64)\héllo & co"
    result = inno.install(compiled.setup_exe, folder, log=tmp_path / "setup.log").check()
    app = installed(inno, folder)
    shipped = {p.relative_to(tmp_path / "dist").as_posix() for p in (tmp_path / "dist").rglob("*")}
    on_target = {p.relative_to(app).as_posix() for p in app.rglob("*")}
    # the views, and the build's local note of its files' times: none is installed
    generated = {"setup.iss", "postbuild.cmd", "postbuild.event.xml", "bundle.times.json"}
    assert shipped - generated <= on_target, result.log
    assert not generated & on_target, result.log
    run = inno.run(app / "hello.exe")
    assert run.returncode == 0, run.errors
    assert run.stdout.strip() == VERSION_LINE
    assert run.missing == ()


def test_vc_redist_runs_only_when_the_installed_runtime_is_missing_or_older(
    inno: InnoSetup, cpu_cache: Path, standins: Path, tmp_path: Path
) -> None:
    script = build(
        HELLO,
        tmp_path / "dist",
        cpu_cache,
        "--profile",
        CPU,
        "--vc-runtime",
        "installer",
        "--vc-redist",
        str(standins / "vc_redist.x64.exe"),
        "--iss-compression",
        "zip/1",
    )
    setup = inno.compile(script, tmp_path / "output").check().setup_exe
    ran = inno.unix_path(VC_REDIST_LOG)

    def install_with(registry: tuple[int, int] | None) -> bool:
        inno.delete_registry_key(VC_KEY)
        if registry is not None:
            inno.set_registry(VC_KEY, "Installed", 1)
            inno.set_registry(VC_KEY, "Major", registry[0])
            inno.set_registry(VC_KEY, "Minor", registry[1])
        ran.unlink(missing_ok=True)
        inno.install(setup, r"C:\vc test", log=tmp_path / "setup.log").check()
        return ran.is_file()

    assert install_with(None)  # no runtime installed
    assert "/install /quiet /norestart" in ran.read_text(encoding="utf-8")
    assert install_with((14, 38))  # older than ORT's 14.40 linker
    assert not install_with((14, 44))  # new enough: left alone
    assert not install_with((14, 40))
    inno.delete_registry_key(VC_KEY)


# --- the GPU preflight, on a small payload whose profile declares the GPU driver ------------


@pytest.fixture(scope="module")
def preflight_setup(
    inno: InnoSetup, cpu_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The CPU payload built with a copy of the CPU profile that adds the GPU profile's
    [gpu_driver] table: the same preflight code as the GPU setup, without 2.6 GB to compile."""
    work = tmp_path_factory.mktemp("preflight")
    gpu = (REPO / "manifests" / "profiles" / f"{GPU}.toml").read_text()
    driver = gpu[gpu.index("[gpu_driver]") : gpu.index("[cuda_ep]")]  # not the CUDA EP's modes
    cpu = (REPO / "manifests" / "profiles" / f"{CPU}.toml").read_text()
    first_table = cpu.index("[[")
    profile = work / "cpu-with-driver-check.toml"
    profile.write_text(cpu[:first_table] + driver + cpu[first_table:])
    script = build(
        HELLO, work / "dist", cpu_cache, "--profile", str(profile), "--iss-compression", "zip/1"
    )
    return inno.compile(script, work / "output").check().setup_exe


def preflight(inno: InnoSetup, setup: Path, tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    folder = r"C:\preflight (test)"
    app = inno.unix_path(folder)
    shutil.rmtree(app, ignore_errors=True)
    result = inno.install(setup, folder, *args, log=tmp_path / "setup.log")
    return result.returncode, result.log, app


def test_without_a_driver_a_silent_install_logs_it_and_continues(
    inno: InnoSetup, preflight_setup: Path, machine: Machine, tmp_path: Path
) -> None:
    machine.driver(None)
    code, log, app = preflight(inno, preflight_setup, tmp_path)
    assert code == 0, log
    assert "GPU preflight: No NVIDIA driver found" in log
    assert "nvcuda.dll is missing" in log
    assert "installing anyway" in log
    assert (app / "hello.exe").is_file()
    # After the copy, the doctor's whole report goes into the setup log: the same finding
    assert "bundle-doctor: exit code 17" in log
    assert "BA801" in log and "no-driver" in log


def test_without_a_driver_requiregpu_fails_the_install(
    inno: InnoSetup, preflight_setup: Path, machine: Machine, tmp_path: Path
) -> None:
    machine.driver(None)
    code, log, app = preflight(inno, preflight_setup, tmp_path, "/REQUIREGPU")
    assert code == 1, log  # InitializeSetup returned False
    assert "No NVIDIA driver found" in log
    assert "setup stops" in log
    assert not (app / "hello.exe").exists()


def test_a_new_enough_driver_passes(
    inno: InnoSetup,
    preflight_setup: Path,
    machine: Machine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BUNDLE_STANDIN_GPUS", "sm_86")  # the stand-in driver reports one GPU
    machine.driver(DRIVER_551)
    code, log, app = preflight(inno, preflight_setup, tmp_path, "/REQUIREGPU")
    assert code == 0, log
    assert "NVIDIA driver 551.61 found" in log
    assert "527.41 or newer needed for CUDA 12" in log
    assert "GPU preflight: ok" in log
    assert (app / "hello.exe").is_file()
    # the doctor ran twice: --gpu-only before the copy, the whole check after it
    assert log.count("bundle-doctor: exit code 0") == 2, log
    assert "--gpu-only" in log


def test_a_driver_without_a_gpu_fails_requiregpu_through_the_doctor(
    inno: InnoSetup,
    preflight_setup: Path,
    machine: Machine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The preflight reads only the driver's version; the doctor asks the driver for GPUs
    (cuInit), before anything is copied."""
    monkeypatch.setenv("BUNDLE_STANDIN_GPUS", "")  # the driver answers, with no device
    machine.driver(DRIVER_551)
    code, log, app = preflight(inno, preflight_setup, tmp_path, "/REQUIREGPU")
    stopped = not (app / "hello.exe").exists()
    silent, silent_log, _ = preflight(inno, preflight_setup, tmp_path)
    assert code == 1, log
    assert "BA803" in log and "bundle-doctor found a GPU" in log and "setup stops" in log
    assert stopped
    assert silent == 0, silent_log  # without /REQUIREGPU: logged, installed anyway
    assert "installing anyway" in silent_log and (app / "hello.exe").is_file()


def test_an_old_driver_is_reported_as_too_old(
    inno: InnoSetup, preflight_setup: Path, machine: Machine, tmp_path: Path
) -> None:
    machine.driver(DRIVER_516)
    code, log, _ = preflight(inno, preflight_setup, tmp_path)
    required, required_log, app = preflight(inno, preflight_setup, tmp_path, "/REQUIREGPU")
    assert code == 0, log
    assert "The NVIDIA driver 516.94 is too old" in log
    assert "needs 527.41 or newer for CUDA 12" in log
    assert required == 1, required_log
    assert not (app / "hello.exe").exists()


# --- escaping: the golden script, compiled and installed with its awkward names -------------


def test_the_escaping_golden_script_compiles_and_installs_every_name(
    inno: InnoSetup, standins: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "bundle"
    names = {
        "bundle.lock.json": b"{}",
        "{braces} & 'quotes' 100%.dll": b"dll",
        "licenses/ünïcödé (x64)/LICENSE [2] #1.txt": b"licence",
        "my {app} 'v2' 100% ü.exe": HELLO.read_bytes(),
        "vc_redist.x64.exe": (standins / "vc_redist.x64.exe").read_bytes(),
    }
    for name, data in names.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    shutil.copyfile(GOLDEN / "escaping.iss", folder / "setup.iss")
    compiled = inno.compile(folder / "setup.iss", tmp_path / "output").check()
    assert compiled.setup_exe.name == "My-App-s-100-Ünïcode--1.0.0.0-setup.exe"
    target = r"C:\escaping (test)"
    inno.install(compiled.setup_exe, target, log=tmp_path / "setup.log").check()
    app = inno.unix_path(target)
    for name in names.keys() - {"vc_redist.x64.exe"}:  # that one runs from {tmp}
        assert (app / name).read_bytes() == names[name], name
    assert not (app / "vc_redist.x64.exe").exists()


# --- GPU: the 2.6 GB payload, split into slices, installs and loads the CUDA provider --------


@pytest.fixture
def gpu_output(tmp_path: Path) -> Iterator[Path]:
    """Where the GPU setup is compiled; removed right after the test (about 1.6 GB)."""
    output = tmp_path / "output"
    yield output
    shutil.rmtree(output, ignore_errors=True)


def test_gpu_setup_spans_slices_installs_and_loads_the_cuda_provider(
    inno: InnoSetup, gpu_cache: Path, machine: Machine, tmp_path: Path, gpu_output: Path
) -> None:
    script = build(HELLO, tmp_path / "dist", gpu_cache, "--link", "--iss-compression", "zip/1")
    compiled = inno.compile(script, gpu_output, timeout=1800).check()
    names = sorted(path.name for path in compiled.files)
    assert compiled.setup_exe.name == "hello-1.0.0.0-setup.exe"
    assert "hello-1.0.0.0-setup-1.bin" in names, names  # DiskSpanning: the payload's slices
    machine.driver(None)
    folder = r"C:\Program Files\ORT GPU (x64)"
    result = inno.install(compiled.setup_exe, folder, log=tmp_path / "setup.log", timeout=1800)
    shutil.rmtree(gpu_output, ignore_errors=True)
    result.check()
    assert "No NVIDIA driver found" in result.log
    app = inno.unix_path(folder)
    try:
        run = inno.run(app / "hello.exe", "--try-provider", CUDA_PROVIDER)
        assert VERSION_LINE in run.stdout.splitlines(), run.errors
        # 126: one of the provider's DLLs is missing; 998: all loaded, then no GPU found.
        assert f"LoadLibrary {CUDA_PROVIDER}:" in run.stdout, run.stdout
        assert f"LoadLibrary {CUDA_PROVIDER}: error 126" not in run.stdout, run.errors
        assert run.missing == (), run.errors
    finally:
        shutil.rmtree(app, ignore_errors=True)


# --- upgrades and per-user installs ----------------------------------------------------------

VC_RUNTIME_DLLS = ("vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll", "msvcp140_1.dll")


def test_an_upgrade_leaves_nothing_of_the_previous_version_behind(
    inno: InnoSetup,
    cpu_cache: Path,
    standins: Path,
    real_dlls: RealDlls,
    mingw_build: Path,
    tmp_path: Path,
) -> None:
    """v1 ships an extra DLL (a plug-in ORT loads at run time, say) and an app-local VC++
    runtime; v2 (VC++ runtime from vc_redist) ships neither. After v2 nothing of v1 that v2
    lacks remains, a file the user made in the app folder survives, and uninstalling leaves
    only that file."""
    fast = ("--iss-compression", "zip/1", "--app-version", "1.0.0")
    cpu = (REPO / "manifests" / "profiles" / f"{CPU}.toml").read_text()
    plugin = '[[runtime_rules]]\ntrigger = "onnxruntime.dll"\nloads = ["libc.dll"]\nwhy = "v1"\n\n'
    profile = tmp_path / "v1-with-a-plugin.toml"
    profile.write_text(cpu.replace("[[runtime_rules]]", plugin + "[[runtime_rules]]", 1))
    plugins = ("--profile", str(profile), "--search", str(mingw_build / "x64"))
    v1 = build(HELLO, tmp_path / "v1", cpu_cache, *plugins, *fast)
    redist = ("--vc-runtime", "installer", "--vc-redist", str(standins / "vc_redist.x64.exe"))
    v2 = build(HELLO, tmp_path / "v2", cpu_cache, "--profile", CPU, *redist, *fast[:2])
    assert "AppId=" in v1.read_text(encoding="utf-8-sig")  # the same app name: the same AppId
    setup1 = inno.compile(v1, tmp_path / "out1").check().setup_exe
    setup2 = inno.compile(v2, tmp_path / "out2").check().setup_exe
    folder = r"C:\upgrade test"
    app = inno.unix_path(folder)
    shutil.rmtree(app, ignore_errors=True)
    # what vc_redist.x64.exe would have put into System32 (the stand-in only logs its run)
    placed = [inno.system32 / name for name in VC_RUNTIME_DLLS]
    try:
        inno.install(setup1, folder, log=tmp_path / "v1.log").check()
        assert (app / "libc.dll").is_file() and (app / "vcruntime140.dll").is_file()
        (app / "my settings.ini").write_text("user data\n")
        for path in placed:  # replaced, not written into: Wine's own are template links
            replace_file(path, (real_dlls["msvc-runtime"] / path.name).read_bytes())
        result = inno.install(setup2, folder, log=tmp_path / "v2.log").check()
        on_disk = {p.relative_to(app).as_posix() for p in app.rglob("*") if p.is_file()}
        assert "libc.dll" not in on_disk, result.log
        assert not set(VC_RUNTIME_DLLS) & on_disk, result.log
        assert "upgrade: removed libc.dll" in result.log
        assert (app / "my settings.ini").read_text() == "user data\n"
        run = inno.run(app / "hello.exe")  # the VC++ runtime now comes from System32
        assert run.stdout.strip() == VERSION_LINE, run.errors
        inno.uninstall(app)
        left = {p.relative_to(app).as_posix() for p in app.rglob("*")} if app.exists() else set()
        assert left == {"my settings.ini"}, left
    finally:
        for path in placed:
            path.unlink(missing_ok=True)
        shutil.rmtree(app, ignore_errors=True)


def test_a_per_user_setup_needs_no_administrator(
    inno: InnoSetup, cpu_cache: Path, standins: Path, tmp_path: Path
) -> None:
    exe = tmp_path / "app" / "hello.exe"
    exe.parent.mkdir()
    shutil.copyfile(HELLO, exe)
    config = tmp_path / "app" / "bundle.toml"
    config.write_text(
        '[build]\nexe = "hello.exe"\nprofile = "ort-1.19.2-cpu"\nout = "dist"\n\n'
        '[render]\ncompression = "zip/1"\ninstall_scope = "user"\n'
    )
    result = bundle("build", "--config", str(config), "--cache-dir", str(cpu_cache))
    assert result.returncode == 0, result.stderr
    script = tmp_path / "app" / "dist" / "setup.iss"
    lines = script.read_text(encoding="utf-8-sig").splitlines()
    assert "PrivilegesRequired=lowest" in lines and "PrivilegesRequired=admin" not in lines
    setup = inno.compile(script, tmp_path / "output").check().setup_exe
    installed = inno.install(setup, None, log=tmp_path / "setup.log").check()
    assert "Administrative install mode: No" in installed.log, installed.log
    programs = inno.prefix / "drive_c" / "users"
    [app] = [p.parent for p in programs.glob("*/AppData/Local/Programs/hello/hello.exe")]
    try:
        run = inno.run(app / "hello.exe")
        assert run.stdout.strip() == VERSION_LINE, run.errors
    finally:
        shutil.rmtree(app, ignore_errors=True)
    # vc_redist needs administrator rights: a per-user installer cannot ship it
    redist = ("--vc-runtime", "installer", "--vc-redist", str(standins / "vc_redist.x64.exe"))
    refused = bundle("build", "--config", str(config), "--cache-dir", str(cpu_cache), *redist)
    assert refused.returncode == 14, refused.stderr
    assert refused.stderr.count("\n") == 1 and "install_scope 'user'" in refused.stderr
