"""The Windows tier itself (tests/support/winpython.py): before other tests trust its verdict,
these prove it is python.org's build, that it runs this checkout's bundle, that the Wine 8
routes of its sitecustomize hold, and that its output is captured on every start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.runs import run_bundle
from tests.support.winpython import WinPython, winpath

pytestmark = pytest.mark.real_tools

STARTS = 20


def test_it_is_the_official_64_bit_build(win_python: WinPython) -> None:
    result = win_python.python("-c", "import sys; print(sys.version)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{win_python.minor}."), result.stdout
    assert "[MSC v.19" in result.stdout, result.stdout
    assert "64 bit (AMD64)]" in result.stdout, result.stdout


def test_it_imports_this_checkout(win_python: WinPython) -> None:
    result = win_python.python("-c", "import bundler; print(bundler.__file__)")
    assert result.returncode == 0, result.stderr
    expected = winpath(REPO / "bundler" / "__init__.py")
    assert result.stdout.strip().lower() == expected.lower()


@pytest.mark.parametrize("args", [("--version",), ("profiles",)], ids=" ".join)
def test_bundle_says_what_it_says_on_linux(win_python: WinPython, args: tuple[str, ...]) -> None:
    on_windows = win_python.run(*args)
    on_linux = run_bundle(*args)
    assert on_windows.returncode == on_linux.returncode == 0, on_windows.stderr
    assert on_windows.stdout == on_linux.stdout
    assert on_windows.stderr == ""


ROUTES = r"""
import _winapi, locale, platform, shutil, sys
print(platform._wmi if sys.version_info >= (3, 12) else None, hasattr(_winapi, "CopyFile2"))
print(platform.win32_ver()[0], shutil.copy2(sys.argv[1], sys.argv[2]))
print(locale.getpreferredencoding(False), "\u2713")
"""


def test_the_wine_routes_hold(win_python: WinPython, tmp_path: Path) -> None:
    """WMI and CopyFile2 would abort the process under Wine 8 (sitecustomize); the streams
    are UTF-8 while files keep the ANSI code page."""
    (tmp_path / "a.txt").write_text("copied")
    result = win_python.python(
        "-c", ROUTES, winpath(tmp_path / "a.txt"), winpath(tmp_path / "b.txt")
    )
    assert result.returncode == 0, result.stderr
    routes, copied, encodings = result.stdout.splitlines()
    assert routes == "None False"
    assert copied.endswith("b.txt")
    assert (tmp_path / "b.txt").read_text() == "copied"
    assert encodings == "cp1252 \u2713"


def test_the_test_tools_run(win_python: WinPython) -> None:
    """pytest, hypothesis and pip (which bundle's pip sources run) are installed for Windows."""
    for module in ("pytest", "pip"):
        result = win_python.python("-m", module, "--version")
        assert result.returncode == 0, result.stderr
    result = win_python.python("-c", "import hypothesis, isal, colorama")
    assert result.returncode == 0, result.stderr


def test_every_start_is_captured(win_python: WinPython) -> None:
    """The init_sys_streams failure (a file as a standard handle) never comes with pipes."""
    for start in range(STARTS):
        result = win_python.python("-c", f"print('start {start}')")
        assert "init_sys_streams" not in result.stderr, f"start {start}: {result.stderr}"
        assert (result.returncode, result.stdout) == (0, f"start {start}\n"), result.stderr
