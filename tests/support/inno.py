"""Inno Setup under Wine: compile a script with the real ISCC.exe, install the setup silently,
run the installed program. The ground truth for "does the generated installer work?".

`InnoSetup` is a `tests.support.wine.Wine` prefix made for installers (`inno` is the session
fixture):

- WoW64 (WINEARCH=win64 with wine32): ISCC.exe and setup.exe are 32-bit programs, and a setup
  with `ArchitecturesInstallIn64BitMode=x64compatible` refuses to run unless Windows is 64-bit;
  in 64-bit mode, {sys} is the prefix's 64-bit drive_c/windows/system32 (`system32`).
- Windows 10 (`winecfg /v win10`): a fresh Wine 8 prefix reports Windows 7.
- One Xvfb display for every Wine call of the prefix, from its boot on: setup needs a screen
  even with /VERYSILENT, and a wineserver started without one breaks it later ("Error reading
  FPreparingMemo.Lines.Strings: A call to an OS function failed", docs/field-notes.md#tools).
- One service manager, RpcSs running before the first test (`InnoSetup.start`): otherwise
  each setup run stalls ~14 s in COM.

ISCC comes from the npm package innosetup@6.4.1, installed by .ci/run into the test cache
(`iscc_path()`). Without wine32, Xvfb or ISCC.exe the fixture skips locally with the reason
and fails under CI=true.

Exit codes arrive through Wine as a Unix exit status, so only their low 8 bits survive (3010
from a program shows as 194); Inno's own codes (`SETUP_EXIT_CODES`) are all small.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

import pytest

from tests.support.paths import test_cache_dir
from tests.support.skips import require
from tests.support.wine import SERVER_TIMEOUT, Wine, require_wine
from tests.support.wineprefix import seed

ISCC_VERSION = "6.4.1"
WINDOWS_VERSION = "win10"
XVFB_ARGS = ("-screen", "0", "1024x768x24", "-nolisten", "tcp")  # local clients only
VC_REDIST_LOG = r"C:\vc_redist_ran.txt"
"""Where the stand-in vc_redist.x64.exe appends its command line on each run."""

# Setup's exit codes, from the Inno Setup documentation ("Setup Exit Codes").
SETUP_EXIT_CODES = {
    0: "success",
    1: "Setup failed to initialize (InitializeSetup returned False, or a bad command line)",
    2: "cancelled before the installation started",
    3: "fatal error while moving to the next installation phase",
    4: "fatal error during the installation",
    5: "cancelled during the installation, or Abort chosen",
    6: "Setup was terminated by a debugger",
    7: "PrepareToInstall decided that Setup cannot proceed",
    8: "PrepareToInstall decided that Setup cannot proceed; a restart is needed",
}


def iscc_path() -> Path:
    """ISCC.exe of the npm package innosetup, installed by .ci/run into the test cache."""
    return test_cache_dir() / "npm" / "node_modules" / "innosetup" / "bin" / "ISCC.exe"


def require_inno() -> None:
    """Skip without the tools locally; under CI a missing one is a failure. Whether wine32 is
    there shows only when ISCC.exe runs (`InnoSetup.probe`)."""
    require_wine()
    require(shutil.which("Xvfb") is not None, "Xvfb is not installed (apt-get install xvfb)")
    iscc = iscc_path()
    require(
        iscc.is_file(),
        f"{iscc} is missing: npm install --prefix {iscc.parents[3]} innosetup@{ISCC_VERSION}"
        " (bash .ci/run does it)",
    )


def read_setup_log(path: Path) -> str:
    """Text of a setup log. Inno Setup 6 writes UTF-8 with a BOM and CRLF line ends; a UTF-16
    BOM is honoured too, and a log without BOM is read as UTF-8, undecodable bytes replaced."""
    data = path.read_bytes()
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16")
    else:
        text = data.decode("utf-8-sig", errors="replace")
    return text.replace("\r\n", "\n")


@dataclass(frozen=True)
class CompileResult:
    """What one ISCC run did. `files`: the setup .exe and any .bin slices it wrote (new or
    changed files of the output folder), sorted."""

    returncode: int
    stdout: str
    stderr: str
    files: tuple[Path, ...]

    @property
    def setup_exe(self) -> Path:
        exes = [path for path in self.files if path.suffix.lower() == ".exe"]
        assert len(exes) == 1, f"expected one setup .exe, ISCC wrote {self.files}"
        return exes[0]

    def check(self) -> CompileResult:
        """Self if ISCC succeeded; else an AssertionError carrying ISCC's output."""
        if self.returncode != 0:
            raise AssertionError(
                f"ISCC failed (exit {self.returncode}):\n{self.stdout}\n{self.stderr}".rstrip()
            )
        return self


@dataclass(frozen=True)
class InstallResult:
    """What one silent setup run did. `log`: the text of its /LOG file ("" if none)."""

    returncode: int
    log: str
    stdout: str
    stderr: str

    @property
    def meaning(self) -> str:
        return SETUP_EXIT_CODES.get(self.returncode, "not an Inno Setup exit code")

    def check(self) -> InstallResult:
        """Self if setup succeeded; else an AssertionError carrying the exit code and the log."""
        if self.returncode != 0:
            raise AssertionError(
                f"setup failed (exit {self.returncode}: {self.meaning})\n"
                f"log:\n{self.log}\nstderr:\n{self.stderr}".rstrip()
            )
        return self


class Xvfb:
    """A virtual X display of its own: Xvfb picks a free display number and reports it
    (-displayfd), so parallel sessions never collide, and no xauth cookie is needed for
    local clients."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.display = ""
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        read_end, write_end = os.pipe()
        try:
            with self.log.open("ab") as log:
                self._process = subprocess.Popen(
                    ["Xvfb", "-displayfd", str(write_end), *XVFB_ARGS],
                    pass_fds=(write_end,),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            os.close(write_end)
            write_end = -1
            number = _read_line(read_end, SERVER_TIMEOUT)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        if not number:
            self.stop()
            raise RuntimeError(f"Xvfb did not report a display, see {self.log}")
        self.display = f":{number}"
        return self.display

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None


def _read_line(fd: int, timeout: float) -> str:
    """One line from a pipe, "" on EOF or timeout. Read to the newline, not just the first
    chunk: Xvfb writes the number and the newline separately, and dies of EPIPE ("Cannot
    write display number to fd N") if the reader has closed the pipe in between."""
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 64) if ready else b""
        if not chunk:
            return ""
        data += chunk
    return data.decode().strip()


class InnoSetup(Wine):
    """A private WoW64 Windows 10 prefix on its own display, with ISCC.exe.

    Every Wine call goes through `env()`, which sets DISPLAY, so the wineserver and its
    services see the same screen as setup. Program output is captured; Wine's own debug output
    is off for ISCC and setup (WINEDEBUG=-all) so their stderr is theirs alone.
    """

    def __init__(self, prefix: Path, iscc: Path, display: str) -> None:
        super().__init__(prefix)
        self.iscc = iscc
        self.display = display

    def env(self, **extra: str) -> dict[str, str]:
        return {**super().env(**extra), "DISPLAY": self.display}

    def start(self) -> None:
        """Start the server, create or boot the prefix, make it report Windows 10.

        Unlike `Wine.start`, no explicit `wineboot -i`: the first program of a server session
        runs wineboot by itself (creating the prefix if needed), and an explicit one as that
        first program runs in parallel with it. That leaves two services.exe; RpcSs then never
        starts, and each program using COM (setup does) stalls for ~14 s in Wine's start_rpcss.
        So the first program is winecfg, with mscoree/mshtml disabled for the boot (no Wine
        Mono / Gecko install)."""
        if self._up:
            return
        seed(self.prefix)
        self._quietly("wineserver", "-p")  # -p: persist until killed
        done = self._quietly(
            "wine", "winecfg", "/v", WINDOWS_VERSION, WINEDLLOVERRIDES="mscoree,mshtml="
        )
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"winecfg /v {WINDOWS_VERSION} failed, see {self.log}")
        self._up = True
        self._wait_for_rpcss()

    def _wait_for_rpcss(self) -> None:
        """Return once RpcSs runs: until the service manager has started the prefix's services
        its database is locked, and a program using COM stalls in start_rpcss (see `start`).
        `net start rpcss` answers "Service database locked." or "Service request timeout."
        until then, "Service already running." after (English: LC_ALL=C)."""
        deadline = time.monotonic() + SERVER_TIMEOUT
        answer = ""
        while time.monotonic() < deadline:
            done = self.program(
                "net", "start", "rpcss", env={"LC_ALL": "C"}, timeout=SERVER_TIMEOUT
            )
            answer = done.stdout.strip()
            if done.returncode == 0 or "already running" in answer:
                return
            time.sleep(0.5)
        raise RuntimeError(f"RpcSs does not start in {self.prefix}: {answer}")

    @property
    def system32(self) -> Path:
        """The 64-bit system folder, {sys} of a 64-bit mode setup (32-bit: syswow64)."""
        return self.prefix / "drive_c" / "windows" / "system32"

    def windows_path(self, path: Path) -> str:
        """`path` as Windows programs in the prefix see it: Wine maps / to drive Z:."""
        return "Z:" + os.path.abspath(path).replace("/", "\\")

    def unix_path(self, windows_path: str) -> Path:
        """Where `C:\\...` (any drive of the prefix) lives on Linux. Components are matched
        case-insensitively against what exists, as Windows (and Wine) do: C:\\Windows\\System32
        is drive_c/windows/system32."""
        path = PureWindowsPath(windows_path)
        drive = path.drive.rstrip(":").lower()
        assert len(drive) == 1 and path.root, f"not an absolute drive path: {windows_path}"
        unix = (
            self.prefix / "drive_c"
            if drive == "c"
            else (self.prefix / "dosdevices" / f"{drive}:").resolve()
        )
        for part in path.parts[1:]:
            unix = _existing_spelling(unix, part)
        return unix

    def probe(self) -> str:
        """ISCC's banner, or "" if ISCC.exe cannot run: it is a 32-bit program, and without
        wine32 a 64-bit prefix has no loader for it."""
        done = self._wine(self.iscc, "/?", timeout=SERVER_TIMEOUT)
        banner = done.stdout.strip().splitlines()
        return banner[0] if banner and "Inno Setup" in banner[0] else ""

    def compile(
        self, iss: Path, output_dir: Path, *extra_args: str, timeout: float = 900
    ) -> CompileResult:
        """`ISCC /Q /O<output_dir> [extra_args] <iss>`; relative [Files] sources are found from
        the script's folder, as ISCC does on Windows."""
        output_dir.mkdir(parents=True, exist_ok=True)
        before = _stamps(output_dir)
        done = self._wine(
            self.iscc,
            "/Q",
            f"/O{self.windows_path(output_dir)}",
            *extra_args,
            self.windows_path(iss),
            cwd=iss.parent,
            timeout=timeout,
        )
        after = _stamps(output_dir)
        files = tuple(
            output_dir / name for name in sorted(after) if before.get(name) != after[name]
        )
        return CompileResult(done.returncode, done.stdout, done.stderr, files)

    def install(
        self,
        setup_exe: Path,
        target_dir: str | None,
        *extra_args: str,
        log: Path,
        timeout: float = 900,
    ) -> InstallResult:
        """Run `setup_exe /VERYSILENT /SUPPRESSMSGBOXES /NORESTART /DIR=<target_dir>
        /LOG=<log> [extra_args]` and wait for it; `target_dir` is a Windows path such as
        `C:\\Program Files\\My App (x64)` (Wine quotes an argument with spaces as a whole,
        and setup strips the quotes), or None for the script's default folder."""
        log.unlink(missing_ok=True)  # never read an earlier run's log
        done = self._wine(
            setup_exe,
            "/VERYSILENT",
            "/SUPPRESSMSGBOXES",
            "/NORESTART",
            *([f"/DIR={target_dir}"] if target_dir is not None else []),
            f"/LOG={self.windows_path(log)}",
            *extra_args,
            cwd=setup_exe.parent,
            timeout=timeout,
        )
        text = read_setup_log(log) if log.is_file() else ""
        return InstallResult(done.returncode, text, done.stdout, done.stderr)

    def uninstall(self, app: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the app folder's unins000.exe silently and wait until it is gone: the
        uninstaller starts a copy of itself from the temporary folder and exits at once."""
        done = self._wine(
            app / "unins000.exe", "/VERYSILENT", "/SUPPRESSMSGBOXES", "/NORESTART", timeout=timeout
        )
        deadline = time.monotonic() + timeout
        while (app / "unins000.exe").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)  # it removes itself last; let the folder settle
        return done

    def set_registry(self, key: str, name: str, dword: int) -> None:
        """Set a REG_DWORD in the 64-bit registry view, e.g. key
        HKLM\\SOFTWARE\\Microsoft\\VisualStudio\\14.0\\VC\\Runtimes\\x64, name Installed."""
        self._reg("add", key, "/v", name, "/t", "REG_DWORD", "/d", str(dword), "/f")

    def get_registry(self, key: str, name: str) -> int | None:
        """A REG_DWORD of the 64-bit view, or None if the key or value does not exist."""
        done = self._reg("query", key, "/v", name, check=False)
        for line in done.stdout.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[0] == name and fields[1] == "REG_DWORD":
                return int(fields[2], 16)
        return None

    def delete_registry_key(self, key: str) -> None:
        """Delete `key` with its values and subkeys from the 64-bit view; absent is fine."""
        if self._reg("query", key, check=False).returncode == 0:
            self._reg("delete", key, "/f")

    def _reg(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = self._wine("reg", *args, "/reg:64", timeout=SERVER_TIMEOUT)
        if check and done.returncode != 0:
            raise RuntimeError(f"wine reg {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done

    def _wine(
        self, program: Path | str, *args: str, cwd: Path | None = None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run a Windows program in the prefix, output captured, Wine's debug output off (a hung
        setup stops the prefix: it must not keep running into the next test)."""
        return self.program(program, *args, cwd=cwd, timeout=timeout)


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """Size and modification time of each file in `folder`, by name."""
    stamps: dict[str, tuple[int, int]] = {}
    for path in folder.iterdir():
        if path.is_file():
            stat = path.stat()
            stamps[path.name] = (stat.st_size, stat.st_mtime_ns)
    return stamps


def _existing_spelling(folder: Path, name: str) -> Path:
    """`folder / name`, spelled as an existing entry that differs only in case, if any."""
    exact = folder / name
    if exact.exists() or not folder.is_dir():
        return exact
    lowered = name.lower()
    for entry in folder.iterdir():
        if entry.name.lower() == lowered:
            return entry
    return exact


@pytest.fixture(scope="session")
def inno(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InnoSetup]:
    """One Windows 10 WoW64 prefix with a display for the whole session (boot: ~10 s); at the
    end its processes are killed, the display stopped and the prefix (~700 MB) removed."""
    require_inno()
    prefix = tmp_path_factory.mktemp("innoprefix")
    display = Xvfb(prefix.with_name(prefix.name + ".xvfb.log"))
    harness = InnoSetup(prefix, iscc_path(), display.start())
    try:
        harness.start()
        require(
            bool(harness.probe()),
            "ISCC.exe does not run under Wine: wine32 is missing"
            " (on Debian 12: bash .ci/install-wine32.sh)",
        )
        yield harness
    finally:
        harness.stop()
        display.stop()
        shutil.rmtree(prefix, ignore_errors=True)
