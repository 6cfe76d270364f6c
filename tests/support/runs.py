"""`bundle` run as a user runs it: a separate process, pip pointed at the test cache's wheels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import CPU, HELLO, test_cache_dir


def hello_cpu(out: Path, cache: Path, *extra: str) -> list[str]:
    """`bundle build` arguments: examples/hello with the CPU profile into `out`, artifacts from
    `cache`."""
    return [str(HELLO), "--profile", CPU, "--out", str(out), "--cache-dir", str(cache), *extra]


def cli(
    args: tuple[str, ...], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI the way a user does: a separate process, text output, exit code kept,
    BUNDLE_DEBUG off (no tracebacks), `env` on top of this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        capture_output=True,
        encoding="utf-8",  # what bundle writes to a pipe, on Windows too
        cwd=cwd,
        env={**os.environ, "BUNDLE_DEBUG": "", **(env or {})},
    )


def run_bundle(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`bundle ARGS` as a user runs it."""
    return cli(args, cwd)


def pip_env(**extra: str) -> dict[str, str]:
    """pip reads these like a user's pip.conf: no index, the pinned wheels as find-links."""
    return {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(test_cache_dir() / "wheels"),
        **extra,
    }


def bundle_from_cache(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI with pip unable to reach any wheel: artifacts must come from the given cache."""
    return cli(args, cwd, pip_env(PIP_FIND_LINKS="/nonexistent"))


def fetch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli(("fetch", *args), env=env)
