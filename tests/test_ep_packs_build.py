"""`bundle build --ep NAME` (issue 31): execution-provider packs beside the core ORT, as a user
runs it: the packs' manifests, the refusals before any work, and (real_tools) bundles of ORT
1.31.1 with each pack and with all three from the pinned wheels, their lock, and the audit of a
folder that lost a pack DLL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bundler.eps.plugins import available_packs, load_pack, load_pack_file
from bundler.errors import ConfigError, ProfileError
from tests.support.cache_links import RELEASES, kept_cache
from tests.support.paths import HELLO, REPO, test_cache_dir
from tests.support.runs import pip_env, run_bundle
from tests.support.skips import require

CPU_131 = "ort-1.31.1-cpu"
GPU_131 = "ort-1.31.1-gpu-cuda13"
FOLDERS = {
    "webgpu": "ep/webgpu",
    "openvino": "ep/openvino",
    "nv-tensorrt-rtx": "ep/nv_tensorrt_rtx",
}


def test_every_shipped_pack_loads_with_its_pin_and_files() -> None:
    assert set(available_packs()) == set(FOLDERS)
    for name, folder in FOLDERS.items():
        pack = load_pack(name)
        assert pack.folder == folder
        shipped = {item.name for item in pack.shipped()}
        assert pack.plugin in shipped
        assert not shipped & set(pack.not_shipped)
        assert not shipped & {d for d in pack.driver_dlls}
        assert pack.artifact().sources == (pack.source.pip,)
    assert load_pack("openvino").data_files == ("cache.json", "openvino_runtime.manifest")
    assert load_pack("webgpu").vc_runtime_in_pack == ("msvcp140_atomic_wait.dll",)


def test_unknown_pack_names_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean webgpu"):
        load_pack("webgpo")


def test_a_manifest_error_names_file_and_key(tmp_path: Path) -> None:
    text = (REPO / "manifests" / "eps" / "webgpu.toml").read_text(encoding="utf-8")
    broken = tmp_path / "webgpu.toml"
    broken.write_text(text.replace('min_ort = "1.24.4"', 'min_ort = "newest"'), encoding="utf-8")
    with pytest.raises(ProfileError, match=r"webgpu.toml: key 'min_ort' must be an ORT release"):
        load_pack_file(broken)
    broken.write_text(text.replace("data_files = []", 'data_files = ["cache.jsn"]'))
    with pytest.raises(ProfileError, match=r"key 'data_files' names cache.jsn"):
        load_pack_file(broken)


def test_unknown_pack_is_refused_with_exit_14_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_bundle(
        "build", str(HELLO), "--profile", CPU_131, "--ep", "webgpo", "--out", str(out),
        "--cache-dir", str(tmp_path / "cache"), "--offline",
    )  # fmt: skip
    assert result.returncode == 14, result.stderr
    assert "--ep webgpo: unknown execution-provider pack 'webgpo'; did you mean webgpu?" in (
        result.stderr
    )
    assert not out.exists()


@pytest.mark.parametrize("dry_run", [False, True])
def test_pack_below_its_ort_minimum_is_refused_with_exit_25(tmp_path: Path, dry_run: bool) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    result = run_bundle(
        "build", str(HELLO), "--profile", "ort-1.23.2-cpu", "--ep", "webgpu", "--out", str(out),
        "--cache-dir", str(cache), "--offline", *(["--dry-run"] if dry_run else []),
    )  # fmt: skip
    assert result.returncode == 25, result.stderr
    assert "--ep webgpu: the pack needs ONNX Runtime 1.24.4 or newer" in result.stderr
    assert "ort-1.23.2-cpu pins 1.23.2" in result.stderr
    assert "or drop the pack" in result.stderr
    assert not out.exists() and not cache.exists()


def test_bundle_toml_eps_are_checked_and_named(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    shutil.copy(HELLO, app / "hello.exe")
    (app / "bundle.toml").write_text(
        '[build]\nexe = "hello.exe"\nprofile = "ort-1.22.1-cpu"\nout = "dist"\n'
        'eps = ["openvino", "webgpu"]\n',
        encoding="utf-8",
    )
    result = run_bundle("build", "--cache-dir", str(tmp_path / "cache"), "--offline", cwd=app)
    assert result.returncode == 25, result.stderr
    assert 'bundle.toml [build] eps "openvino": the pack needs ONNX Runtime 1.23' in result.stderr
    assert not (app / "dist").exists()


# --- real wheels ----------------------------------------------------------------------------


def _wheels(*packs: str) -> None:
    wheels = test_cache_dir() / "wheels"
    for name in packs:
        wheel = load_pack(name).source.pip.wheel
        require(
            (wheels / wheel).is_file(),
            f"{wheel} not in {wheels}: run python -m tools.testing.fetch_test_wheels",
        )


def _build(
    out: Path, cache: Path, profile: str, *packs: str, link: bool = False
) -> dict[str, object]:
    """`bundle build` of examples/hello with `packs`; `link` hard-links the files from the cache
    (the 2.5 GB GPU folder costs no disk)."""
    args = [str(HELLO), "--profile", profile, "--out", str(out), "--cache-dir", str(cache)]
    args += ["--sbom", *(["--link"] if link else [])]
    for name in packs:
        args += ["--ep", name]
    result = subprocess.run(
        [sys.executable, "-m", "bundler", "build", *args, "--json"],
        capture_output=True, encoding="utf-8", env={**os.environ, "BUNDLE_DEBUG": "", **pip_env()},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


@pytest.fixture(scope="module")
def ep_cache(gpu_cache: Path) -> Path:
    """The module's builds (the 1.31.1 GPU profile and the packs: gigabytes) take the kept cache
    of released wheels (tests/support/cache_links.kept_cache), seeded with the session's
    archives as hard links: the CUDA 13 set and the packs are fetched, verified and extracted
    on a first run only, and found by SHA-256 after that."""
    return kept_cache(RELEASES, seed=gpu_cache)


def _check_pack_folder(out: Path, name: str, lock: dict[str, object]) -> None:
    pack = load_pack(name)
    folder = out / pack.folder
    expected = {item.name for item in pack.shipped()} | set(pack.vc_runtime_in_pack)
    assert {path.name for path in folder.iterdir()} == expected
    for item in pack.shipped():  # the bytes of the pinned wheel
        assert (folder / item.name).stat().st_size == item.size
    for driver in pack.driver_dlls:
        assert not (folder / driver).exists()
    for item in pack.licence_files():
        assert (out / "licenses" / name / item.name).is_file()
    files = {entry["name"]: entry for entry in lock["files"]}  # type: ignore[attr-defined]
    for item in pack.shipped():
        entry = files[f"{pack.folder}/{item.name}"]
        assert entry["kind"] == "ep" and entry["sha256"] == item.sha256
        assert entry["origin"] == f"pip:{pack.source.pip.package}=={pack.source.pip.version}"
    (locked,) = [p for p in lock["eps"] if p["name"] == name]  # type: ignore[attr-defined]
    assert locked["plugin"] == f"{pack.folder}/{pack.plugin}"
    assert locked["registration_name"] == pack.registration_name
    assert locked["min_ort"] == pack.min_ort
    # manifests/ep-matrix.toml: every pack registered with ORT 1.31.1 under Wine (issue 40)
    assert (locked["proof"], locked["proof_note"]) == ("registered", "")
    assert locked["size"] == sum((folder / n).stat().st_size for n in expected)


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["webgpu", "openvino", "nv-tensorrt-rtx"])
def test_cpu_bundle_with_one_pack(name: str, tmp_path: Path, ep_cache: Path) -> None:
    _wheels(name)
    out = tmp_path / "out"
    data = _build(out, ep_cache, CPU_131, name)
    lock = json.loads((out / "bundle.lock.json").read_text(encoding="utf-8"))
    _check_pack_folder(out, name, lock)
    assert [p["name"] for p in data["eps"]] == [name]  # type: ignore[index]
    assert data["packs"] == data["eps"]  # the name before "eps", kept
    assert {p.name for p in (out / "ep").iterdir()} == {Path(FOLDERS[name]).name}
    sbom = json.loads((out / "bundle.cdx.json").read_text(encoding="utf-8"))
    pack = load_pack(name)
    (plugin_entry,) = [c for c in sbom["components"] if c["name"].endswith("/" + pack.plugin)]
    assert plugin_entry["version"] == pack.source.pip.version
    assert plugin_entry["licenses"] == [{"expression": pack.license}]
    assert plugin_entry["purl"] == f"pkg:pypi/{pack.source.pip.package}@{pack.source.pip.version}"
    dat = (out / "bundle-doctor.dat").read_text(encoding="utf-8").splitlines()
    need = pack.hardware  # what the doctor judges on the target, from the pack's manifest
    record = (name, pack.folder, f"{pack.folder}/{pack.plugin}", need.probe)
    record += (need.min_compute_capability or "-", need.min_driver or "-", need.needs)
    record += (pack.min_ort,)  # format 2 (issue 40): the doctor prints it beside the ORT loaded
    assert "\t".join(("ep", *record)) in dat
    script = (out / "postbuild.cmd").read_text(encoding="utf-8")  # the VS post-build step
    plugin = load_pack(name).plugin
    assert f'"%TARGET%\\{FOLDERS[name].replace("/", chr(92))}\\"' in script, "pack folder"
    assert plugin in script


@pytest.mark.realdata
def test_gpu_bundle_with_all_three_packs_then_audit_names_a_lost_dll(
    tmp_path: Path, ep_cache: Path
) -> None:
    _wheels(*FOLDERS)
    out = tmp_path / "out"
    _build(out, ep_cache, GPU_131, *FOLDERS, link=True)
    lock = json.loads((out / "bundle.lock.json").read_text(encoding="utf-8"))
    for name in FOLDERS:
        _check_pack_folder(out, name, lock)
    # the CUDA provider's modes (issue 40): its exports, onnxruntime.dll's build information
    assert lock["cuda_ep"] == {"plugin_capable": True, "default_mode": "legacy"}
    lost = out / "ep" / "nv_tensorrt_rtx" / "tensorrt_rtx_1_7.dll"
    lost.unlink()
    audit = run_bundle("audit", str(out), "--json")
    assert audit.returncode == 17, audit.stderr
    report = json.loads(audit.stdout)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert [(f["code"], f["files"]) for f in errors] == [
        ("BA402", ["ep/nv_tensorrt_rtx/tensorrt_rtx_1_7.dll"])
    ]
    assert [item["name"] for item in report["restore"]] == [
        "ep/nv_tensorrt_rtx/tensorrt_rtx_1_7.dll"
    ]
    # each pack's size here against the lock's: the TensorRT RTX pack lacks one file
    packs = {pack["name"]: pack for pack in report["eps"]}
    trt = packs["nv-tensorrt-rtx"]
    assert trt["files"] == trt["locked_files"] - 1
    locked = {item["name"]: item["size"] for item in lock["files"]}  # type: ignore[index]
    assert trt["size"] == trt["locked_size"] - locked["ep/nv_tensorrt_rtx/tensorrt_rtx_1_7.dll"]
    assert all(p["size"] == p["locked_size"] for name, p in packs.items() if name != trt["name"])
    text = run_bundle("audit", str(out)).stdout
    assert "  nv-tensorrt-rtx (ep/nv_tensorrt_rtx/): " in text


@pytest.mark.realdata
def test_a_pack_a_setup_left_out_is_not_missing_but_a_lost_folder_is(
    tmp_path: Path, ep_cache: Path
) -> None:
    """bundle-installed.txt (what a setup installed, Windows separators, UTF-8 with BOM) that
    does not list the pack's files, and no pack folder: BA405 (info), nothing to restore. The
    same folder without that list is a build's output that lost a folder: BA402 for each."""
    _wheels("webgpu")
    out = tmp_path / "out"
    _build(out, ep_cache, CPU_131, "webgpu", link=True)
    pack = load_pack("webgpu")
    shutil.rmtree(out / pack.folder)
    names = [p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()]
    listed = "\r\n".join(name.replace("/", "\\") for name in names)
    (out / "bundle-installed.txt").write_text(listed, encoding="utf-8-sig")
    installed = run_bundle("audit", str(out), "--json")
    report = json.loads(installed.stdout)
    codes = [(f["code"], f["files"]) for f in report["findings"] if f["code"].startswith("BA40")]
    assert codes == [("BA405", [f"{pack.folder}/{pack.plugin}"])], installed.stdout
    assert installed.returncode == 0 and report["restore"] == []
    (out / "bundle-installed.txt").unlink()
    built = run_bundle("audit", str(out), "--json")
    lost = {f["files"][0] for f in json.loads(built.stdout)["findings"] if f["code"] == "BA402"}
    assert built.returncode == 17
    assert lost == {f"{pack.folder}/{item.name}" for item in pack.shipped()} | {
        f"{pack.folder}/{vc}" for vc in pack.vc_runtime_in_pack
    }


@pytest.mark.realdata
def test_audit_flags_a_pack_beside_an_older_ort(tmp_path: Path, ep_cache: Path) -> None:
    _wheels("webgpu")
    old = test_cache_dir() / "extracted" / "onnxruntime-1.23.2-cp311-cp311-win_amd64"
    found = sorted(old.rglob("onnxruntime.dll"))
    require(
        bool(found),
        f"ORT 1.23.2's DLLs not in {old}: run python -m tools.testing.fetch_test_wheels",
    )
    out = tmp_path / "out"
    _build(out, ep_cache, CPU_131, "webgpu")
    shutil.copyfile(found[0], out / "onnxruntime.dll")
    audit = run_bundle("audit", str(out), "--json")
    assert audit.returncode == 17
    codes = {f["code"]: f for f in json.loads(audit.stdout)["findings"]}
    assert codes["BA206"]["files"] == ["ep/webgpu/onnxruntime_providers_webgpu.dll"]
    assert "needs ONNX Runtime 1.24.4 or newer" in codes["BA206"]["message"]
