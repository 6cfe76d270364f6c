"""DirectML after onnxruntime-directml's last release (issue 40, part 1): the profiles derived
from Windows ML's build, `onnxruntime-windowsml`, one per ORT minor release from 1.25.2 to
1.30.0 (docs/catalogue.md, "DirectML after 1.24.4").

Each profile builds examples/hello from the pinned wheel (pip takes it from the test cache),
and the folder holds onnxruntime.dll and DirectML.dll and no VC++ runtime: neither DLL imports
one (checked here on the deployed files' import tables, not on the profile's record), and the
exe does not either. The audit of the folder is clean, and Wine's loader runs the real app,
which prints the version ORT reports: the release in the profile's name, which is the ORT
release PyPI lists the package under (its version, less the build stamp); bundle-doctor.exe
expects that same release (no BA807). One Wine prefix (the session's), one cache for the four
builds, each folder hard-linked into it (--link).
"""

from __future__ import annotations

import json
from pathlib import Path

import pefile
import pytest

from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.target.profiles import available_profiles, load_profile
from tests.support.paths import HELLO
from tests.support.runs import cli, pip_env
from tests.support.wine import Wine

pytestmark = pytest.mark.real_tools

# https://pypi.org/simple/onnxruntime-windowsml/ (read 2026-12-05): the newest win_amd64 build of
# each ORT minor release from 1.25 to 1.30 (there is no 1.26 and no 1.29).
RELEASES = {
    "1.25.2": "1.25.2.202605110140",
    "1.27.1": "1.27.1.202607110137",
    "1.28.3": "1.28.3.202610130701",
    "1.30.0": "1.30.0.202609102321",
}
PROFILES = [f"ort-{release}-windowsml-directml" for release in RELEASES]


def test_the_catalogue_has_one_windowsml_profile_per_release() -> None:
    shipped = sorted(name for name in available_profiles() if "windowsml" in name)
    assert shipped == sorted(PROFILES)
    for release, version in RELEASES.items():
        profile = load_profile(f"ort-{release}-windowsml-directml")
        ort = next(a for a in profile.artifacts if "onnxruntime.dll" in a.provides)
        assert (ort.name, ort.version) == ("onnxruntime-windowsml", version)
        assert ort.signed and ort.licenses == ("LICENSE", "ThirdPartyNotices.txt")
        assert profile.roots == ("onnxruntime.dll",)  # no onnxruntime_providers_shared.dll


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the four builds: each wheel is verified and extracted once."""
    return tmp_path_factory.mktemp("windowsml-cache")


def imports(path: Path) -> set[str]:
    pe = pefile.PE(str(path), fast_load=True)
    pe.parse_data_directories(
        directories=[
            pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
            pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
        ]
    )
    tables = (*getattr(pe, "DIRECTORY_ENTRY_IMPORT", ()),)
    tables += (*getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", ()),)
    pe.close()
    return {entry.dll.decode("ascii").lower() for entry in tables}


@pytest.mark.parametrize("name", PROFILES)
def test_a_windowsml_bundle_ships_no_vc_runtime_audits_clean_and_runs(
    name: str, cache: Path, wine: Wine, tmp_path: Path
) -> None:
    out = tmp_path / "bundle"
    args = ("build", str(HELLO), "--profile", name, "--out", str(out), "--cache-dir", str(cache))
    build = cli((*args, "--link"), env=pip_env())
    assert build.returncode == 0, build.stderr
    dlls = {path.name.lower() for path in out.glob("*.dll")}
    assert dlls == {"onnxruntime.dll", "directml.dll"}, dlls
    for dll in ("onnxruntime.dll", "DirectML.dll"):
        assert not imports(out / dll) & VC_RUNTIME_DLLS, dll  # static CRT: nothing to ship
    assert "directml.dll" in imports(out / "onnxruntime.dll")  # delay-loaded
    lock = json.loads((out / "bundle.lock.json").read_text(encoding="utf-8"))
    assert not {item["name"].lower() for item in lock["files"]} & VC_RUNTIME_DLLS
    audit = cli(("audit", str(out)))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert ": 0 errors, 0 warnings," in audit.stdout, audit.stdout
    run = wine.run(out / "hello.exe", "--try-provider", "DirectML.dll")
    release = name.split("-")[1]
    assert f"ORT version: {release}" in run.stdout, run.errors
    assert "LoadLibrary DirectML.dll: ok" in run.stdout, run.errors  # d3d12: Wine's own
    # The lock and the doctor know the ORT release, not the package's build stamp: ORT reports
    # "1.30.0", and a doctor expecting "1.30.0.202609102321" would call it a mismatch (BA807).
    assert lock["ort_version"] == release
    doctor = wine.run(out / "bundle-doctor.exe")
    assert f"(profile {name}," in doctor.stdout, doctor.errors
    assert "BA807" not in doctor.stdout, doctor.stdout
    assert run.missing == (), run.errors


def test_installer_mode_has_nothing_to_install_and_needs_no_vc_redist(
    cache: Path, tmp_path: Path
) -> None:
    """docs/building.md, "The VC++ runtime": nothing here imports the runtime, so installer
    mode ships no vc_redist.x64.exe and its setup script runs none."""
    out = tmp_path / "bundle"
    args = ("build", str(HELLO), "--profile", PROFILES[-1], "--out", str(out))
    build = cli(
        (*args, "--cache-dir", str(cache), "--link", "--vc-runtime", "installer"), env=pip_env()
    )
    assert build.returncode == 0, build.stderr
    assert not (out / "vc_redist.x64.exe").exists()
    assert {path.name.lower() for path in out.glob("*.dll")} == {"onnxruntime.dll", "directml.dll"}
    assert "vc_redist" not in (out / "setup.iss").read_text(encoding="utf-8").lower()
