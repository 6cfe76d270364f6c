"""The Windows unit tier's budget on its older CPython (tests/test_windows_unit_tier.py).

Most of that tier's time is `bundle` started as a process: CPython for Windows starts in 1 to
3 s under Wine, and the fast tier starts bundle about 280 times. On the older version those
starts add nothing the newest does not prove: the same CLI under the same Windows file and
process handling, which the older version's own Windows workflows start anyway (build, audit,
fetch, render, as processes). So with $BUNDLE_TEST_IN_PROCESS set, a test that starts
`python -m bundler` is skipped at that point, with `REASON`, and the tier's older version runs
the rest: every test of the library in-process.

The skip is raised where the process would start (subprocess.Popen), so it needs no list of
tests and no marker to keep current, and a test that does its in-process work first has done
it before it is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

VARIABLE = "BUNDLE_TEST_IN_PROCESS"
REASON = "bundle as a process runs on the newest Windows Python only (tests/support/cli_budget.py)"


def starts_bundle(args: Any) -> bool:
    """`args` is `<this Python> -m bundler ...`."""
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        return False
    words = [os.fspath(word) if not isinstance(word, str) else word for word in args]
    return len(words) >= 3 and words[0] == sys.executable and words[1:3] == ["-m", "bundler"]


_original_init = subprocess.Popen.__init__


def _guarded_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
    if starts_bundle(args):
        self._child_created = False  # what Popen.__del__ reads first: nothing was started
        pytest.skip(REASON)
    _original_init(self, args, *rest, **options)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(VARIABLE):
        subprocess.Popen.__init__ = _guarded_init  # type: ignore[method-assign]
