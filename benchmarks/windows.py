"""`python -m benchmarks.run --windows 3.11|3.13`: bundle run by python.org's CPython for
Windows under Wine, as the tests' Windows tier runs it (tools/testing/windows_python.py sets the
interpreter up, tests/support/winpython.py says how it is run). The yardsticks stay Linux
programs (`cp`, `objdump`), so a ratio measured this way holds Wine's overhead too: `overhead`
measures it in the same run and the report states it beside the rows."""

from __future__ import annotations

import atexit
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.support.wine import Wine
from tools.testing.windows_python import PATH_VARIABLE, ensure

REPO = Path(__file__).resolve().parent.parent


def interpreter(minor: str, work: Path) -> tuple[list[str], dict[str, str]]:
    """The command that starts the Windows Python, and the environment its runs need: a
    private Wine prefix under `work` (started now, stopped when the benchmark exits)."""
    home = ensure(minor, log=lambda line: None)
    wine = Wine(work / "wineprefix")
    wine.start()
    atexit.register(wine.stop)
    environment = {
        "WINEPREFIX": str(wine.prefix),
        "WINEARCH": "win64",
        "WINEDEBUG": "-all",
        "PYTHONIOENCODING": "utf-8",
        PATH_VARIABLE: "Z:" + str(REPO).replace("/", "\\"),
    }
    return ["wine", str(home / "python.exe")], environment


def overhead(python: list[str], env: dict[str, str], repeat: int) -> dict[str, str]:
    """Start-up under Wine against the same under Linux's Python, median of `repeat` runs:
    an empty interpreter, and `bundle --version` (imports the CLI)."""
    facts = {}
    for what, args in (
        ("python -c pass", ["-c", "pass"]),
        ("bundle --version", ["-m", "bundler", "--version"]),
    ):
        windows = _median(python + args, env, repeat)
        linux = _median([sys.executable, *args], None, repeat)
        facts[f"Wine's overhead, {what}"] = (
            f"{windows:.2f} s under Wine against {linux:.2f} s on Linux (+{windows - linux:.2f} s)"
        )
    return facts


def _median(command: list[str], env: dict[str, str] | None, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            cwd=REPO,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)
