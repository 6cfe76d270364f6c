"""Reproducible outputs (issue 41, part 1): the same inputs give the same bytes on any machine, in
any folder, in any time zone, at any clock time (docs/reproducible.md).

examples/hello with the CPU profile and the runtime pack apart is built and compiled twice, as
two machines would: each run in its own folder with its own cache (hard links of the session's
CPU cache) and its own copy of the app, of another time stamp; run A under TZ=UTC, run B under
TZ=Pacific/Auckland with the clock moved 400 days ahead, for `bundle build` and `bundle
publish` (Debian's faketime) and for ISCC (tests/fixtures/linux/wine_clock.c), and every file
it compiles given other time stamps before ISCC reads them. The real ISCC
(under Wine) compiles the full setup (with the pack appended), the web setup and the pack's
own setup from each; `bundle publish` then writes each release. Everything must be equal, byte
for byte: the setups, the pack's setup and parts, the .7z, the rendered scripts, the lock and
both SBOMs as published.

Controls keep the comparison honest: the time zone reaches ISCC (a script without
TimeStampsInUTC/touch compiles to other bytes under the two zones), the moved clock reaches ISCC
(a script with TouchDate=current compiles to other bytes under it), and the clocks of run B's
build and of a 32-bit Wine program did move. A third build, the app changed by one byte, gives
another app setup and the same pack setup.

ISCC.exe is a 32-bit program, and Wine's 32-bit ntdll.so reads the clock through glibc's
64-bit time entry points (__clock_gettime64), which Debian 12's libfaketime:i386 (0.9.10) does
not intercept: Wine programs keep the real date under it. wine_clock.c, a preload library of
twenty lines, moves those entry points instead; the test shows the date a 32-bit Wine program
reports before it compiles (docs/reproducible.md)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support.cache_links import linked_cache
from tests.support.inno import InnoSetup
from tests.support.paths import HELLO
from tests.support.runs import pip_env
from tests.support.skips import require

CPU = "ort-1.19.2-cpu"
APPEND = "/Sbundlepack=$p"  # the Sign Tool that appends the pack to the full setup
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
AHEAD_DAYS = 400
WINE_CLOCK = Path(__file__).parent / "fixtures" / "linux" / "wine_clock.c"
LIBC32 = Path("/lib/i386-linux-gnu/libc.so.6")  # wine32's C library
CMD32 = r"C:\windows\syswow64\cmd.exe"  # a 32-bit Windows program, as ISCC.exe is
SCRIPTS = ("setup.iss", "setup-web.iss", "bundle-pack.iss", "bundlepack.cmd")
SAME_AS_PUBLISHED = (
    *("bundle.lock.json", "bundle.cdx.json", "bundle.spdx.json", "bundle.provenance.json"),
    "SHA256SUMS",
)


@dataclass(frozen=True)
class Run:
    root: Path
    dist: Path
    cache: Path
    full: Path
    web: Path
    archive: Path
    release: Path

    def pack_files(self) -> dict[str, bytes]:
        """The compiled runtime pack: its setup and parts, by name."""
        (folder,) = (self.cache / "runtime-packs").iterdir()
        found = sorted((*folder.glob("bundle-pack-*.exe"), *folder.glob("bundle-pack-*.bin")))
        return {path.name: path.read_bytes() for path in found}


def fake_clock() -> dict[str, str]:
    """The environment that moves a 64-bit program's clock AHEAD_DAYS ahead (libfaketime's
    relative form; the monotonic clock left alone, file times read as they are)."""
    require(FAKETIME.is_file(), f"{FAKETIME} is missing: apt-get install faketime (bash .ci/run)")
    return {
        "LD_PRELOAD": str(FAKETIME),
        "FAKETIME": f"+{AHEAD_DAYS}d",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "NO_FAKE_STAT": "1",
    }


def wine_clock(folder: Path) -> dict[str, str]:
    """The environment that moves the clock of 32-bit Wine programs AHEAD_DAYS ahead: the
    preload library built from wine_clock.c (64-bit programs ignore it, saying so)."""
    require(shutil.which("gcc") is not None, "gcc is missing: apt-get install gcc")
    require(LIBC32.is_file(), f"{LIBC32} is missing: wine32 brings it (bash .ci/install-wine32.sh)")
    library = folder / "wine_clock.so"
    subprocess.run(
        ["gcc", "-m32", "-O2", "-fPIC", "-shared", "-nostdlib", "-o", str(library),
         str(WINE_CLOCK), str(LIBC32)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return {"LD_PRELOAD": str(library), "WINE_CLOCK_AHEAD_S": str(AHEAD_DAYS * 86400)}


def bundle(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args], capture_output=True, encoding="utf-8",
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env(PIP_FIND_LINKS="/nonexistent"), **env},
        check=False,
    )  # fmt: skip


def iscc(
    inno: InnoSetup,
    script: Path,
    out: Path,
    tz: str,
    *args: str,
    clock: dict[str, str] | None = None,
) -> Path:
    """The real ISCC under Wine in time zone `tz`, its clock moved by `clock`; the setup."""
    out.mkdir(parents=True, exist_ok=True)
    done = inno.program(
        inno.iscc, "/Q", f"/O{inno.windows_path(out)}", *args, inno.windows_path(script),
        cwd=script.parent, env={"TZ": tz, **(clock or {})}, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"ISCC failed on {script}:\n{done.stdout}\n{done.stderr}"
    (setup,) = out.glob("*.exe")
    return setup


def restamp(folder: Path, when: float) -> None:
    """Every file under `folder` gets the time `when`: the files as another machine's checkout
    and extraction would have left them (copies, so the caches' files keep theirs)."""
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def build_and_compile(
    inno: InnoSetup,
    cpu_cache: Path,
    root: Path,
    app: bytes,
    tz: str,
    clock: dict[str, str],
    iscc_clock: dict[str, str] | None = None,
    stamp: float | None = None,
) -> Run:
    cache = linked_cache(cpu_cache, root / "cache")
    exe = root / "app" / "hello.exe"
    exe.parent.mkdir(parents=True)
    exe.write_bytes(app)
    when = stamp or time.time()
    os.utime(exe, (when, when))
    dist, archive = root / "dist", root / "hello.7z"
    built = bundle(
        {"TZ": tz, **clock},
        "build", str(exe), "--profile", CPU, "--out", str(dist), "--cache-dir", str(cache),
        "--copy", "--runtime-pack", "--pack-url", "https://example.com/packs",
        "--iss-compression", "zip/1", "--pack-part-mb", "4", "--sbom", "--archive", str(archive),
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    if stamp is not None:
        restamp(dist, stamp)
    setups = root / "Output"
    full = iscc(inno, dist / "setup.iss", setups, tz, APPEND, clock=iscc_clock)
    web = iscc(inno, dist / "setup-web.iss", root / "web", tz, clock=iscc_clock)
    release = root / "release"
    done = bundle(
        {"TZ": tz, **clock},
        "publish", str(dist), "--setups", str(setups), "--cache-dir", str(cache),
        "--out", str(release), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return Run(root, dist, cache, full, web, archive, release)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_time_zone_and_the_clock_reach_iscc(inno: InnoSetup, tmp_path: Path) -> None:
    """The controls: a script that keeps the source's local time (Inno's default) compiles to
    other bytes under UTC and under Auckland's zone, and a script that stores the compile date
    (TouchDate=current) to other bytes with the clock moved, the same without: so the equal
    setups below are not equal because Wine ignored TZ or the moved clock."""
    (tmp_path / "a.txt").write_text("a\n")
    os.utime(tmp_path / "a.txt", (1e9, 1e9))
    head = "[Setup]\nAppName=T\nAppVersion=1\nDefaultDirName={autopf}\\T\nOutputBaseFilename=t\n"
    local, dated = tmp_path / "local.iss", tmp_path / "dated.iss"
    local.write_text(head + '[Files]\nSource: "a.txt"; DestDir: "{app}"\n')
    dated.write_text(
        head + "TimeStampsInUTC=yes\nTouchDate=current\nTouchTime=00:00\n"
        '[Files]\nSource: "a.txt"; DestDir: "{app}"; Flags: touch\n'
    )
    utc = iscc(inno, local, tmp_path / "utc", "UTC").read_bytes()
    auckland = iscc(inno, local, tmp_path / "auckland", "Pacific/Auckland").read_bytes()
    assert utc != auckland
    today = iscc(inno, dated, tmp_path / "today", "UTC").read_bytes()
    ahead = iscc(inno, dated, tmp_path / "ahead", "UTC", clock=wine_clock(tmp_path)).read_bytes()
    again = iscc(inno, dated, tmp_path / "again", "UTC").read_bytes()
    assert today != ahead and today == again


def test_two_machines_build_the_same_bytes(
    inno: InnoSetup, cpu_cache: Path, tmp_path: Path
) -> None:
    clock = fake_clock()
    moved = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        capture_output=True, text=True, env={**os.environ, **clock}, check=True,
    )  # fmt: skip
    assert float(moved.stdout) > time.time() + (AHEAD_DAYS - 1) * 86400  # the clock did move
    wine = wine_clock(tmp_path)
    now = inno.program(CMD32, "/c", "echo %DATE%", env={"TZ": "UTC"}, timeout=60).stdout
    later = inno.program(CMD32, "/c", "echo %DATE%", env={"TZ": "UTC", **wine}, timeout=60)
    year = str((datetime.now(UTC) + timedelta(days=AHEAD_DAYS)).year)  # the next year or later
    assert year in later.stdout and year not in now, (now, later.stdout)  # the clock did move
    app = HELLO.read_bytes()
    a = build_and_compile(inno, cpu_cache, tmp_path / "a", app, "UTC", {})
    b = build_and_compile(
        *(inno, cpu_cache, tmp_path / "elsewhere" / "b", app, "Pacific/Auckland", clock, wine),
        stamp=981173100,
    )
    assert a.full.name == b.full.name and a.full.read_bytes() == b.full.read_bytes()
    assert a.web.read_bytes() == b.web.read_bytes()
    pack_a, pack_b = a.pack_files(), b.pack_files()
    assert len(pack_a) > 1 and pack_a == pack_b  # the pack's setup and its parts
    assert a.archive.read_bytes() == b.archive.read_bytes()
    for name in SCRIPTS:
        assert (a.dist / name).read_bytes() == (b.dist / name).read_bytes(), name
    for name in SAME_AS_PUBLISHED:
        assert (a.release / name).read_bytes() == (b.release / name).read_bytes(), name
    lock = json.loads((a.release / "bundle.lock.json").read_text(encoding="utf-8"))
    assert all(item["mtime_ns"] is None for item in lock["files"])  # no local time published
    assert str(tmp_path) not in (a.dist / "setup.iss").read_text(encoding="utf-8-sig")

    changed = build_and_compile(inno, cpu_cache, tmp_path / "c", app + b"\0", "UTC", {})
    assert changed.full.read_bytes() != a.full.read_bytes()
    assert changed.web.read_bytes() != a.web.read_bytes()
    assert changed.pack_files() == pack_a  # the same runtime: the same pack setup
    shutil.rmtree(tmp_path, ignore_errors=True)  # three caches' copies of the pack
