"""Read layer: the process environment, read here and nowhere else in the library (tests/
test_layers.py keeps it so): bundle's own variables ($BUNDLE_*), pip's index ($PIP_INDEX_URL),
the variable a profile's `dir` source names ($CUDA_PATH and the like), the system locations a
load proof needs (%SYSTEMROOT%, $WINEPREFIX), and the environments handed to child processes.
Each value is read when asked for; the CLI resolves options over them and reports each one's
origin (bundler.config.options). Which variables there are, and their names, is
bundler.config.variables' table."""

from __future__ import annotations

import os
from pathlib import Path

from bundler.config.variables import DEBUG, INDEX_URL, SYSTEMROOT, WINEPREFIX

# The names come from the one table of variables (bundler.config.variables), derived there
# from the options they stand in for.
PIP_INDEX_ENV = INDEX_URL.name
DEBUG_ENV = DEBUG.name


def variable(name: str) -> str | None:
    """$name, or None when it is unset or blank."""
    value = os.environ.get(name, "")
    return value if value.strip() else None


def pip_index_url() -> str | None:
    """$PIP_INDEX_URL, as pip reads it: the package index to ask instead of PyPI's, or None."""
    return variable(PIP_INDEX_ENV)


def debug_requested() -> bool:
    """$BUNDLE_DEBUG set to anything but 0: tracebacks instead of one-line errors."""
    return (variable(DEBUG_ENV) or "0").strip() != "0"


def system_root() -> str:
    r"""The Windows folder (%SYSTEMROOT%, else C:\Windows)."""
    return variable(SYSTEMROOT.name) or r"C:\Windows"


def wine_prefix() -> Path | None:
    """The Wine prefix the user chose ($WINEPREFIX), if any."""
    configured = variable(WINEPREFIX.name)
    return Path(configured) if configured else None


def child_environment(drop: tuple[str, ...] = (), **changes: str) -> dict[str, str]:
    """A copy of this process's environment for a child process: the variables `drop` names
    left out, `changes` set."""
    env = {name: value for name, value in os.environ.items() if name not in drop}
    env.update(changes)
    return env
