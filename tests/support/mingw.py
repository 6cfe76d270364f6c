"""The native programs the tests build with mingw-w64, and the one preamble they share.

Three checked-in scripts build what many tests run, each once per session: the PE fixtures
(tests/fixtures/build.sh: `mingw_build`), the stand-ins for the machine's driver and
redistributable (tests/fixtures/standins/build.sh: `standins`) and bundle-doctor.exe
(doctor/build.sh: `doctor_exe`). A few tests compile one C file of their own (`compile_c`).
Before any of it the compilers it needs are looked for, so that a machine without mingw-w64
skips with the package to install, and CI, where a skip would pass silently, fails
(`tests.support.skips.require`). Every script takes its output folder as its only argument and is
reproducible: the tests that rebuild one and compare bytes call `run_build_script` too.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.skips import require

GCC = "x86_64-w64-mingw32-gcc"
GCC_X86 = "i686-w64-mingw32-gcc"
WINDRES = "x86_64-w64-mingw32-windres"
DLLTOOL = "x86_64-w64-mingw32-dlltool"
FIXTURES_SCRIPT = REPO / "tests" / "fixtures" / "build.sh"
STANDINS_SCRIPT = REPO / "tests" / "fixtures" / "standins" / "build.sh"
DOCTOR_SCRIPT = REPO / "doctor" / "build.sh"


def require_mingw(*tools: str) -> None:
    """Skip (under CI: fail) unless each of `tools`, the x64 gcc by default, is on PATH."""
    missing = [tool for tool in tools or (GCC,) if shutil.which(tool) is None]
    require(
        not missing,
        f"mingw-w64 is not installed (no {', '.join(missing)}): apt-get install mingw-w64",
    )


def run_build_script(script: Path, out: Path | str, *tools: str, cwd: Path | None = None) -> Path:
    """`bash SCRIPT OUT` once `tools` are there (the x64 gcc and windres unless named);
    returns OUT (relative to `cwd` where it is relative)."""
    require_mingw(*(tools or (GCC, WINDRES)))
    subprocess.run(["bash", str(script), str(out)], check=True, cwd=cwd)
    return (cwd or Path.cwd()) / out


def compile_c(source: Path, target: Path, *flags: str) -> Path:
    """`x86_64-w64-mingw32-gcc FLAGS -o TARGET SOURCE`: a program of a single test."""
    require_mingw(GCC)
    subprocess.run([GCC, *flags, "-o", str(target), str(source)], check=True)
    return target


@pytest.fixture(scope="session")
def mingw_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real PE fixtures compiled from tests/fixtures/src by tests/fixtures/build.sh, for x64
    and x86."""
    return run_build_script(FIXTURES_SCRIPT, tmp_path_factory.mktemp("mingw"), GCC, GCC_X86)


@pytest.fixture(scope="session")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stand-in PE files built by tests/fixtures/standins/build.sh (its header lists them):
    nvcuda-31.0.15.5161/nvcuda.dll (driver 551.61), nvcuda-31.0.15.1694/nvcuda.dll (516.94),
    vc_redist.x64.exe, which appends its command line to C:\\vc_redist_ran.txt, and more."""
    return run_build_script(STANDINS_SCRIPT, tmp_path_factory.mktemp("standins"))


@pytest.fixture(scope="session")
def doctor_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bundle-doctor.exe as doctor/build.sh builds it from the sources of this tree."""
    return run_build_script(DOCTOR_SCRIPT, tmp_path_factory.mktemp("doctor")) / "bundle-doctor.exe"
