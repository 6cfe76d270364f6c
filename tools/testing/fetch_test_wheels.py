"""Fetch the real Windows wheels pinned by bundle's profiles and extract their DLLs, for tests.

The pins (package, version, wheel file, SHA-256) are read from the tested profiles in
manifests/profiles/ (TESTED), so the tests use exactly what the profiles promise;
`extra_wheels()` adds the wheels of releases no tested profile pins (the second release
`bundle profiles new` is tested on), `ep_wheels()` the execution-provider packs pinned in
manifests/eps/ (issue 31). Wheels go to <cache>/wheels, DLLs and licence files to
<cache>/extracted/<wheel stem>/ (every file of an EP pack's wheel: a pack needs its data files
too); a `.complete` marker makes re-runs free. Of the profiles in CORE_ONLY only the core is
kept (onnxruntime.dll and the DLLs beside it that registering an EP pack needs), under
<cache>/cores/<wheel stem>/, and their wheel is deleted.

    python -m tools.testing.fetch_test_wheels [--cache DIR] [--search-args PROFILE]

With --search-args, progress goes to stderr and stdout gets the `--search DIR` arguments that
point `bundle` at the DLL folders of PROFILE's wheels (used by the README's first command).

The cache defaults to $BUNDLE_TEST_CACHE, else $XDG_CACHE_HOME/bundle-tests (~/.cache/...).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from bundler.acquire.sources import pip_download
from bundler.disk.digest import file_sha256
from bundler.errors import BundleError
from bundler.target.profiles import PipSource, Profile, available_profiles, dll_key, load_profile

REPO = Path(__file__).resolve().parents[2]

KEEP_SUFFIXES = (".dll",)
KEEP_WORDS = ("license", "notice", "eula")


def default_cache() -> Path:
    if os.environ.get("BUNDLE_TEST_CACHE"):
        return Path(os.environ["BUNDLE_TEST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bundle-tests"


# The profiles the tests build and load: the hand-written 1.19.2 set, a CUDA 12 release after
# 1.21 (1.22.0: dxcore.dll), the newest CUDA 13 release, and every CPU and DirectML profile.
# The rest of the catalogue is derived and checked by tools/manifests/derive_catalogue.py and
# tools/manifests/catalogue_proof.py, not in every CI run: its wheels are about 8 GB.
TESTED = ("ort-1.19.2-", "ort-1.22.0-gpu-cuda12", "ort-1.31.1-gpu-cuda13")
TESTED_SUFFIXES = ("-cpu", "-directml")  # every release's: their wheels are small


def pinned_wheels(release: str | None = None) -> dict[str, PipSource]:
    """The wheels the tested profiles pin; with `release` ("1.19.2"), only that release's
    profiles' (one wheel per package: what RealDlls maps package names to)."""
    wheels: dict[str, PipSource] = {}
    for name in available_profiles():
        if release is not None and not name.startswith(f"ort-{release}-"):
            continue
        if not (name.startswith(TESTED) or name.endswith(TESTED_SUFFIXES)):
            continue
        for artifact in load_profile(name).artifacts:
            for source in artifact.sources:
                if isinstance(source, PipSource):
                    wheels[source.wheel] = source
    return wheels


def extra_wheels() -> dict[str, PipSource]:
    """Wheels no shipped profile pins, for tests/test_profiles_new.py: a newer ORT GPU release
    whose profile is derived there (pinned from https://pypi.org/simple/onnxruntime-gpu/)."""
    sources = [
        PipSource(
            package="onnxruntime-gpu",
            version="1.20.2",
            wheel="onnxruntime_gpu-1.20.2-cp311-cp311-win_amd64.whl",
            sha256="d0eafd873e4336949c89e6c7429a68e7e1d0233d9cb363e9780ca76c3c6f865c",
        ),
    ]
    return {source.wheel: source for source in sources}


EP_MANIFESTS = REPO / "manifests" / "eps"
# pip download of a py3-none wheel: bundle's pip source used to ask for --python-version 3, which
# pip reads as Python 3.0 and so refuses every EP wheel (they declare Requires-Python >= 3.8, 3.10
# and 3.11); it now asks for the running Python. The test cache fetches them for a fixed
# modern Python, pip still enforcing the hash.
EP_PYTHON_VERSION = "3.12"


def ep_wheels() -> dict[str, PipSource]:
    """The wheels of the execution-provider packs: each manifests/eps/*.toml's [source] pin."""
    wheels: dict[str, PipSource] = {}
    for path in sorted(EP_MANIFESTS.glob("*.toml")):
        pin = tomllib.loads(path.read_text(encoding="utf-8"))["source"]
        source = PipSource(pin["package"], pin["version"], pin["wheel"], pin["sha256"])
        wheels[source.wheel] = source
    return wheels


def pip_download_py3(source: PipSource, folder: Path) -> Path:
    """`pip download` of a py3-none wheel for EP_PYTHON_VERSION, pip enforcing the hash."""
    requirements = folder / "requirements.txt"
    requirements.write_text(f"{source.package}=={source.version} --hash=sha256:{source.sha256}\n")
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--require-hashes", "--progress-bar", "off", "--disable-pip-version-check",
        "--platform", "win_amd64", "--python-version", EP_PYTHON_VERSION,
        "-r", str(requirements), "-d", str(folder),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not (folder / source.wheel).is_file():
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"pip download {source.package}=={source.version} failed: {last}")
    return folder / source.wheel


def download(source: PipSource, wheels: Path) -> Path:
    """The pinned wheel, through bundle's own pip source (pip enforces the pinned hash)."""
    target = wheels / source.wheel
    if target.is_file() and file_sha256(target) == source.sha256:
        return target
    print(f"pip download {source.package}=={source.version}", flush=True)
    with tempfile.TemporaryDirectory(dir=wheels) as folder:
        try:
            if source.wheel in ep_wheels():
                os.replace(pip_download_py3(source, Path(folder)), target)
            else:
                os.replace(pip_download(source, Path(folder)), target)
        except BundleError as error:
            sys.exit(str(error))
    return target


def extract(wheel: Path, extracted: Path, everything: bool = False) -> Path:
    """The wheel's DLLs and licence files (with `everything`, all of its files) under
    extracted/<wheel stem>/."""
    out = extracted / wheel.name.removesuffix(".whl")
    marker = out / ".complete"
    if marker.is_file():
        return out
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            lower = member.filename.lower()
            keep = lower.endswith(KEEP_SUFFIXES) or any(word in lower for word in KEEP_WORDS)
            if everything or keep:
                archive.extract(member, out)
    marker.write_text(file_sha256(wheel))
    return out


def dll_folder(extracted_wheel: Path) -> Path:
    """The folder of a wheel that holds its DLLs (the one with the most, if several do)."""
    counts: dict[Path, int] = {}
    for dll in extracted_wheel.rglob("*.dll"):
        counts[dll.parent] = counts.get(dll.parent, 0) + 1
    return max(sorted(counts), key=lambda folder: counts[folder])


# Profiles of which the tests need only the core: onnxruntime.dll and the DLLs a bundle ships
# beside it that registering a pack needs (onnxruntime_providers_shared.dll, which ORT before
# 1.23 loads for it; the DirectML flavour's DirectML.dll). tests/test_ep_packs_wine.py registers
# the packs with a CUDA core older than 1.31.1 (issue 40); tools/evidence/ep_matrix.py fetches
# every other core the same way. The wheel (hundreds of MB) is deleted once they are out.
CORE_ONLY = ("ort-1.24.4-gpu-cuda12",)
ORT_DLL = "onnxruntime.dll"
CORE_DLLS = (ORT_DLL, "onnxruntime_providers_shared.dll", "DirectML.dll")


def core_source(profile: Profile) -> tuple[str, PipSource]:
    """The release and the pinned wheel of the artifact that provides onnxruntime.dll."""
    for artifact in profile.artifacts:
        if any(dll_key(name) == dll_key(ORT_DLL) for name in artifact.provides):
            pins = [source for source in artifact.sources if isinstance(source, PipSource)]
            return artifact.version, pins[0]
    raise SystemExit(f"{profile.name}: no artifact provides {ORT_DLL}")


def core_folder(source: PipSource, cache: Path, download: bool = True) -> Path | None:
    """A folder holding the core's DLLs: the test cache's extraction, else <cache>/cores/,
    else fetched now (one wheel, deleted once its DLLs are out); None when not here and not to
    be downloaded."""
    stem = source.wheel.removesuffix(".whl")
    extracted = cache / "extracted" / stem / "onnxruntime" / "capi"
    if (extracted / ORT_DLL).is_file() and (cache / "extracted" / stem / ".complete").is_file():
        return extracted
    ours = cache / "cores" / stem
    if (ours / ORT_DLL).is_file():
        return ours
    if not download:
        return None
    ours.parent.mkdir(parents=True, exist_ok=True)
    print(f"  pip download {source.package}=={source.version}", flush=True)
    with tempfile.TemporaryDirectory(dir=ours.parent) as scratch:
        wheel = pip_download(source, Path(scratch))
        staging = Path(scratch) / "dlls"
        staging.mkdir()
        wanted = {name.lower() for name in CORE_DLLS}
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():  # wherever the wheel keeps them (capi/ mostly)
                if member.filename.rsplit("/", 1)[-1].lower() in wanted:
                    (staging / member.filename.rsplit("/", 1)[-1]).write_bytes(archive.read(member))
        wheel.unlink()
        if not (staging / ORT_DLL).is_file():
            raise SystemExit(f"{source.wheel} holds no {ORT_DLL}")
        staging.rename(ours)
    return ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument("--search-args", metavar="PROFILE")
    args = parser.parse_args()
    wheels, extracted = args.cache / "wheels", args.cache / "extracted"
    wheels.mkdir(parents=True, exist_ok=True)
    extracted.mkdir(parents=True, exist_ok=True)
    log = sys.stderr if args.search_args else sys.stdout
    folders: dict[str, Path] = {}
    packs = ep_wheels()
    for source in [*pinned_wheels().values(), *extra_wheels().values(), *packs.values()]:
        everything = source.wheel in packs
        folder = extract(download(source, wheels), extracted, everything)
        folders[source.wheel] = dll_folder(folder)
        print(f"ok {source.wheel} -> {folders[source.wheel]}", file=log, flush=True)
    for name in CORE_ONLY:
        print(f"ok {name}'s core -> {core_folder(core_source(load_profile(name))[1], args.cache)}")
    if args.search_args:
        profile = load_profile(args.search_args)
        wanted = [s.wheel for a in profile.artifacts for s in a.sources if isinstance(s, PipSource)]
        print(" ".join(f"--search {folders[wheel]}" for wheel in wanted))


if __name__ == "__main__":
    main()
