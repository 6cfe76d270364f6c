"""Wine as a real PE loader: the ground truth for "does this folder's DLL set load?".

bundle computes a DLL closure statically; Wine actually maps the files, resolves the imports
and runs DllMain, so a missing dependency fails the way it does on Windows. `Wine` owns one
private prefix per test session (never ~/.wine) and a persistent wineserver: a fresh prefix
costs seconds, a run in a warm one a fraction of a second. `wine` is the session fixture.

Wine ships builtin msvcp140/vcruntime140; they would hide a missing VC runtime DLL, so by
default the shipped (native) ones are forced. With WINEDEBUG=err+module the loader reports
every unresolved import as

    0024:err:module:import_dll Library X.dll (which is needed by L"Z:\\...\\Y.dll") not found

which `WineRun.missing` collects. Everything else Wine says (fixme: noise, no display, ...)
is kept in `stderr` but not interpreted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.support.skips import require
from tests.support.wineprefix import seed

NATIVE_VC_RUNTIME = "msvcp140,msvcp140_1,vcruntime140,vcruntime140_1=n"
SERVER_TIMEOUT = 60.0  # wineboot / wineserver -k: seconds, even on a cold page cache

# What `wine X.exe` prints when its CreateProcess of the program fails before any of the
# program's DLLs is looked for (it falls back to ShellExecuteEx, which fails too): Wine's
# ERROR_INTERNAL_ERROR (1359), as tests/support/wine_spawn.py's flake. Seen in runs of the suite
# on two workers (a loaded machine), for a test program and once for CPython for Windows, each
# a file that ran fine elsewhere: it never started, so nothing was measured, and `program` runs
# it again, once.
NOT_STARTED = "ShellExecuteEx failed: Internal error."
# glibc's loader, as a Wine process tears down while another of its threads still loads a
# library (a race of the host's ld.so, not of the program run: its exit status stays 0). Seen
# once in CI's load (tests/test_doctor.py, 2026-12-05); a program's own stderr never has it.
HOST_LOADER_RACE = re.compile(r"^Inconsistency detected by ld\.so: dl-fini\.c: .*\n?", re.MULTILINE)


def program_stderr(text: str) -> str:
    """What a Windows program wrote to stderr, less the host loader's exit race."""
    return HOST_LOADER_RACE.sub("", text)


_ERROR_LINE = re.compile(r"^[0-9a-f]+:err:", re.MULTILINE)
_MISSING = re.compile(r":err:module:import_dll Library (\S+) \(which is needed by ")


def require_wine() -> None:
    """Skip without Wine locally; under CI a missing Wine is a failure, not a silent pass."""
    require(
        shutil.which("wine") is not None and shutil.which("wineserver") is not None,
        "Wine is not installed (apt-get install wine wine64)",
    )


@dataclass(frozen=True)
class WineRun:
    """What one program run under Wine did."""

    returncode: int
    stdout: str
    missing: tuple[str, ...]
    """DLLs the loader could not load, spelled as in the importer's import table, in order of
    first report. A cascade: a present DLL whose own import failed is listed too."""
    errors: tuple[str, ...]
    """Every `err:` line, for assertion messages and for what `missing` does not parse."""
    stderr: str

    @classmethod
    def parse(cls, returncode: int, stdout: str, stderr: str) -> WineRun:
        errors = tuple(line for line in stderr.splitlines() if _ERROR_LINE.match(line))
        missing = dict.fromkeys(m.group(1) for line in errors if (m := _MISSING.search(line)))
        return cls(returncode, stdout, tuple(missing), errors, stderr)

    def absent_from(self, folder: Path) -> tuple[str, ...]:
        """The missing DLLs with no file in `folder` (case-insensitively, as Windows matches):
        the root causes, without the present DLLs that only failed because of them."""
        present = {path.name.lower() for path in folder.iterdir()}
        return tuple(name for name in self.missing if name.lower() not in present)


class Wine:
    """A private 64-bit Wine prefix with a persistent wineserver.

    The server and its services are started by `start()` with their output discarded (to a
    log file): started by a run, they would inherit its stdout/stderr pipes and the run would
    only end when they do.
    """

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.log = prefix.with_name(prefix.name + ".log")  # Wine's own output; kept
        self._up = False

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "WINEPREFIX": str(self.prefix), "WINEARCH": "win64", **extra}
        for name in ("DISPLAY", "WAYLAND_DISPLAY"):  # console apps only: no window, no driver
            env.pop(name, None)
        return env

    def start(self) -> None:
        """Start the server and the prefix's services; the first start creates the prefix."""
        if self._up:
            return
        seed(self.prefix)
        self._quietly("wineserver", "-p")  # -p: persist until killed, not 3 s after the last exit
        # mscoree/mshtml disabled: no attempt to install Wine Mono / Gecko into the prefix.
        boot = self._quietly("wineboot", "-i", WINEDLLOVERRIDES="mscoree,mshtml=")
        if boot.returncode != 0:
            self.stop()
            raise RuntimeError(f"wineboot -i failed ({boot.returncode}), see {self.log}")
        self._up = True

    def run(
        self, exe: Path, *args: str, force_native_vc: bool = True, timeout: float = 180
    ) -> WineRun:
        """Run `exe` from its own folder, as a user double-clicking it would."""
        overrides = NATIVE_VC_RUNTIME if force_native_vc else None
        done = self.program(
            exe, *args, cwd=exe.parent, debug="err+module", overrides=overrides, timeout=timeout
        )
        return WineRun.parse(done.returncode, done.stdout, done.stderr)

    def program(
        self,
        program: Path | str,
        *args: str,
        cwd: Path | None = None,
        debug: str = "-all",
        overrides: str | None = None,
        env: dict[str, str | None] | None = None,
        timeout: float = 180,
    ) -> subprocess.CompletedProcess[str]:
        """The one way the tests run a Windows program: in this prefix, stdin closed, output
        captured through pipes as UTF-8 (a stray byte replaced), WINEDEBUG=`debug`, DLL
        overrides `overrides` or Wine's defaults, `env` added (None removes a variable). On a
        timeout the prefix is stopped, so nothing it started keeps running, and it re-raises."""
        self.start()
        for attempt in range(2):  # once more where Wine could not start it (NOT_STARTED)
            try:
                done = subprocess.run(
                    ["wine", str(program), *args],
                    cwd=cwd,
                    env=self.environment(debug, overrides, env),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    encoding="utf-8",
                    errors="replace",
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                self.stop()  # whatever the program started must not keep running
                raise
            if attempt or done.returncode == 0 or NOT_STARTED not in done.stdout:
                break
        return done

    def background(
        self,
        program: Path | str,
        *args: str,
        env: dict[str, str | None] | None = None,
        stdin: int = subprocess.DEVNULL,
        to_log: bool = False,
    ) -> subprocess.Popen[str]:
        """`program` as `program()` runs it (Wine's debug output off, Wine's default DLL
        overrides), started and not waited for: the caller reads its pipes and waits.
        `stdin=subprocess.PIPE` gives it a standard input the caller can write or close.
        `to_log`: its output goes to the prefix's log instead, for a program that starts Wine's
        own processes (they would inherit the pipes, and hold them as long as they live)."""
        self.start()
        with self.log.open("ab") as log:
            output: int | IO[bytes] = log if to_log else subprocess.PIPE
            return subprocess.Popen(
                ["wine", str(program), *args],
                env=self.environment("-all", None, env),
                stdin=stdin,
                stdout=output,
                stderr=output,
                encoding="utf-8",
                errors="replace",
            )

    def environment(
        self, debug: str, overrides: str | None, env: dict[str, str | None] | None
    ) -> dict[str, str]:
        """What a program of this prefix runs with: WINEDEBUG=`debug`, WINEDLLOVERRIDES
        `overrides` (None: Wine's defaults, whatever this process has), `env` added (None
        removes a variable)."""
        environment = self.env(WINEDEBUG=debug)
        environment.pop("WINEDLLOVERRIDES", None)
        if overrides is not None:
            environment["WINEDLLOVERRIDES"] = overrides
        for name, value in (env or {}).items():
            environment.pop(name, None)
            if value is not None:
                environment[name] = value
        return environment

    def stop(self) -> None:
        """Kill the prefix's wineserver and every process in it, and wait until it is gone."""
        self._quietly("wineserver", "-k")
        self._quietly("wineserver", "-w")
        self._up = False

    def _quietly(self, *command: str, **extra: str) -> subprocess.CompletedProcess[bytes]:
        with self.log.open("ab") as log:
            return subprocess.run(
                command,
                env=self.env(**extra),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                timeout=SERVER_TIMEOUT,
            )


@contextmanager
def private_prefix(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Wine]:
    """A started prefix of its own under the session's temp folder; stopped and removed at
    the end (a prefix is ~700 MB)."""
    require_wine()
    prefix = tmp_path_factory.mktemp(name)
    harness = Wine(prefix)
    try:
        harness.start()
        yield harness
    finally:
        harness.stop()
        shutil.rmtree(prefix, ignore_errors=True)


@pytest.fixture(scope="session")
def wine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wine]:
    """One initialised prefix for the whole session."""
    with private_prefix(tmp_path_factory, "wineprefix") as harness:
        yield harness
