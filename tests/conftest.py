"""Shared fixtures and the collection hook; the helpers live in tests/support/. Tests that
need real tools or real DLLs skip locally with a reason, but fail under CI=true: CI must never
pass by skipping them silently (tests/support/skips.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

# The shared helpers of tests/support/ assert as the tests do: pytest rewrites their asserts too,
# so a failing one shows its values. The helpers imported here and the plugins below come after
# it (E402), or they would be imported unrewritten.
pytest.register_assert_rewrite("tests.support")

from tests.support.paths import GPU, HELLO, test_cache_dir  # noqa: E402
from tests.support.real_dlls import RealDlls  # noqa: E402
from tests.support.runs import bundle_from_cache, fetch, pip_env  # noqa: E402
from tests.support.skips import require  # noqa: E402
from tests.support.tiers import mark_tiers  # noqa: E402

pytest_plugins = [
    "tests.support.httpserver",
    "tests.support.wine",
    "tests.support.inno",
    "tests.support.display",
    "tests.support.winpython",
    "tests.support.winbuild",
    "tests.support.mingw",
    "tests.support.scratch",
    "tests.support.cli_budget",
    "tests.support.wine_spawn",
]  # `http_server`, `wine`, `display_wine`, `inno`, `win_python` and `win_builds` (the Windows
# tier), the programs built with mingw-w64 (`mingw_build`, `standins`, `doctor_exe`); the disk
# watch; the Windows unit tier's budget on its older Python; Wine's process-start flake retried


@pytest.fixture(scope="session")
def real_dlls() -> RealDlls:
    """The DLL folders of the real wheels the 1.19.2 profiles pin (the release most tests are
    about; the catalogue's other releases have tests of their own), fetched by
    tools/testing/fetch_test_wheels.py."""
    from tools.testing.fetch_test_wheels import dll_folder, pinned_wheels

    extracted = test_cache_dir() / "extracted"
    folders: dict[str, Path] = {}
    for wheel, source in pinned_wheels("1.19.2").items():
        stem = extracted / wheel.removesuffix(".whl")
        require(
            (stem / ".complete").is_file(),
            f"real DLLs of {wheel} not in {extracted}: "
            "run python -m tools.testing.fetch_test_wheels",
        )
        folders[source.package] = dll_folder(stem)
    return RealDlls(folders)


@pytest.fixture(scope="session")
def gpu_fetch(
    real_dlls: RealDlls, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One `bundle fetch` of the GPU profile per run into a fresh cache (pip pointed at the
    pinned wheels); later tests build from that cache with hard links. With pytest-xdist the
    first worker that needs it fetches, under a file lock in the folder the workers share, and
    the others take its cache and its recorded result: a fetch writes ~4 GB."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    shared = root / "gpu-fetch"
    record = shared / "result.json"
    with FileLock(root / "gpu-fetch.lock"):
        if not record.is_file():
            shared.mkdir(exist_ok=True)
            done = fetch(
                *("--profile", GPU, "--cache-dir", str(shared / "cache"), "--json"), env=pip_env()
            )
            fields = {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
            record.write_text(json.dumps({"args": done.args, **fields}), encoding="utf-8")
    recorded = json.loads(record.read_text(encoding="utf-8"))
    return shared / "cache", subprocess.CompletedProcess(**recorded)


@pytest.fixture(scope="session")
def gpu_cache(gpu_fetch: tuple[Path, subprocess.CompletedProcess[str]]) -> Path:
    cache, result = gpu_fetch
    assert result.returncode == 0, result.stderr
    return cache


@pytest.fixture(scope="session")
def gpu_bundle(gpu_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/hello built with the GPU profile (the default) from the session's cache with
    --link: every DLL of the profile, a hard link into the cache. One build for every module
    that reads it; a test that needs a changed bundle changes a copy (tests.test_build's
    linked_copy, a copied file for one it edits), never this folder."""
    out = tmp_path_factory.mktemp("gpu-bundle")
    args = (str(HELLO), "--out", str(out), "--cache-dir", str(gpu_cache), "--link")
    result = bundle_from_cache("build", *args)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def cpu_cache(real_dlls: RealDlls, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("fetch-cpu") / "cache"
    result = fetch("--profile", "ort-1.19.2-cpu", "--cache-dir", str(cache), env=pip_env())
    assert result.returncode == 0, result.stderr
    return cache


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers and the workers' groups (tests/support/tiers.py)."""
    mark_tiers(config, items)
