"""The shipped profile catalogue (issue 18): one profile per ORT minor release since 1.19 for
each package, a readable listing, choosing a release by its version, and the drift radar.

The radar (`bundle profiles outdated`) is tested against PEP 691 pages served from 127.0.0.1: pages
that list exactly the shipped catalogue's releases (and the component versions the flavours pin)
must read as current; one release more must be reported, with the command that derives it. The
catalogue's facts are read from the shipped files and checked against what the wheels say
(docs/field-notes.md#newer-releases: CUDA 13.0.88 for 1.27 on ... 1.31.1, dxcore.dll for 1.22.0).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bundler.errors import ExitCode
from bundler.rules.derive.catalogue import entry
from bundler.rules.derive.flavours import available_flavours, load_flavour
from bundler.target.profiles import available_profiles, load_profile, load_profile_file
from tests.support.httpserver import HttpServer
from tests.support.runs import run_bundle

RELEASE = re.compile(r"ort-(\d+\.\d+\.\d+)-(gpu-cuda\d+|cpu|directml)")
# onnxruntime-gpu's newest release on PyPI on 2026-12-01 (docs/field-notes.md#newer-releases)
NEWEST_GPU = "1.31.1"
# docs/field-notes.md#newer-releases: the onnxruntime-gpu minor releases with Windows wheels, newest
# patch each.
GPU_RELEASES = [
    "1.19.2",
    "1.20.2",
    "1.21.1",
    "1.22.0",
    "1.23.2",
    "1.24.4",
    "1.25.1",
    "1.26.0",
    "1.27.0",
    "1.28.0",
    "1.29.0",
    "1.30.0",
    "1.31.1",
]


def shipped() -> dict[str, tuple[str, str]]:
    """profile name -> (release, flavour) for the catalogue's profiles (variants left out)."""
    found = {}
    for name in available_profiles():
        match = RELEASE.fullmatch(name)
        if match:
            found[name] = (match[1], match[2])
    return found


# --- the catalogue ------------------------------------------------------------------------------


def test_every_gpu_release_since_1_19_has_its_profile_with_the_cuda_its_build_says() -> None:
    gpu = {release: flavour for release, flavour in shipped().values() if flavour != "cpu"}
    gpu = {r: f for r, f in gpu.items() if f.startswith("gpu")}
    assert sorted(gpu, key=lambda v: tuple(map(int, v.split(".")))) == GPU_RELEASES
    for release, flavour in gpu.items():
        # docs/field-notes.md#newer-releases / version_info.py: 1.27.0 on are built with CUDA
        # 13.0.88
        newer = tuple(map(int, release.split("."))) >= (1, 27, 0)
        assert flavour == ("gpu-cuda13" if newer else "gpu-cuda12"), release


def test_every_release_has_a_cpu_profile_and_directml_where_it_has_a_wheel() -> None:
    profiles = shipped().values()
    minors = {tuple(r.split(".")[:2]) for r, f in profiles if f.startswith("gpu")}
    cpu = {tuple(r.split(".")[:2]) for r, f in profiles if f == "cpu"}
    directml = {tuple(r.split(".")[:2]) for r, f in profiles if f == "directml"}
    assert minors <= cpu
    # onnxruntime-directml's Windows wheels stop at 1.24.4 (docs/field-notes.md#newer-releases)
    assert {m for m in minors if tuple(map(int, m)) <= (1, 24)} == directml


@pytest.mark.parametrize("name", sorted(available_profiles()))
def test_every_shipped_profile_carries_sizes_signatures_and_licences(name: str) -> None:
    profile = load_profile(name)
    recorded = {item.name.lower() for item in profile.files}
    assert profile.files and all(item.size > 0 for item in profile.files), name
    ort = next(a for a in profile.artifacts if "onnxruntime.dll" in a.provides)
    # Microsoft signs ORT's DLLs (docs/field-notes.md#tools)
    assert ort.signed and ort.licenses, name
    assert "onnxruntime.dll" in recorded
    for artifact in profile.artifacts:
        if all(source.kind == "dir" for source in artifact.sources):
            continue  # a local install (TensorRT): its licence is the user's copy
        assert artifact.licenses, (name, artifact.name)


def test_a_profile_with_dxcore_raises_its_minimum_windows() -> None:
    """1.22.0's onnxruntime.dll imports dxcore.dll (docs/field-notes.md#newer-releases): Windows 10
    2004 on."""
    for name in available_profiles():
        profile = load_profile(name)
        imports = {
            imported.lower()
            for item in profile.files
            for imported in (*item.imports, *item.delay_imports)
        }
        if "dxcore.dll" in imports:
            assert profile.min_windows >= (10, 0, 19041), name
    assert load_profile("ort-1.22.0-gpu-cuda12").min_windows == (10, 0, 19041)


def test_the_default_stays_1_19_2() -> None:
    result = run_bundle("profiles", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["profiles"]
    (default,) = [row for row in rows if row["default"]]
    assert default["name"] == "ort-1.19.2-gpu-cuda12"


def test_the_listing_shows_release_flavour_cuda_cudnn_and_size() -> None:
    result = run_bundle("profiles")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["release", "flavour", "CUDA", "cuDNN", "size", "profile"]
    first = lines[1].split()
    assert first[0] == "1.32.0" or first[0] == NEWEST_GPU  # newest first
    row = next(line.split() for line in lines if line.endswith(f"ort-{NEWEST_GPU}-gpu-cuda13"))
    assert row[:4] == [NEWEST_GPU, "gpu-cuda13", "13.0.88", "9.13.0.50"]
    assert row[5] == "GB"  # "1.5 GB": the recorded DLLs' size
    assert any("gpu-cuda12 (default)" in line for line in lines)


def test_a_release_picks_its_gpu_profile() -> None:
    assert load_profile(NEWEST_GPU).name == f"ort-{NEWEST_GPU}-gpu-cuda13"
    assert load_profile("1.22.0").name == "ort-1.22.0-gpu-cuda12"
    result = run_bundle("deps", "examples/hello/hello.exe", "--profile", "1.99.0")
    assert result.returncode == 6
    assert "no shipped GPU profile for ORT 1.99.0" in result.stderr
    assert f"{NEWEST_GPU}" in result.stderr and "bundle profiles new --ort 1.99.0" in result.stderr


def test_catalogue_entries_read_the_pins() -> None:
    path = available_profiles()["ort-1.22.0-gpu-cuda12"]
    item = entry(load_profile_file(path), path.read_text(encoding="utf-8"))
    assert (item.release, item.kind, item.cuda, item.cudnn) == (
        "1.22.0",
        "gpu",
        "12.4.127",
        "9.1.0.70",
    )
    assert item.derived and item.size > 10**9


# --- the drift radar, against a local PEP 691 index ----------------------------------------------


def _wheel(package: str, version: str) -> dict[str, object]:
    stem = package.replace("-", "_")
    tag = "cp311-cp311" if package.startswith("onnxruntime") else "py3-none"
    name = f"{stem}-{version}-{tag}-win_amd64.whl"
    return {"filename": name, "url": f"../../files/{name}", "hashes": {"sha256": "0" * 64}}


def _page(package: str, versions: list[str]) -> bytes:
    files = [_wheel(package, version) for version in versions]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": package, "files": files}).encode()


def catalogue_index(server: HttpServer, extra: dict[str, list[str]]) -> str:
    """Pages listing exactly what the catalogue covers, plus `extra` releases."""
    listed: dict[str, set[str]] = {}
    packages = {"gpu": "onnxruntime-gpu", "cpu": "onnxruntime", "directml": "onnxruntime-directml"}
    for release, flavour in shipped().values():
        kind = "gpu" if flavour.startswith("gpu") else flavour
        listed.setdefault(packages[kind], set()).add(release)
    for name in available_flavours():
        for components in load_flavour(name).component_sets:
            for package in components.packages:
                listed.setdefault(package.package, set()).add(package.version)
    for name in available_profiles():
        if name.endswith("-windowsml-directml"):  # versions with a build stamp: the pinned one
            ort = next(a for a in load_profile(name).artifacts if "onnxruntime.dll" in a.provides)
            listed.setdefault("onnxruntime-windowsml", set()).add(ort.version)
    for package, versions in extra.items():
        listed.setdefault(package, set()).update(versions)
    for package, versions in listed.items():
        server.serve_bytes(f"/simple/{package}/", _page(package, sorted(versions)))
    return server.url("/simple/")


def outdated(index: str) -> tuple[dict[str, object], int]:
    result = run_bundle("profiles", "outdated", "--index-url", index, "--allow-http", "--json")
    assert result.stdout, result.stderr
    return json.loads(result.stdout), result.returncode


def test_a_catalogue_that_covers_the_index_is_current(http_server: HttpServer) -> None:
    data, code = outdated(catalogue_index(http_server, {}))
    assert code == 0
    assert data["current"] is True and data["behind"] == 0, data
    assert data["missing_releases"] == [] and data["newer_components"] == []
    text = run_bundle("profiles", "outdated", "--index-url", str(data["index_url"]), "--allow-http")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-1].startswith("the catalogue is current: "), text.stdout


def test_one_release_newer_than_the_catalogue_is_reported(http_server: HttpServer) -> None:
    extra = {"onnxruntime-gpu": ["1.33.0", "1.33.0rc1"], "nvidia-cudnn-cu13": ["9.99.0.1"]}
    data, code = outdated(catalogue_index(http_server, extra))
    assert code == ExitCode.CATALOGUE_BEHIND == 24
    assert data["current"] is False and data["behind"] == 2
    assert data["missing_releases"] == [
        {
            "package": "onnxruntime-gpu",
            "release": "1.33.0",
            "kind": "gpu",
            "command": "bundle profiles new --ort 1.33.0",
        }
    ]
    components = data["newer_components"]
    assert isinstance(components, list) and len(components) == 1
    assert components[0]["package"] == "nvidia-cudnn-cu13"
    assert components[0]["newest"] == "9.99.0.1"
    text = run_bundle("profiles", "outdated", "--index-url", str(data["index_url"]), "--allow-http")
    assert text.returncode == 24, text.stderr
    assert "MISSING PROFILES (1):" in text.stdout
    assert "onnxruntime-gpu 1.33.0: bundle profiles new --ort 1.33.0" in text.stdout
    verdict = text.stdout.splitlines()[-1]
    assert verdict.startswith("the catalogue is behind: 2 releases not covered (1 ORT, 1 "), verdict
    assert verdict.endswith("(exit 24)"), verdict


def test_a_newer_windowsml_release_is_reported_and_directml_is_frozen(
    http_server: HttpServer,
) -> None:
    """onnxruntime-windowsml's versions carry a build stamp: a 1.31 build is a missing release,
    with the exact version to derive; an older minor (1.24, onnxruntime-directml's) is not the
    catalogue's business here. onnxruntime-directml is said to be frozen at 1.24.4
    (microsoft/DirectML#712), with the package that carries DirectML on."""
    newer, old = "1.31.0.202611010000", "1.24.6.202605042033"
    data, code = outdated(catalogue_index(http_server, {"onnxruntime-windowsml": [newer, old]}))
    assert code == ExitCode.CATALOGUE_BEHIND == 24
    assert data["missing_releases"] == [
        {
            "package": "onnxruntime-windowsml",
            "release": newer,
            "kind": "windowsml-directml",
            "command": f"bundle profiles new --ort {newer} --flavour windowsml-directml",
        }
    ]
    checked = data["releases_checked"]["onnxruntime-windowsml"]  # type: ignore[index]
    assert checked[0] == "1.25.2.202605110140" and old not in checked
    assert data["frozen"] == [
        {
            "package": "onnxruntime-directml",
            "last": "1.24.4",
            "why": "its last release, March 2026; DirectML is no longer in active development "
            "(microsoft/DirectML#712)",
            "successor": "onnxruntime-windowsml",
        }
    ]
    text = run_bundle("profiles", "outdated", "--index-url", str(data["index_url"]), "--allow-http")
    assert text.returncode == 24, text.stderr
    assert f"  onnxruntime-windowsml {newer}: bundle profiles new --ort {newer}" in text.stdout
    assert "  onnxruntime-directml: frozen at 1.24.4 (" in text.stdout
    assert "with onnxruntime-windowsml" in text.stdout


def test_a_newer_build_of_a_shipped_windowsml_release_is_reported(http_server: HttpServer) -> None:
    rebuilt = "1.30.0.202612010000"  # the same ORT release, built again
    data, code = outdated(catalogue_index(http_server, {"onnxruntime-windowsml": [rebuilt]}))
    assert code == 24 and data["behind"] == 1, data
    assert [item["release"] for item in data["missing_releases"]] == [rebuilt]  # type: ignore[attr-defined]


def test_ep_packs_are_listed_with_their_newest_windows_release(http_server: HttpServer) -> None:
    """The plugin EPs on the index, newest Windows release each (a newer Linux-only or yanked
    release does not count), beside the version manifests/eps/ pins; one the index lacks is
    listed as absent; a pack at its pin, or one no pack ships, leaves the catalogue current."""
    rtx, openvino = "onnxruntime-ep-nv-tensorrt-rtx-cu13", "onnxruntime-ep-openvino"
    files = [_wheel(rtx, "0.4.0"), _wheel(rtx, "0.5.0")]
    files.append({**_wheel(rtx, "0.6.0"), "yanked": True})
    linux = _wheel(rtx, "0.7.0")
    linux["filename"] = str(linux["filename"]).replace("win_amd64", "manylinux_2_28_x86_64")
    page = {"meta": {"api-version": "1.1"}, "name": rtx, "files": [*files, linux]}
    http_server.serve_bytes(f"/simple/{rtx}/", json.dumps(page).encode())
    http_server.serve_bytes(f"/simple/{openvino}/", _page(openvino, ["1.0.0", "1.8.1"]))
    cu12 = "onnxruntime-ep-nv-tensorrt-rtx-cu12"
    http_server.serve_bytes(f"/simple/{cu12}/", _page(cu12, ["0.9.0"]))
    data, code = outdated(catalogue_index(http_server, {}))
    assert code == 0 and data["current"] is True, data
    packs = {pack["package"]: pack for pack in data["ep_packs"]}  # type: ignore[attr-defined]
    assert packs[rtx] == {
        "package": rtx,
        "newest": "0.5.0",
        "listed": True,
        "pinned": "0.5.0",  # manifests/eps/nv-tensorrt-rtx.toml
        "pack": "nv-tensorrt-rtx",
        "behind": False,
    }
    assert packs[openvino]["newest"] == "1.8.1" and packs[openvino]["pinned"] == "1.8.1"
    assert packs[cu12]["pinned"] is None and packs[cu12]["behind"] is False  # no pack ships it
    webgpu = packs["onnxruntime-ep-webgpu"]
    assert webgpu["newest"] is None and webgpu["listed"] is False
    text = run_bundle("profiles", "outdated", "--index-url", str(data["index_url"]), "--allow-http")
    lines = text.stdout.splitlines()
    start = lines.index("EP PACKS (bundle build --ep):")
    assert f"  {rtx}: 0.5.0; --ep nv-tensorrt-rtx pins 0.5.0" in lines[start:]
    assert f"  {cu12}: 0.9.0; no pack ships it" in lines[start:]
    assert "  onnxruntime-ep-webgpu: not on this index; --ep webgpu pins 0.4.0" in lines[start:]


def test_a_newer_release_of_a_pinned_ep_pack_puts_the_catalogue_behind(
    http_server: HttpServer,
) -> None:
    webgpu = "onnxruntime-ep-webgpu"
    http_server.serve_bytes(f"/simple/{webgpu}/", _page(webgpu, ["0.4.0", "0.5.0"]))
    data, code = outdated(catalogue_index(http_server, {}))
    assert code == ExitCode.CATALOGUE_BEHIND and data["behind"] == 1, data
    packs = {pack["package"]: pack for pack in data["ep_packs"]}  # type: ignore[attr-defined]
    assert packs[webgpu]["pinned"] == "0.4.0" and packs[webgpu]["behind"] is True
    text = run_bundle("profiles", "outdated", "--index-url", str(data["index_url"]), "--allow-http")
    assert text.returncode == 24, text.stderr
    assert (
        f"  {webgpu}: 0.5.0 is newer: --ep webgpu pins 0.4.0; update manifests/eps/webgpu.toml"
        in text.stdout.splitlines()
    )
    verdict = text.stdout.splitlines()[-1]
    assert "(0 ORT, 0 CUDA/cuDNN component, 1 EP pack)" in verdict, verdict
    assert "update the pin of each newer EP pack" in verdict, verdict


def test_an_unreachable_index_is_a_fetch_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUNDLE_HTTP_RETRIES", "0")
    result = run_bundle(
        "profiles", "outdated", "--index-url", "http://127.0.0.1:9/simple/", "--allow-http"
    )
    assert result.returncode == 8, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
