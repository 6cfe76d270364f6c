"""Reproducible outputs (issue 41, part 1): the same inputs give the same bytes on any machine, in
any folder, in any time zone, at any clock time (docs/reproducible.md).

examples/hello with the CPU profile and the runtime pack apart is built and compiled twice, as
two machines would: each run in its own folder with its own cache (hard links of the session's
CPU cache) and its own copy of the app, of another time stamp; run A under TZ=UTC, run B under
TZ=Pacific/Auckland with the clock of `bundle build` moved 400 days ahead (Debian's faketime),
and every file it compiles given other time stamps before ISCC reads them. The real ISCC
(under Wine) compiles the full setup (with the pack appended), the web setup and the pack's
own setup from each; `bundle publish` then writes each release. Everything must be equal, byte
for byte: the setups, the pack's setup and parts, the .7z, the rendered scripts, the lock and
both SBOMs as published.

Two controls keep the comparison honest: the time zone reaches ISCC (a script without
TimeStampsInUTC/touch compiles to other bytes under the two zones), and the clock of run B's
build did move. A third build, the app changed by one byte, gives another app setup and the same
pack setup.

What the test cannot do: move the clock of ISCC itself. ISCC.exe is a 32-bit program, and Wine's
32-bit ntdll.so reads the clock through glibc's 64-bit time entry points (__clock_gettime64),
which Debian 12's libfaketime:i386 (0.9.10) does not intercept, so Wine programs keep the real
date under it (docs/reproducible.md says so, with what shows ISCC embeds no clock time)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
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


def bundle(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args], capture_output=True, encoding="utf-8",
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env(PIP_FIND_LINKS="/nonexistent"), **env},
        check=False,
    )  # fmt: skip


def iscc(inno: InnoSetup, script: Path, out: Path, tz: str, *args: str) -> Path:
    """The real ISCC under Wine in time zone `tz`; the setup it wrote."""
    out.mkdir(parents=True, exist_ok=True)
    done = inno.program(
        inno.iscc, "/Q", f"/O{inno.windows_path(out)}", *args, inno.windows_path(script),
        cwd=script.parent, env={"TZ": tz}, timeout=600,
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
    full = iscc(inno, dist / "setup.iss", setups, tz, APPEND)
    web = iscc(inno, dist / "setup-web.iss", root / "web", tz)
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


def test_the_time_zone_reaches_iscc(inno: InnoSetup, tmp_path: Path) -> None:
    """The control: a script that keeps the source's local time (Inno's default) compiles to
    other bytes under UTC and under Auckland's zone, so the equal setups below are not equal
    because Wine ignored TZ."""
    (tmp_path / "a.txt").write_text("a\n")
    os.utime(tmp_path / "a.txt", (1e9, 1e9))
    script = tmp_path / "local.iss"
    script.write_text(
        "[Setup]\nAppName=T\nAppVersion=1\nDefaultDirName={autopf}\\T\nOutputBaseFilename=t\n"
        '[Files]\nSource: "a.txt"; DestDir: "{app}"\n'
    )
    utc = iscc(inno, script, tmp_path / "utc", "UTC").read_bytes()
    auckland = iscc(inno, script, tmp_path / "auckland", "Pacific/Auckland").read_bytes()
    assert utc != auckland


def test_two_machines_build_the_same_bytes(
    inno: InnoSetup, cpu_cache: Path, tmp_path: Path
) -> None:
    clock = fake_clock()
    moved = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        capture_output=True, text=True, env={**os.environ, **clock}, check=True,
    )  # fmt: skip
    assert float(moved.stdout) > time.time() + (AHEAD_DAYS - 1) * 86400  # the clock did move
    app = HELLO.read_bytes()
    a = build_and_compile(inno, cpu_cache, tmp_path / "a", app, "UTC", {})
    b = build_and_compile(
        inno, cpu_cache, tmp_path / "elsewhere" / "b", app, "Pacific/Auckland", clock, 981173100
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
