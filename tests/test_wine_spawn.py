"""Wine's process-start flake (tests/support/wine_spawn.py): retried once, and nothing else."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.support import wine_spawn


def failing(*errors: OSError) -> tuple[wine_spawn.Init, list[int]]:
    """An init that raises `errors` in turn, then succeeds; and the list of its calls."""
    calls: list[int] = []

    def init(self: Any, *args: Any, **options: Any) -> None:
        calls.append(len(calls))
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]

    return init, calls


def flake() -> OSError:
    error = OSError(22, "Internal error")
    error.winerror = wine_spawn.INTERNAL_ERROR  # type: ignore[attr-defined]
    return error


def test_a_start_that_failed_with_the_flake_is_tried_once_more() -> None:
    init, calls = failing(flake())
    wine_spawn.retrying(init)(object(), ["app.exe"])
    assert calls == [0, 1]


def test_the_flake_twice_fails_the_run() -> None:
    init, calls = failing(flake(), flake())
    with pytest.raises(OSError, match="Internal error"):
        wine_spawn.retrying(init)(object(), ["app.exe"])
    assert calls == [0, 1]


@pytest.mark.parametrize(
    "error",
    [FileNotFoundError(2, "No such file"), OSError(22, "Invalid argument")],
    ids=["not-found", "no-winerror"],
)
def test_any_other_error_is_not_retried(error: OSError) -> None:
    init, calls = failing(error)
    with pytest.raises(type(error)):
        wine_spawn.retrying(init)(object(), ["app.exe"])
    assert calls == [0]


def test_the_retry_is_installed_exactly_where_wine_runs_the_tests() -> None:
    """On Linux Popen is untouched; in the Windows unit tier (CPython for Windows under Wine)
    its __init__ is the retrying one."""
    name = subprocess.Popen.__init__.__qualname__
    assert wine_spawn.under_wine() == (sys.platform == "win32")
    assert ("retrying.<locals>.started" in name) == wine_spawn.under_wine(), name
