"""Benchmark P12: the second release of the same app with the same runtime (issue 32,
docs/runtime-pack.md), with the real 2.6 GB GPU bundle of examples/hello and the rendered
settings, by ISCC 6.4.1 under Wine in this run:

- release 1: `bundle build --runtime-pack` and ISCC of its setup.iss, which compiles the runtime
  pack into an empty pack cache first (the one-time cost: the yardstick);
- release 2: the same runtime, hello.exe changed: ISCC of its setup.iss (the pack reused,
  appended as it is by the Sign Tool bundlepack.cmd), target <= 10 s, and of its
  setup-web.iss, target <= the app's files + 1 MB (the pack's SHA-256 read from the record
  the first release's web setup left);
- installing (information, against `cp -r` of the same release folder in this run): the second
  release's full setup, silently into an empty folder (it copies the pack out of itself,
  checks its SHA-256 and runs it), then its web setup over that install (the pack kept).

Run through benchmarks/run.py (`--only P12`); once (`--repeat` is ignored: the first release
compresses the whole runtime). Needs what P9 needs (the test harness's Wine prefix with ISCC).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.harness import Data, Row, Sample

URL = "https://downloads.example.com/hello/packs"  # never asked: P12 only compiles
SECOND_LIMIT_S = 10.0
WEB_ALLOWANCE = 1_000_000  # the web setup may be the app's files plus 1 MB
INSTALL_DIR = "C:\\P12"


def p12_second_release(data: Data, repeat: int) -> list[Row]:
    from benchmarks.harness import Row, run
    from tests.support.inno import InnoSetup, Xvfb, iscc_path

    scratch = Path(tempfile.mkdtemp(prefix="p12-", dir=data.work))
    display = Xvfb(scratch / "xvfb.log")
    harness = InnoSetup(scratch / "prefix", iscc_path(), display.start())
    try:
        harness.start()
        packs = harness.windows_path(scratch / "packs")
        first = _release(data, scratch, "r1", b"")
        first_sample, _ = _compile(harness, first / "setup.iss", scratch / "o1", packs)
        # the first release's web setup too, as a pipeline makes both: it hashes the pack once
        _compile(harness, first / "setup-web.iss", scratch / "o1w", packs)
        second = _release(data, scratch, "r2", b"release 2")
        second_sample, full_size = _compile(harness, second / "setup.iss", scratch / "o2", packs)
        web_sample, web_size = _compile(harness, second / "setup-web.iss", scratch / "o3", packs)
        empty = _empty_setup(harness, scratch)
        full_install = _install(harness, scratch / "o2", scratch / "full.log")
        web_install = _install(harness, scratch / "o3", scratch / "web.log")
        copy = run(["cp", "-r", str(second), str(scratch / "copy")])
    finally:
        harness.stop()
        display.stop()
    app = _app_bytes(second)
    shutil.rmtree(scratch, ignore_errors=True)
    once = Row("P12 1", "first release: ISCC setup.iss, compiling the pack", "information")
    once.command, once.unit = [first_sample], "s"
    again = Row("P12 2", "second release: ISCC setup.iss, the pack reused", "<= 10 s")
    again.command, again.unit, again.limit = [second_sample], "s", SECOND_LIMIT_S
    again.note = (
        f"{first_sample.wall / second_sample.wall:.0f}x faster than the first release; "
        f"setup {full_size / 1e9:.3f} GB"
    )
    web = Row("P12 web", "second release: ISCC setup-web.iss", "<= app + 1 MB")
    web.command, web.unit = [web_sample], "s"
    verdict = "met" if web_size <= app + WEB_ALLOWANCE else "MISSED"
    web.note = (
        f"setup-web.exe {web_size / 1e6:.2f} MB; the app's files {app / 1e6:.2f} MB, so the "
        f"target is {(app + WEB_ALLOWANCE) / 1e6:.2f} MB: {verdict}; an empty Inno Setup 6.4.1 "
        f"setup is {empty / 1e6:.2f} MB, so the web setup is that plus "
        f"{(web_size - empty) / 1e6:.2f} MB"
    )
    what = "the full setup installed (the pack copied out, checked, run)"
    installed = Row("P12 install", what, "information")
    installed.command, installed.yardstick = [full_install], [copy]
    installed.yardstick_name = "cp -r of the release folder"
    update = Row("P12 update", "the web setup installed over it (the pack kept)", "information")
    update.command, update.unit = [web_install], "s"
    return [once, again, web, installed, update]


def _release(data: Data, scratch: Path, name: str, extra: bytes) -> Path:
    """`bundle build --link --runtime-pack` of examples/hello (its exe with `extra` appended)
    into scratch/name, from the benchmark's GPU cache."""
    from benchmarks.harness import EXE, bundle, gpu_args, run

    app = scratch / f"{name}-app"
    app.mkdir()
    (app / EXE.name).write_bytes(EXE.read_bytes() + extra)
    out = scratch / name
    build = bundle("build", str(app / EXE.name), *gpu_args(data.cache), "--link", "--out", str(out))
    run([*build, "--runtime-pack", "--pack-url", URL])
    return out


def _compile(harness: object, script: Path, output: Path, packs: str) -> tuple[Sample, int]:
    """ISCC /Q of `script` with the pack cache `packs`; the size of what it wrote."""
    from benchmarks.harness import run
    from tests.support.inno import InnoSetup

    assert isinstance(harness, InnoSetup)
    output.mkdir(parents=True)
    command = ["wine", str(harness.iscc), "/Q", f"/O{harness.windows_path(output)}"]
    command.append(f"/DBundlePackCache={packs}")
    if script.name == "setup.iss":  # the full setup: the pack appended by its Sign Tool
        command.append("/Sbundlepack=$p")
    sample = run([*command, harness.windows_path(script)], env=harness.env(WINEDEBUG="-all"))
    size = sum(path.stat().st_size for path in output.iterdir() if path.is_file())
    return sample, size


def _install(harness: object, output: Path, log: Path) -> Sample:
    """The setup ISCC wrote into `output`, run silently into INSTALL_DIR (exit code 0, or
    Failed); the runtime must be there after it."""
    from benchmarks.harness import Failed, run
    from tests.support.inno import InnoSetup

    assert isinstance(harness, InnoSetup)
    (setup,) = sorted(output.glob("*.exe"))
    quiet = ["/VERYSILENT", "/SUPPRESSMSGBOXES", "/NORESTART", f"/DIR={INSTALL_DIR}"]
    command = ["wine", str(setup), *quiet, f"/LOG={harness.windows_path(log)}"]
    sample = run(command, env=harness.env(WINEDEBUG="-all"))
    if not (harness.unix_path(INSTALL_DIR) / "onnxruntime.dll").is_file():
        raise Failed(f"{setup.name} exited 0 but {INSTALL_DIR} holds no onnxruntime.dll ({log})")
    return sample


def _empty_setup(harness: object, scratch: Path) -> int:
    """The size of a setup with one empty file: Inno Setup's own setup program."""
    from tests.support.inno import InnoSetup

    assert isinstance(harness, InnoSetup)
    script = scratch / "empty.iss"
    (scratch / "empty.txt").write_bytes(b"")
    script.write_text(
        "[Setup]\r\nAppName=Empty\r\nAppVersion=1\r\nDefaultDirName={autopf}\\Empty\r\n"
        'WizardStyle=modern\r\n[Files]\r\nSource: "empty.txt"; DestDir: "{app}"\r\n'
    )
    done = harness.compile(script, scratch / "o-empty")
    assert done.returncode == 0, done.stdout
    return done.setup_exe.stat().st_size


def _app_bytes(folder: Path) -> int:
    """What the app's own setup holds: the payload without the pack's files."""
    from bundler.closure.lockfile import read_lock

    lock = read_lock(folder / "bundle.lock.json")
    assert lock is not None and lock.runtime_pack is not None, folder
    apart = set(lock.runtime_pack.files)
    names = [entry.name for entry in lock.payload() if entry.name not in apart]
    return sum((folder / name).stat().st_size for name in names if (folder / name).is_file())
