"""Register every EP pack with every profile's core under Wine: the pack x core proof (issue 40).

For each profile of manifests/profiles/ and each pack of manifests/eps/, one process of
tests/fixtures/src/ep_register.c registers the pack, by its full path, with that profile's
onnxruntime.dll, in the layout `bundle build --ep` makes (the exe, ORT and the VC++ runtime it
imports beside it, each pack in its own folder with the VC++ DLLs it carries). The prefix is
the tests' display prefix with the driver stand-ins of tests/test_ep_packs_wine.py in its
System32. A core whose release is below a pack's min_ort is run too where it has the plugin
API (C API 22, ORT 1.22): the row then shows that the pack refuses it, as min_ort says.

Only the outcome of the registration is recorded (registered, refused with ORT's own message,
crashed with the exit status), never what the host offers; the app's folder in a message is
written as <app>. The result goes to manifests/ep-matrix.toml (bundler.eps.matrix reads it);
pairs not run keep their row, or get a `not-run` one.

Cores: a core already extracted in the test cache (python -m tools.testing.fetch_test_wheels)
is used from there; any other is fetched one wheel at a time with pip (the profile's pin,
pip enforcing the hash), and only onnxruntime.dll with the two DLLs a bundle always ships
beside it where the wheel has them (onnxruntime_providers_shared.dll, which ORT 1.22
loads to register a pack, and the DirectML flavour's DirectML.dll) is kept, under
<cache>/cores/ (tools.testing.fetch_test_wheels.core_folder); the wheel is deleted at once.
The packs' wheels come from the test cache.

    python -m tools.evidence.ep_matrix [--profile NAME ...] [--no-download] [--work DIR]

Without --profile, every profile. Needs Wine, Xvfb and mingw-w64.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bundler.eps.matrix import PairProof, load_matrix, matrix_file
from bundler.eps.plugins import EpPack, available_packs, load_pack
from bundler.target.profiles import Profile, available_profiles, load_profile
from tests.support.display import DisplayWine
from tests.support.inno import Xvfb
from tests.support.mingw import DLLTOOL, GCC, run_build_script
from tools.testing.fetch_test_wheels import CORE_DLLS, core_folder, core_source, default_cache

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
# The driver stand-ins tests/test_ep_packs_wine.py puts in System32, and its overrides; and
# dxcore.dll, which Wine 8.0 lacks and Windows 10 2004 has (ORT 1.22's DirectML and GPU builds
# import it, delay-loaded or not: without it they die with 0xC06D007E, a failed delay load).
DRIVERS = (
    "dxcore/dxcore.dll",
    "nvcuda-31.0.15.5161/nvcuda.dll",
    "nvml/nvml.dll",
    "opencl/OpenCL.dll",
    "ze_loader/ze_loader.dll",
)
OVERRIDES = (
    "msvcp140,msvcp140_1,msvcp140_2,vcruntime140,vcruntime140_1,concrt140,"
    "msvcp140_atomic_wait,opencl=n;winedbg.exe=d"
)  # winedbg disabled: a crash ends the process with its status instead of a debugger waiting
VC_RUNTIME = "msvc_runtime-14.44.35112-cp311-cp311-win_amd64"  # the profiles' msvc-runtime pin
ORT_VC_RUNTIME = ("msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll")
FIRST_WITH_PLUGIN_API = (1, 22)  # RegisterExecutionProviderLibrary: ORT's C API 22
_ORT_LINE = re.compile(r"ort (\S+) api \d+")
_EXCEPTION = re.compile(r"Unhandled exception (0x[0-9a-fA-F]+)")  # Wine's line for a crash


def release_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


# --- the app -------------------------------------------------------------------------------


def windows_path(path: Path) -> str:
    return "Z:" + str(path).replace("/", "\\")


def extracted(cache: Path, stem: str) -> Path:
    folder = cache / "extracted" / stem
    if not (folder / ".complete").is_file():
        raise SystemExit(f"{stem} is not in {folder.parent}: run tools.testing.fetch_test_wheels")
    return folder


def vc_dll(cache: Path, name: str) -> Path:
    return extracted(cache, VC_RUNTIME) / "msvc_runtime-14.44.35112.data/data/Scripts" / name


def lay_out(app: Path, exe: Path, core: Path, pack: EpPack, cache: Path) -> Path:
    """The bundle of one pair, hard-linked: exe, core and its VC++ runtime, the pack."""
    app.mkdir(parents=True)
    os.link(exe, app / exe.name)
    for name in CORE_DLLS:
        if (core / name).is_file():
            os.link(core / name, app / name)
    for name in ORT_VC_RUNTIME:
        os.link(vc_dll(cache, name), app / name)
    wheel = extracted(cache, pack.source.pip.wheel.removesuffix(".whl"))
    folder = app / pack.folder
    folder.mkdir(parents=True)
    for item in pack.shipped():
        os.link(wheel / item.path, folder / item.name)
    for name in pack.vc_runtime_in_pack:
        os.link(vc_dll(cache, name), folder / name)
    return app


# --- one pair ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prover:
    wine: DisplayWine
    exe: Path
    cache: Path
    work: Path

    def prove(self, profile: Profile, core: Path, pack: EpPack) -> PairProof:
        app = lay_out(self.work / f"{profile.name}-{pack.name}", self.exe, core, pack, self.cache)
        try:
            plugin = windows_path(app / pack.folder / pack.plugin)
            done = self.wine.program(
                app / self.exe.name,
                f"{pack.registration_name}={plugin}",
                cwd=self.wine.prefix / "drive_c",
                overrides=OVERRIDES,
                timeout=300,
            )
        finally:
            shutil.rmtree(app, ignore_errors=True)
        return outcome(profile.name, pack, done, windows_path(app))


def outcome(
    profile: str, pack: EpPack, done: subprocess.CompletedProcess[str], app: str
) -> PairProof:
    """The row of one run: registered, refused (the message, the app's folder as <app>) or
    crashed (no verdict line; the exit status)."""
    lines = done.stdout.splitlines()
    ort = next((m.group(1) for m in map(_ORT_LINE.fullmatch, lines) if m), "")
    name = pack.registration_name
    if f"registered {name}" in lines:
        return PairProof(profile, pack.name, "registered", ort)
    failed = [line for line in lines if line.startswith(f"failed {name}: ")]
    if failed:
        message = failed[0].removeprefix(f"failed {name}: ").replace(app, "<app>")
        return PairProof(profile, pack.name, "refused", ort, message)
    exception = _EXCEPTION.search(done.stderr)
    status = exception.group(1) if exception else f"0x{done.returncode & 0xFFFFFFFF:08X}"
    return PairProof(profile, pack.name, "crashed", ort, f"exit status {status}, no verdict")


# --- the matrix ----------------------------------------------------------------------------


def not_run(profile: str, pack: str, why: str) -> PairProof:
    return PairProof(profile, pack, "not-run", "", why)


def prove_profile(
    prover: Prover, profile: Profile, packs: list[EpPack], download: bool
) -> list[PairProof]:
    release, source = core_source(profile)
    if release_key(release) < FIRST_WITH_PLUGIN_API:
        why = f"ORT {release} has no RegisterExecutionProviderLibrary (C API 22, ORT 1.22)"
        return [not_run(profile.name, pack.name, why) for pack in packs]
    core = core_folder(source, prover.cache, download)
    if core is None:
        why = f"{source.wheel} not fetched in this run"
        return [not_run(profile.name, pack.name, why) for pack in packs]
    return [prover.prove(profile, core, pack) for pack in packs]


def serialise(pairs: dict[tuple[str, str], PairProof]) -> str:
    lines = [
        "# The EP pack x core proof (issue 40): each pack of manifests/eps/ registered with each",
        "# profile's onnxruntime.dll by tests/fixtures/src/ep_register.c under Wine 8.0 (the",
        "# display prefix and driver stand-ins of tests/test_ep_packs_wine.py), one process a",
        "# pair. Written by `python -m tools.evidence.ep_matrix` (its docstring says how); do",
        "# not edit by hand. Read by bundler/eps/matrix.py; tests/test_ep_matrix_data.py holds it",
        "# against the catalogue.",
        "schema_version = 1",
    ]
    for proof in pairs.values():
        lines += ["", "[[pair]]", f'profile = "{proof.profile}"', f'pack = "{proof.pack}"']
        lines.append(f'outcome = "{proof.outcome}"')
        if proof.ort:
            lines.append(f'ort = "{proof.ort}"')
        if proof.message:
            escaped = proof.message.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'message = "{escaped}"')
    return "\n".join(lines) + "\n"


def ordered(pairs: dict[tuple[str, str], PairProof]) -> dict[tuple[str, str], PairProof]:
    """Every profile x every pack, by release, flavour and pack; a missing pair as not-run."""
    profiles = sorted(available_profiles(), key=lambda n: (release_key(n.split("-")[1]), n))
    keys = [(profile, pack) for profile in profiles for pack in available_packs()]
    return {key: pairs.get(key) or not_run(*key, "not run yet") for key in keys}


def write(pairs: dict[tuple[str, str], PairProof]) -> None:
    target = matrix_file()
    temporary = target.with_suffix(".tmp")
    temporary.write_text(serialise(ordered(pairs)), encoding="utf-8")
    os.replace(temporary, target)


@contextmanager
def machine(work: Path) -> Iterator[Prover]:
    """The display prefix with the stand-ins in System32, and the app built."""
    standins = run_build_script(FIXTURES / "standins" / "build.sh", work / "standins")
    exe = run_build_script(FIXTURES / "build_ep_register.sh", work / "exe", GCC, DLLTOOL)
    xvfb = Xvfb(work / "xvfb.log")
    wine = DisplayWine(work / "prefix", xvfb.start())
    try:
        wine.start()
        with wine.drivers_installed([standins / driver for driver in DRIVERS]):
            yield Prover(wine, exe / "ep_register.exe", default_cache(), work / "apps")
    finally:
        wine.stop()
        xvfb.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--profile", action="append", default=[], help="only this profile")
    parser.add_argument("--no-download", action="store_true", help="only cores already here")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (a temporary one)")
    args = parser.parse_args()
    names = [load_profile(name).name for name in args.profile] or list(available_profiles())
    names.sort(key=lambda n: (release_key(n.split("-")[1]), n))
    packs = [load_pack(name) for name in available_packs()]
    pairs = dict(load_matrix()) if matrix_file().is_file() else {}
    with (
        tempfile.TemporaryDirectory(prefix="ep-matrix-") as scratch,
        machine(args.work or Path(scratch)) as prover,
    ):
        for name in names:
            print(name, flush=True)
            for proof in prove_profile(prover, load_profile(name), packs, not args.no_download):
                print(f"  {proof.pack}: {proof.verdict}", flush=True)
                key = (proof.profile, proof.pack)
                if proof.outcome != "not-run" or key not in pairs:  # a run is never lost
                    pairs[key] = proof
            write(pairs)  # after each profile: a stopped run keeps what it proved
    return 0


if __name__ == "__main__":
    sys.exit(main())
