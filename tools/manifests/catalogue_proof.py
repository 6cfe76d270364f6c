"""Build examples/hello against shipped GPU profiles and load it under Wine: the catalogue proof.

For each profile: `bundle build examples/hello/hello.exe --profile NAME --link` into a scratch
folder, then `hello.exe --try-provider onnxruntime_providers_cuda.dll` under Wine (the shipped
VC++ runtime forced native, WINEDEBUG=err+module). A row passes when the app prints the
profile's ORT version and loading the CUDA provider does not fail with 126 (a missing DLL):
without a GPU, Wine gives 998 once every DLL it imports was found. Wine 8.0 has no dxcore.dll
(ORT 1.22.0 imports it): the prefix gets the mingw-built stand-in of
tests/fixtures/standins (DXCoreCreateAdapterFactory returns E_NOINTERFACE).

    python -m tools.manifests.catalogue_proof [PROFILE_OR_RELEASE ...] [--cache DIR]
                                              [--work DIR] [--prefix DIR] [--json FILE]

Without names, every shipped GPU profile. Prints a Markdown table (docs/catalogue.md has the
last full run); exit 1 when a row fails. Needs Wine and mingw-w64; the wheels come through
pip (PyPI, or PIP_FIND_LINKS / PIP_NO_INDEX as in the tests). Each bundle folder is removed
once its row is measured, so the disk peak is one bundle (hard links into the cache).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bundler.target.profiles import available_profiles, load_profile
from tests.support.wine import Wine

REPO = Path(__file__).resolve().parents[2]

HELLO = REPO / "examples" / "hello" / "hello.exe"
PROVIDER = "onnxruntime_providers_cuda.dll"
GPU = re.compile(r"ort-[\d.]+-gpu-cuda\d+")
_VERSION = re.compile(r"^ORT version: (\S+)", re.M)
_LOAD = re.compile(rf"^LoadLibrary {re.escape(PROVIDER)}: (ok|error \d+)", re.M)


@dataclass(frozen=True)
class Row:
    profile: str
    release: str
    cuda: str
    files: int
    bytes: int
    printed: str  # what the app printed as ORT version ("" when it did not start)
    provider: str  # "ok", "error 998", "error 126", or why the run did not get there
    missing: tuple[str, ...]  # DLLs Wine's loader reported missing

    @property
    def passed(self) -> bool:
        return self.printed == self.release and self.provider not in ("", "error 126")

    def markdown(self) -> str:
        verdict = "yes" if self.passed else "**NO**"
        size = f"{self.bytes / 1e9:.2f} GB"
        return (
            f"| {self.release} | {self.cuda} | {self.files} | {size} | "
            f"{self.printed or '(did not start)'} | {self.provider or '-'} | {verdict} |"
        )


HEADER = (
    "| release | CUDA | files | size | ORT version printed | providers_cuda LoadLibrary | passes |",
    "|---|---|---|---|---|---|---|",
)


def prove(name: str, cache: Path, work: Path, wine: Wine) -> Row:
    profile = load_profile(name)
    versions = {artifact.name: artifact.version for artifact in profile.artifacts}
    out = work / profile.name
    build = subprocess.run(
        [sys.executable, "-m", "bundler", "build", str(HELLO), "--profile", profile.name,
         "--out", str(out), "--cache-dir", str(cache), "--link", "--no-iss", "--no-postbuild"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    driver = profile.gpu_driver
    static = f"{driver.cuda_major}.x (static cudart)" if driver else "-"
    release, cuda = versions.get("onnxruntime", "?"), versions.get("cuda-runtime", static)
    if build.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        reason = f"build failed ({build.returncode}): {build.stderr.strip()[-200:]}"
        return Row(profile.name, release, cuda, 0, 0, "", reason, ())
    lock = json.loads((out / "bundle.lock.json").read_text())
    bundled = [item for item in lock["files"] if item["kind"] == "bundled"]
    run = wine.run(out / "hello.exe", "--try-provider", PROVIDER)
    missing = run.absent_from(out)
    shutil.rmtree(out, ignore_errors=True)
    printed = _VERSION.search(run.stdout)
    loaded = _LOAD.search(run.stdout)
    return Row(
        profile.name,
        release,
        cuda,
        len(bundled),
        sum(item["size"] for item in bundled),
        printed[1] if printed else "",
        loaded[1] if loaded else "",
        missing,
    )


def with_dxcore(wine: Wine, work: Path) -> None:
    """The mingw-built dxcore.dll stand-in in the prefix's system32 (Wine 8.0 has none)."""
    standins = work / "standins"
    subprocess.run(
        ["bash", str(REPO / "tests" / "fixtures" / "standins" / "build.sh"), str(standins)],
        check=True,
        capture_output=True,
    )
    wine.start()
    system32 = wine.prefix / "drive_c" / "windows" / "system32"
    shutil.copy(standins / "dxcore" / "dxcore.dll", system32 / "dxcore.dll")


def chosen(names: list[str]) -> list[str]:
    if not names:
        return sorted((n for n in available_profiles() if GPU.fullmatch(n)), key=_release)
    return [load_profile(name).name for name in names]


def _release(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("-")[1].split("."))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="*")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--prefix", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="catalogue-proof-") as scratch:
        work = args.work or Path(scratch)
        wine = Wine(args.prefix or work / "prefix")
        with_dxcore(wine, work)
        rows = []
        print("\n".join(HEADER), flush=True)
        for name in chosen(args.profiles):
            rows.append(prove(name, args.cache, work, wine))
            print(rows[-1].markdown(), flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2) + "\n")
    return 0 if all(row.passed for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
