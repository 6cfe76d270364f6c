"""The catalogue on the real wheels (issue 18): the CUDA 13 trap, a derivation that reproduces
the shipped profile, a mismatch refused at build time, `profiles check` on every profile whose
wheels CI fetches, and the catalogue proof (tools/manifests/catalogue_proof.py) under Wine for three
releases: 1.19.2, 1.22.0 (a CUDA 12 release after 1.21 that imports dxcore.dll) and 1.31.1
(the newest, CUDA 13).

Facts checked here come from the wheels (docs/field-notes.md#newer-releases: 1.31.1's
version_info.py says CUDA 13.0.88 and its CUDA provider imports cublas64_13.dll), not from our
output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundler.rules.derive.catalogue import differences, profile_facts
from bundler.target.profiles import PipSource, available_profiles, load_profile, load_profile_file
from tests.support.cache_links import RELEASES, kept_cache
from tests.support.package_index import local_index as local_index  # the module fixture, reused
from tests.support.package_index import profiles_new
from tests.support.paths import HELLO, REPO
from tests.support.profiles import without_rule
from tests.support.runs import pip_env
from tests.support.wine import Wine

CUDA13 = "ort-1.31.1-gpu-cuda13"
WINDOWSML = "ort-1.30.0-windowsml-directml"
DXCORE = "ort-1.22.0-gpu-cuda12"
PROVED = ("ort-1.19.2-gpu-cuda12", DXCORE, CUDA13)
# What CI fetches (tools/testing/fetch_test_wheels.py TESTED) can be checked here: every CPU and
# DirectML profile (small wheels), the 1.19.2 ones, and the two newer GPU releases.
CHECKED = sorted(
    name
    for name in available_profiles()
    if name.endswith(("-cpu", "-directml", "1.19.2-gpu-cuda12")) or name in (DXCORE, CUDA13)
)


def bundle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env()},
    )


@pytest.fixture(scope="module")
def catalogue_cache(gpu_cache: Path) -> Path:
    """The kept cache of released wheels (tests/support/cache_links.kept_cache), seeded with the
    session's GPU cache: the releases here share its CUDA 12.4 set and add only what they pin
    besides, fetched and verified on a first run only (the wheels come through pip from the
    test cache)."""
    return kept_cache(RELEASES, seed=gpu_cache)


# --- the CUDA 13 trap ------------------------------------------------------------------------


@pytest.mark.realdata
def test_a_cuda12_flavour_for_the_cuda13_build_is_refused(
    local_index: str, catalogue_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "wrong.toml"
    result = profiles_new(
        local_index,
        catalogue_cache,
        "--ort",
        "1.31.1",
        "--flavour",
        "gpu-cuda12",
        "--out",
        str(out),
    )
    assert result.returncode == 21, result.stderr
    (line,) = [text for text in result.stderr.splitlines() if text.startswith("error:")]
    assert "CUDA 13.0.88" in line and "gpu-cuda12 is for CUDA 12" in line
    assert "--flavour gpu-cuda13" in line
    assert not out.exists()


@pytest.mark.realdata
def test_deriving_1_31_1_reproduces_the_shipped_cuda13_profile(
    local_index: str, catalogue_cache: Path, tmp_path: Path
) -> None:
    """No --flavour: the wheel's own version_info.py picks gpu-cuda13."""
    out = tmp_path / "derived.toml"
    result = profiles_new(local_index, catalogue_cache, "--ort", "1.31.1", "--out", str(out))
    assert result.returncode == 0, result.stderr
    derived = profile_facts(load_profile_file(out))
    assert differences(profile_facts(load_profile(CUDA13)), derived) == []
    assert "cublas64_13.dll" in {
        name.lower() for a in load_profile(CUDA13).artifacts for name in a.provides
    }
    text = out.read_text()
    assert "states CUDA 13.0.88" in text and "component set cuda-13.0.1" in text
    # the CUDA provider's modes (issue 40), each with what it was read from
    assert derived["cuda_ep"] == {"plugin_capable": True, "default_mode": "legacy"}
    assert "plugin_capable = true  # onnxruntime_providers_cuda.dll exports CreateEpFactories" in (
        text
    )
    assert not any("cudart64_12" in rule for rule in derived["rules"])  # a fallback string


@pytest.mark.realdata
def test_deriving_windowsml_1_30_0_reproduces_the_shipped_profile(
    local_index: str, catalogue_cache: Path, tmp_path: Path
) -> None:
    """`--ort 1.30.0` of onnxruntime-windowsml, whose versions carry a build stamp: the newest
    build of 1.30.0 on the index is pinned exactly, and the profile is named by the release."""
    out = tmp_path / "derived.toml"
    args = ("--ort", "1.30.0", "--flavour", "windowsml-directml", "--out", str(out))
    result = profiles_new(local_index, catalogue_cache, *args)
    assert result.returncode == 0, result.stderr
    derived = load_profile_file(out)
    assert derived.name == WINDOWSML
    assert differences(profile_facts(load_profile(WINDOWSML)), profile_facts(derived)) == []
    assert derived.roots == ("onnxruntime.dll",) and not derived.runtime_rules
    text = out.read_text()
    assert (
        'version = "1.30.0.202609102321"' in text
    )  # https://pypi.org/simple/onnxruntime-windowsml/


# --- a mismatch found at build time ----------------------------------------------------------


def cuda12_cublas_for(profile: Path, target: Path) -> Path:
    """The CUDA 13 profile with its cuBLAS artifact swapped for the 1.19.2 profile's CUDA 12
    one (its pinned wheel): the provider still imports cublas64_13.dll."""
    text = profile.read_text(encoding="utf-8").split("\n# --- [[files]]")[0]
    start = text.index('name = "cublas"')
    end = text.index("[[artifacts]]", start)
    cuda12 = next(a for a in load_profile("ort-1.19.2-gpu-cuda12").artifacts if a.name == "cublas")
    pip = next(source for source in cuda12.sources if isinstance(source, PipSource))
    provides = ", ".join(f'"{name}"' for name in cuda12.provides)
    block = (
        f'name = "cublas"\nversion = "{cuda12.version}"\nprovides = [{provides}]\n'
        'licenses = ["License.txt"]\n\n[[artifacts.sources]]\nkind = "pip"\n'
        f'package = "{pip.package}"\nversion = "{pip.version}"\nwheel = "{pip.wheel}"\n'
        f'sha256 = "{pip.sha256}"\n\n'
    )
    target.write_text(text[:start] + block + text[end:] + "\n")
    return target


@pytest.mark.realdata
def test_a_profile_pinning_the_wrong_cuda_major_fails_the_build(
    catalogue_cache: Path, tmp_path: Path
) -> None:
    profile = cuda12_cublas_for(load_profile(CUDA13).path, tmp_path / "wrong.toml")
    out = tmp_path / "dist"
    result = bundle(
        "build", str(HELLO), "--profile", str(profile), "--out", str(out),
        "--cache-dir", str(catalogue_cache),
    )  # fmt: skip
    assert result.returncode == 21, result.stdout + result.stderr
    assert (
        "onnxruntime_providers_cuda.dll imports cublas64_13.dll, but the profile pins "
        "cublas64_12.dll"
    ) in result.stderr
    assert not out.exists()


@pytest.mark.realdata
def test_the_dxcore_release_raises_the_installers_min_version(
    catalogue_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dist"
    result = bundle(
        "build", str(HELLO), "--ort", "1.22.0", "--out", str(out), "--cache-dir",
        str(catalogue_cache), "--link",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    iss = (out / "setup.iss").read_text(encoding="utf-8-sig")
    assert "MinVersion=10.0.19041" in iss
    assert not (out / "dxcore.dll").exists()  # a Windows DLL: never shipped


# --- profiles check on what CI fetches -----------------------------------------------------------


@pytest.mark.realdata
@pytest.mark.parametrize("name", CHECKED)
def test_profiles_check_passes_and_fails_without_one_rule(
    name: str, catalogue_cache: Path, tmp_path: Path
) -> None:
    args = ("--cache-dir", str(catalogue_cache), "--source", "pip")
    passed = bundle("profiles", "check", name, *args)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    profile = load_profile(name)
    rules = [r for r in profile.runtime_rules if not all(map(profile.is_driver, r.loads))]
    if not rules:  # onnxruntime-windowsml: onnxruntime.dll loads no DLL of its wheel at run time
        assert name.endswith("-windowsml-directml"), name
        return
    rule = rules[0]
    trigger = rule.trigger  # a driver DLL rule is no evidence the check needs (never shipped)
    broken = without_rule(profile.path, tmp_path / f"{name}.toml", trigger)
    failed = bundle("profiles", "check", str(broken), *args, "--json")
    assert failed.returncode == 6, failed.stdout + failed.stderr
    report = json.loads(failed.stdout)
    assert any(item["trigger"].lower() == trigger.lower() for item in report["drifts"]), report


# --- the catalogue proof under Wine ---------------------------------------------------------


@pytest.mark.realdata
def test_the_catalogue_proof_of_three_releases(
    catalogue_cache: Path, wine: Wine, tmp_path: Path
) -> None:
    report = tmp_path / "proof.json"
    result = subprocess.run(
        [sys.executable, "-m", "tools.manifests.catalogue_proof", *PROVED,
         "--cache", str(catalogue_cache), "--work", str(tmp_path / "work"),
         "--prefix", str(wine.prefix), "--json", str(report)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env()},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["profile"]: row for row in json.loads(report.read_text())}
    assert list(rows) == list(PROVED)
    for name, row in rows.items():
        release = name.split("-")[1]
        assert row["printed"] == release, row
        assert row["provider"] != "error 126" and row["missing"] == [], row
    assert rows[CUDA13]["cuda"].startswith("13.")
    table = result.stdout.splitlines()
    assert table[0].startswith("| release | CUDA | files |") and len(table) == 2 + len(PROVED)
