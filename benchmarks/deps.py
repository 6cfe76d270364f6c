"""Benchmark: names-only PE parsing and the whole closure on the real GPU set, against
`objdump -p` (mingw binutils) on the same files, measured in the same run.

    python -m benchmarks.deps [--repeat N]

Needs the real wheels (python -m tools.testing.fetch_test_wheels) and x86_64-w64-mingw32-objdump.
Prints seconds and the ratio to the baseline; no thresholds here, the numbers are for people.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bundler.binary.pe import read_pe
from bundler.closure.plan import Status
from bundler.closure.resolve import resolve
from bundler.target.profiles import load_profile
from bundler.target.system import load_system_policy
from tools.testing.fetch_test_wheels import default_cache, dll_folder, pinned_wheels

REPO = Path(__file__).resolve().parent.parent
PROFILE = "ort-1.19.2-gpu-cuda12"
OBJDUMP = "x86_64-w64-mingw32-objdump"


def gpu_folders() -> list[Path]:
    profile = load_profile(PROFILE)
    wheels = {s.wheel for a in profile.artifacts for s in a.sources if hasattr(s, "wheel")}
    extracted = default_cache() / "extracted"
    return [dll_folder(extracted / w.removesuffix(".whl")) for w in pinned_wheels() if w in wheels]


def best_of(repeat: int, action: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if shutil.which(OBJDUMP) is None:
        sys.exit(f"{OBJDUMP} not found: apt-get install mingw-w64")
    folders = gpu_folders()
    hello = REPO / "examples" / "hello" / "hello.exe"
    plan = resolve([read_pe(hello)], load_profile(PROFILE), load_system_policy(), folders)
    dlls = [Path(f.source) for f in plan.with_status(Status.BUNDLED) if f.source]
    size = sum(path.stat().st_size for path in dlls)
    print(f"{len(dlls)} bundled GPU DLLs, {size / 1e9:.2f} GB")

    def parse_all() -> None:
        for path in dlls:
            read_pe(path)

    def objdump_all() -> None:
        for path in dlls:
            subprocess.run([OBJDUMP, "-p", str(path)], stdout=subprocess.DEVNULL, check=True)

    def closure() -> None:
        resolve([read_pe(hello)], load_profile(PROFILE), load_system_policy(), folders)

    baseline = best_of(args.repeat, objdump_all)
    ours = best_of(args.repeat, parse_all)
    whole = best_of(args.repeat, closure)
    print(f"objdump -p, {len(dlls)} DLLs (baseline): {baseline:8.3f} s")
    print(f"bundle names-only parse:         {ours:8.3f} s  ({ours / baseline:.3f} x baseline)")
    print(f"bundle full closure (deps):      {whole:8.3f} s  ({whole / baseline:.3f} x baseline)")


if __name__ == "__main__":
    main()
