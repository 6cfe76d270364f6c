"""A test whose prerequisite (a tool, real data, an optional package) is absent skips locally
with its reason, and fails under CI=true: CI must never pass by skipping it silently."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(condition: bool, reason: str) -> None:
    """Skip a test whose prerequisite is absent; under CI that is a failure instead."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI prerequisite missing: {reason}", pytrace=False)
    pytest.skip(reason)


def require_module(name: str, reason: str) -> Any:
    """Import `name` for a whole test module; without it the module is skipped, under CI that
    is a failure instead."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if IN_CI:
            pytest.fail(f"CI prerequisite missing: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
