"""The Windows unit tier (issue 27, point 3): the fast tier's portable tests, run by the
official CPython for Windows (tests/support/winpython.py), where path and file-handling bugs
show: a `/` assumed in a path, a text file read in the ANSI code page, a POSIX file mode.

The inner run selects `-m "not real_tools and not posix_only"`: real tools and real data stay
with the Linux run (this module is itself real_tools, through `win_python`, so the inner run
never starts itself), and `posix_only` marks, each with its reason, the fast tests that need
what only Linux has here (bash, a pty, a folder with two names differing only by case, mingw,
mono, Wine). The inner run has CI unset: its remaining skips are read from its report and
must each be one of ABSENT_HERE, so a test that starts skipping on Windows fails this one.

The newest version runs the whole selection. The older ones run it in-process only
(tests/support/cli_budget.py): a test that starts `bundle` as a process skips there, with
cli_budget.REASON, because those ~280 process starts are most of the tier's time and prove
on the older Python nothing that the newest and the older version's own Windows workflows
(bundle started as a process for every command) do not. Everything the library does
in-process still runs on every version, and the count that did is checked (IN_PROCESS_AT_LEAST).
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import cli_budget
from tests.support.paths import REPO
from tests.support.winpython import VERSIONS, WinPython, winpath

SELECTION = "not real_tools and not posix_only"
# Measured on 2 cores shared with other Wine work: 330 s (3.11) and 386 s (3.13) for ~640 tests.
# Most of it is the tests that run `bundle` as a process (audit, fetch, msbuild, catalogue, and
# since issue 30 every command's --dry-run origins): CPython for Windows starts in 1-3 s under
# Wine, against 0.1 s on Linux. The limit leaves room for a loaded machine.
LIMIT = 1200.0  # seconds
TAIL = 80  # lines of the inner report shown when it fails
# What may skip on Windows: Python packages the tier does not install, and why.
ABSENT_HERE = {
    '"ort-bundle[models]"': "onnx needs numpy, which aborts under Wine 8 (ucrtbase.crealf)",
    "PyYAML is not installed": "test_action reads the GitHub Action, which runs on its runners",
    '".[signatures]"': "lief reads Authenticode; the Linux run checks the real signed DLLs",
    "junitparser is missing": "the JUnit XML's structure is still checked, with ElementTree",
    "a consumer of the published files is not installed": "the Linux run checks what `bundle "
    "publish` writes with PyYAML, jsonschema, in-toto, spdx-tools and cyclonedx",
    "coreutils' sha256sum is not on PATH": "a GNU tool; the Linux run checks SHA256SUMS with it",
}
IN_PROCESS_AT_LEAST = 600  # tests that pass on an older version (~700 of ~980 in 2026-12)
_PASSED = re.compile(r"^(\d+) passed", re.MULTILINE)
_SKIPPED = re.compile(r"^SKIPPED \[\d+\] (\S+): (.*)$", re.MULTILINE)


def test_the_portable_unit_tests_pass_under_cpython_for_windows(
    win_python: WinPython, tmp_path: Path
) -> None:
    newest = win_python.minor == VERSIONS[-1]
    allowed = dict(ABSENT_HERE) if newest else {**ABSENT_HERE, cli_budget.REASON[:58]: "the budget"}
    started = time.monotonic()
    try:
        result = win_python.python(
            *("-m", "pytest", "-m", SELECTION, "-p", "no:cacheprovider", "-q", "-rfEs"),
            # one process: the tier has no pytest-xdist, and its options are the outer run's
            "-o",
            "addopts=--strict-markers",
            f"--basetemp={winpath(tmp_path / 'basetemp')}",
            "tests",
            cwd=REPO,
            # CI unset: a prerequisite the tier lacks skips (checked below) instead of failing;
            # none of the outer run's options
            env={"CI": "", "PYTEST_ADDOPTS": "", cli_budget.VARIABLE: "" if newest else "1"},
            timeout=LIMIT,
        )
    except subprocess.TimeoutExpired as timeout:
        partial = timeout.stdout or b""
        text = partial.decode("utf-8", "replace") if isinstance(partial, bytes) else partial
        pytest.fail(f"not done in {LIMIT:.0f} s; so far:\n{text[-4000:]}", pytrace=False)
    seconds = time.monotonic() - started
    report = result.stdout + result.stderr
    tail = "\n".join(report.splitlines()[-TAIL:])
    summary = f"CPython {win_python.minor} for Windows, {seconds:.0f} s:\n{tail}"
    assert result.returncode == 0, summary
    passed = _PASSED.search(report)
    assert passed, summary  # it ran, and said so
    assert newest or int(passed.group(1)) >= IN_PROCESS_AT_LEAST, summary
    unexpected = [
        f"{where}: {why}"
        for where, why in _SKIPPED.findall(report)
        if not any(absent in why for absent in allowed)
    ]
    assert unexpected == [], summary
