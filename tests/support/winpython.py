"""The Windows tier: `bundle` run by the official CPython for Windows, under Wine.

`win_python` is a session fixture with one instance per version in VERSIONS; its `run(...)`
is `python.exe -m bundler ...` on the working tree, as `run_bundle` is on Linux, and returns
the same CompletedProcess. The interpreters are python.org's embeddable builds, set up and
cached by tools/testing/windows_python.py (the fixture calls it: CI needs no extra step). They run
in the tier's own Wine prefix (tests/support/wine.py's `Wine`), not the `wine` fixture's.

Standard handles: pipes, never files. Under Wine 8 a Windows process whose stdin, stdout or
stderr is a regular Unix file (named, unlinked, appended to, on tmpfs: all tried) gets a
handle Wine cannot describe: CPython's start-up fstat()s each standard stream and dies with

    Fatal Python error: init_sys_streams: can't initialize sys standard streams
    OSError: [WinError 6] Invalid handle

every time, on 3.11 and 3.13 (cmd.exe, which only writes, does not mind). Pipes and
/dev/null never failed, so a run has stdin from /dev/null and its output captured through
pipes. A pipe inherited by a Wine service would keep the run from ending until the service
does; `Wine.start()` starts the server and services first, with their output in a log file
(Wine's own processes are not Python: a file is fine for them).

Encoding: the standard streams are UTF-8 (PYTHONIOENCODING, honoured by the tier's
sitecustomize, as the ._pth file makes CPython ignore it), while open() without an encoding
keeps cp1252, as on a user's machine, so a missing `encoding=` still shows. UTF-8 mode
(PYTHONUTF8, -X utf8) is deliberately not used. Wine's own messages are off (WINEDEBUG=-all):
stderr is the program's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path, PurePath

import pytest

from tests.support.paths import REPO
from tests.support.skips import require
from tests.support.wine import Wine, private_prefix

VERSIONS = ("3.11", "3.13")
TIMEOUT = 300.0  # seconds; `bundle --version` takes one or two under Wine


def winpath(path: PurePath) -> str:
    """`path` as the Windows process spells it: Wine maps the Unix root to drive Z:."""
    return "Z:" + str(Path(path).absolute()).replace("/", "\\")


class WinPython:
    """One CPython for Windows in a Wine prefix: `python(...)` runs it, `run(...)` runs bundle."""

    def __init__(self, minor: str, home: Path, wine: Wine) -> None:
        self.minor = minor
        self.exe = home / "python.exe"
        self.wine = wine

    def __repr__(self) -> str:
        return f"WinPython({self.minor}, {self.exe})"

    def python(
        self,
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = TIMEOUT,
    ) -> subprocess.CompletedProcess[str]:
        """`python.exe ARGS` with the working tree importable; `env` is added to the
        environment (Wine passes it through; Unix paths in it stay Unix paths: use winpath)."""
        extra = self.extras(env or {})
        return self.wine.program(self.exe, *args, cwd=cwd, env=extra, timeout=timeout)

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = TIMEOUT,
    ) -> subprocess.CompletedProcess[str]:
        """`bundle ARGS`, as `python.exe -m bundler ARGS` (tests.support.runs.run_bundle's twin)."""
        return self.python(
            "-m",
            "bundler",
            *args,
            cwd=cwd,
            env={"BUNDLE_DEBUG": "", **(env or {})},
            timeout=timeout,
        )

    def extras(self, extra: dict[str, str]) -> dict[str, str | None]:
        """What the interpreter gets on top of the prefix's environment (with Wine's default
        DLL overrides, as on a user's machine: Wine.program's)."""
        return {"PYTHONIOENCODING": "utf-8", "BUNDLE_TEST_PYTHONPATH": winpath(REPO), **extra}

    def background(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """`python.exe ARGS` as `python` runs it, started and not waited for (Wine.background)."""
        return self.wine.background(self.exe, *args, env=self.extras(env or {}))


def interpreter(minor: str) -> Path:
    """The cached interpreter folder, set up on first use (a minute; pip needs the network)."""
    from tools.testing.windows_python import ensure

    try:
        return ensure(minor, log=lambda line: None)
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        require(
            False,
            f"CPython {minor} for Windows not set up ({error}): see the output of "
            "python -m tools.testing.windows_python",
        )
        raise  # not reached: require skipped or failed


@pytest.fixture(scope="session")
def win_wine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wine]:
    """The tier's own prefix, removed at the end: bundle's per-user state (the cache under
    C:\\users) stays out of the loader tests' prefix, and a timed-out run, which stops the
    prefix, kills nothing of theirs."""
    with private_prefix(tmp_path_factory, "winpython-prefix") as harness:
        yield harness


@pytest.fixture(scope="session", params=VERSIONS, ids=lambda minor: f"win{minor}")
def win_python(request: pytest.FixtureRequest, win_wine: Wine) -> WinPython:
    """CPython `minor` for Windows, for every version in VERSIONS."""
    minor: str = request.param
    return WinPython(minor, interpreter(minor), win_wine)
