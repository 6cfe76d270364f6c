"""Shared fixtures. Tests that need real tools or real DLLs skip locally with a reason, but
fail under CI=true: CI must never pass by skipping them silently."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

# The shared helpers of tests/support/ assert as the tests do: pytest rewrites their asserts too,
# so a failing one shows its values (the plugins below would be rewritten anyway, the rest not).
pytest.register_assert_rewrite("tests.support")

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
]  # `http_server`, `wine`, `display_wine`, `inno`, `win_python` and `win_builds` (the Windows
# tier), the programs built with mingw-w64 (`mingw_build`, `standins`, `doctor_exe`); the disk
# watch; the Windows unit tier's budget on its older Python

REPO = Path(__file__).resolve().parent.parent
# Defined once for every test module: the example app and the 1.19.2 profiles most tests use.
HELLO = REPO / "examples" / "hello" / "hello.exe"
GPU = "ort-1.19.2-gpu-cuda12"
CPU = "ort-1.19.2-cpu"
DIRECTML = "ort-1.19.2-directml"


def hello_cpu(out: Path, cache: Path, *extra: str) -> list[str]:
    """`bundle build` arguments: examples/hello with the CPU profile into `out`, artifacts from
    `cache`."""
    return [str(HELLO), "--profile", CPU, "--out", str(out), "--cache-dir", str(cache), *extra]


def hello_app(folder: Path, toml: str | None = None) -> Path:
    """A user's app folder: examples/hello's exe in `folder` and, given `toml`, a bundle.toml
    beside it. Returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HELLO, folder / "hello.exe")
    if toml is not None:
        (folder / "bundle.toml").write_text(toml)
    return folder


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


def test_cache_dir() -> Path:
    """Where the real wheels and built fixtures live between runs (outside the repository)."""
    configured = os.environ.get("BUNDLE_TEST_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bundle-tests"


test_cache_dir.__test__ = False  # type: ignore[attr-defined]


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


class RealDlls:
    """Maps a pinned wheel's package name to the folder holding its DLLs."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def __getitem__(self, package: str) -> Path:
        return self.folders[package]

    def search_args(self, *packages: str) -> list[str]:
        args: list[str] = []
        for package in packages:
            args += ["--search", str(self.folders[package])]
        return args


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


# Fixtures that start a real tool or bring real data: a test using one is in the slow tier.
REAL_TOOL_FIXTURES = frozenset(
    {"wine", "inno", "xbuild", "standins", "mingw_build", "doctor_exe", "real_dlls", "gpu_cache"}
    | {"cpu_cache", "display_wine"}
    | {"win_python", "win_wine"}
)
REAL_TOOL_MODULES = (
    *("test_audit_html", "test_mingw_fixtures", "test_packaging", "test_docs", "test_audit_run"),
    # not a real tool, but minutes of work: fuzzing, killed processes, contended locks, the
    # bad-input catalogue (a CLI process per row), archives written and read back by 7z/unzip
    *("test_pe_fuzz", "test_interrupt", "test_locks", "test_concurrency"),
    *("test_bad_inputs", "test_archive"),
    "test_gpu_probe",  # real ONNX Runtime sessions, a process per model
)
SLOW_TESTS = ("test_a_large_file_is_streamed",)
# Fast-tier fixtures that run a tool only the Linux side has: a test using one is posix_only.
POSIX_ONLY_FIXTURES = {
    "managed_build": "compiles with mono's mcs, installed on the Linux side only",
    "loader_exe": "compiles with mingw-w64's gcc, installed on the Linux side only",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tier: `pytest -m "not real_tools"` runs the fast unit tests alone, the
    README's `python -m pytest` runs everything. The Windows unit tier (tests/
    test_windows_unit_tier.py) runs `-m "not real_tools and not posix_only"`."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        slow = item.get_closest_marker("realdata") or item.get_closest_marker("mingw")
        named = item.name.split("[")[0] in SLOW_TESTS
        if slow or named or fixtures & REAL_TOOL_FIXTURES or module in REAL_TOOL_MODULES:
            item.add_marker(pytest.mark.real_tools)
        mark_posix_only(item, fixtures)
    if getattr(config.option, "numprocesses", None):
        share_out(items)


# The Windows tier, one group per CPython version (each has a prefix of its own). Scheduling,
# by rank: the first two groups start on the two workers, the next two queue behind them in
# turn. The newest version's group (the longest) starts on one worker with the display
# prefix's behind it; the Inno Setup prefix's starts on the other, the older version's behind
# it. So the two Windows builds of the GPU profile (each ~9 GB of caches and ~5 GB of copies
# while its module runs) and the GPU setup (~4 GB) are not on disk at the same time.
WINDOWS_TIER = {"win_python", "win_wine"}
# The modules that share a prefix with state (a booted Inno Setup prefix, the display prefix):
# one group each, so that one worker boots it (20-30 s and ~700 MB each) and sets its state.
PREFIX_GROUPS = {"inno": 1, "display_wine": 2}
OLDER_WINDOWS, OTHER_REAL_TOOLS, FAST = 3, 4, 5


def share_out(items: list[pytest.Item]) -> None:
    """How pytest-xdist (`-n 2 --dist loadgroup`, pyproject.toml) shares the tests between its
    workers: a group runs on one worker, in order, so what a group shares is built once.

    - the Windows tier, one group per CPython version, and the modules of the Inno Setup
      prefix and of the display prefix, one group each: first, in the order WINDOWS_TIER's
      comment gives;
    - every other module with a real-tools test: the module as one group, so its module
      fixtures (a build, a prefix's state) are made once;
    - the fast tests: one by one, to whichever worker is free, last.

    Session fixtures are per worker; the costly one that several workers need, the GPU fetch,
    is shared through a file lock (`gpu_fetch`)."""
    heavy = {module_of(item) for item in items if item.get_closest_marker("real_tools")}
    prefixes: dict[str, set[str]] = {}  # by module, outside the Windows tier
    for item in items:
        if not fixtures_of(item) & WINDOWS_TIER:
            prefixes.setdefault(module_of(item), set()).update(
                fixtures_of(item) & PREFIX_GROUPS.keys()
            )
    versions = {windows_version(item) for item in items} - {""}
    newest = max(versions, key=lambda v: tuple(map(int, v.split("."))), default="")
    ranks: dict[str, int] = {}
    for item in items:
        module = module_of(item)
        if fixtures_of(item) & WINDOWS_TIER:
            version = windows_version(item)
            group, rank = f"windows-{version}", 0 if version == newest else OLDER_WINDOWS
        elif prefixes.get(module):
            group = min(prefixes[module], key=PREFIX_GROUPS.__getitem__)
            rank = PREFIX_GROUPS[group]
        elif module in heavy:
            group, rank = module, OTHER_REAL_TOOLS
        else:
            ranks[item.nodeid] = FAST
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        ranks[item.nodeid] = rank
    items.sort(key=lambda item: ranks[item.nodeid])  # stable: each group keeps its order


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def fixtures_of(item: pytest.Item) -> set[str]:
    return set(getattr(item, "fixturenames", ()))


def windows_version(item: pytest.Item) -> str:
    """The CPython for Windows a test runs under ("" outside the Windows tier)."""
    callspec = getattr(item, "callspec", None)
    return str(callspec.params.get("win_python", "")) if callspec else ""


def mark_posix_only(item: pytest.Item, fixtures: set[str]) -> None:
    """posix_only by fixture; every posix_only says why (its reason), and skips with it under
    Windows, so a plain `pytest` there reports instead of failing."""
    for fixture in sorted(fixtures & POSIX_ONLY_FIXTURES.keys()):
        item.add_marker(pytest.mark.posix_only(reason=POSIX_ONLY_FIXTURES[fixture]))
    marker = item.get_closest_marker("posix_only")
    if marker is None:
        return
    reason = marker.kwargs.get("reason")
    if not reason:
        raise pytest.UsageError(f"{item.nodeid}: posix_only needs reason=, saying why")
    if sys.platform == "win32":
        item.add_marker(pytest.mark.skip(reason=f"POSIX only: {reason}"))
