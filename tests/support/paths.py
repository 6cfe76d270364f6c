"""Where the tests' inputs are: the repository, the example app, the 1.19.2 profiles most tests
use, the test cache outside the repository (real wheels, built fixtures), and a user's app
folder made from the example."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Defined once for every test module: the example app and the 1.19.2 profiles most tests use.
HELLO = REPO / "examples" / "hello" / "hello.exe"
GPU = "ort-1.19.2-gpu-cuda12"
CPU = "ort-1.19.2-cpu"
DIRECTML = "ort-1.19.2-directml"


def hello_app(folder: Path, toml: str | None = None) -> Path:
    """A user's app folder: examples/hello's exe in `folder` and, given `toml`, a bundle.toml
    beside it. Returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HELLO, folder / "hello.exe")
    if toml is not None:
        (folder / "bundle.toml").write_text(toml)
    return folder


def test_cache_dir() -> Path:
    """Where the real wheels and built fixtures live between runs (outside the repository)."""
    configured = os.environ.get("BUNDLE_TEST_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bundle-tests"


test_cache_dir.__test__ = False  # type: ignore[attr-defined]
