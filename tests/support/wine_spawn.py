"""Wine's one known process-start flake, retried once where the tests run under Wine.

Wine 8's CreateProcess now and then fails with ERROR_INTERNAL_ERROR (1359) before the child
exists: seen about one compile in three for ISCC's LZMA helper (tests/test_windows_workflows.py,
ISCC_WINE_FLAKE), and once in a CI run of the Windows unit tier, where CPython for Windows
started `python -m bundler` (`OSError: [WinError 1359] Internal error` from subprocess.Popen).
Windows itself has never shown it. Nothing was started, so starting the same process again is
the same run; any other error, and a second 1359, still fails the test.

Installed only in a pytest run by CPython for Windows under Wine (the Windows unit tier);
on Linux and on a real Windows nothing changes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

INTERNAL_ERROR = 1359  # ERROR_INTERNAL_ERROR, as Wine's CreateProcess reports the flake

Init = Callable[..., None]


def is_the_flake(error: OSError) -> bool:
    return getattr(error, "winerror", None) == INTERNAL_ERROR


def retrying(init: Init) -> Init:
    """`init` (Popen.__init__) tried once more when the process did not start with the flake.
    Popen's own clean-up has closed the first try's pipes before the error reaches here."""

    def started(self: subprocess.Popen[Any], *args: Any, **options: Any) -> None:
        try:
            init(self, *args, **options)
        except OSError as error:
            if not is_the_flake(error):
                raise
            init(self, *args, **options)

    return started


def under_wine() -> bool:
    """This process is a Windows program that Wine runs (ntdll exports wine_get_version)."""
    if sys.platform != "win32":
        return False
    import ctypes

    return hasattr(ctypes.WinDLL("ntdll"), "wine_get_version")


@pytest.hookimpl(trylast=True)  # after tests/support/cli_budget.py: wraps what it installed
def pytest_configure(config: pytest.Config) -> None:
    if under_wine():
        subprocess.Popen.__init__ = retrying(subprocess.Popen.__init__)  # type: ignore[method-assign]
