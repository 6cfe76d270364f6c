"""Windows-side builds for the Windows tier: `bundle fetch` and `bundle build` run by CPython
for Windows (tests/support/winpython.py) from the real pinned wheels, never from the network.

`win_builds` is a session fixture with one instance per Windows Python version, as
`win_python` has. Its `cache(profile)` is a download cache filled by that Python's own
`bundle fetch --mirror <wheels>` on first use (a user's first build: every pinned wheel
copied, verified and extracted under Windows, 1 to 2 minutes for a GPU profile under Wine)
and shared by every later test of that version; `build(...)` runs `bundle build` from it.
The caches are removed when the version's tests are done (each GPU one is ~4 GB).

The GPU 1.19.2 profile's cache (`SEEDED`) starts as the Linux session's (`gpu_cache`), its
verified archives and extracted trees hard-linked: its fetch under Windows then finds every
archive cached (a cache hit, checked by size, under Windows) instead of writing 4.1 GB again
per version. A fetch that copies, verifies and extracts real wheels under Windows is still
made for every other profile: CPU and DirectML on each version, and the 1.6 GB of CUDA 13
wheels of 1.31.1 on the newest.

Builds take `app`, a copy of examples/hello/hello.exe (its times kept), never the checkout's
file: --link hard-links the app too, and Wine makes a file renamed to *.exe executable, so a
linked build would change the mode of the checkout's hello.exe (git sees it modified).

The mirror is the folder of real wheels tools/testing/fetch_test_wheels.py fills (`mirror()`);
bundle takes each pinned wheel from it by file name, and pip is kept off every index
(PIP_NO_INDEX), so a wheel missing there fails instead of being downloaded.

Arguments are passed as given: a path must be spelled for Windows (`winpath`), as a user's
own paths are.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cache_links import linked_cache
from tests.support.paths import GPU, HELLO, test_cache_dir
from tests.support.skips import require
from tests.support.winpython import WinPython, winpath

# pip is never asked for the network; the host's pip settings (PIP_FIND_LINKS to a Unix
# folder) mean nothing to the Windows pip.
OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}
# Profiles whose Windows cache starts from the Linux session's (the module docstring).
SEEDED = (GPU,)
FETCH_TIMEOUT = 900.0  # seconds: a cold GPU fetch under Wine takes 1 to 2 minutes
BUILD_TIMEOUT = 600.0


def mirror() -> Path:
    """The folder holding every pinned wheel by name (`--mirror DIR`)."""
    folder = test_cache_dir() / "wheels"
    require(
        folder.is_dir() and any(folder.glob("*.whl")),
        f"no wheels in {folder}: run python -m tools.testing.fetch_test_wheels",
    )
    return folder


class WinBuilds:
    """One Windows Python's fetched caches (one per profile) and the builds made from them."""

    def __init__(self, python: WinPython, root: Path, seeds: dict[str, Path]) -> None:
        self.python = python
        self.root = root
        self.seeds = seeds  # profile: a verified cache whose archives this one starts with
        self.fetched: dict[str, subprocess.CompletedProcess[str]] = {}
        self.app = root / "app" / HELLO.name
        self.app.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(HELLO, self.app)

    def release(self, profiles: Iterable[str] | None = None) -> None:
        """Remove the fetched caches, or those of `profiles` (the next `cache(profile)`
        fetches again)."""
        for profile in list(self.fetched if profiles is None else profiles):
            if profile in self.fetched:
                shutil.rmtree(self.root / profile, ignore_errors=True)
                del self.fetched[profile]

    def bundle(
        self, *args: str, cwd: Path | None = None, timeout: float = BUILD_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        """`bundle ARGS` under this Windows Python, pip kept offline."""
        return self.python.run(*args, cwd=cwd, env=OFFLINE_PIP, timeout=timeout)

    def cache(self, profile: str) -> Path:
        """The cache holding `profile`'s artifacts, fetched by this Python on first use; the
        fetch's output stays in `fetched[profile]`."""
        folder = self.root / profile
        if profile not in self.fetched:
            if profile in self.seeds and not folder.exists():
                linked_cache(self.seeds[profile], folder)
            done = self.bundle(
                "fetch", "--profile", profile, "--cache-dir", winpath(folder),
                "--mirror", winpath(mirror()), "--json", timeout=FETCH_TIMEOUT,
            )  # fmt: skip
            assert done.returncode == 0, f"fetch {profile} under {self.python}: {done.stderr}"
            self.fetched[profile] = done
        return folder

    def build(
        self, out: Path, profile: str, *extra: str, exe: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`bundle build EXE --profile P --out OUT` from `profile`'s cache, with the mirror;
        EXE is `app` unless given."""
        return self.bundle(
            "build", winpath(exe or self.app), "--profile", profile, "--out", winpath(out),
            "--cache-dir", winpath(self.cache(profile)), "--mirror", winpath(mirror()), *extra,
        )  # fmt: skip

    def build_json(self, out: Path, profile: str, *extra: str) -> dict[str, Any]:
        """`build(...)` with --json; a failed build fails the test with bundle's message."""
        done = self.build(out, profile, *extra, "--json")
        assert done.returncode == 0, f"build {profile} {extra} under {self.python}: {done.stderr}"
        data = json.loads(done.stdout)
        assert isinstance(data, dict)
        return data


BUILDS = pytest.StashKey[dict[str, WinBuilds]]()


@pytest.fixture(scope="session")
def win_builds(
    win_python: WinPython,
    gpu_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[WinBuilds]:
    """Fetched caches for `win_python`'s version; removed when its tests are done."""
    mirror()
    root = tmp_path_factory.mktemp(f"win{win_python.minor}-caches")
    builds = WinBuilds(win_python, root, {profile: gpu_cache for profile in SEEDED})
    request.config.stash.setdefault(BUILDS, {})[win_python.minor] = builds
    try:
        yield builds
    finally:
        request.config.stash[BUILDS].pop(win_python.minor, None)
        shutil.rmtree(root, ignore_errors=True)


# Profiles only tests that name them (their `profile` parameter) use, and large enough (a GPU
# cache of ~3 GB, a GPU folder of ~1.5 GB) to remove once the last of those tests is done:
# with it, the disk's low point of a run (inside the newest version's workflows) is ~4 GB
# higher. Every other profile's cache stays to the version's end (tests use them unnamed).
RELEASED_AFTER_LAST_USE = ("ort-1.31.1-gpu-cuda13",)


def version_of(item: pytest.Item | None) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("win_python") if callspec else None


def profiles_after(item: pytest.Item) -> set[str]:
    """The profiles that tests after `item` of its Windows version name. With pytest-xdist
    a version's tests are one group, run on one worker in this order (tests/support/tiers.py)."""
    items = item.session.items
    version = version_of(item)
    later = items[items.index(item) + 1 :] if item in items else []
    return {
        str(other.callspec.params.get("profile"))
        for other in later
        if version_of(other) == version and hasattr(other, "callspec")
    }


def done_with(item: pytest.Item) -> list[str]:
    """The large profiles no later test of `item`'s version names (RELEASED_AFTER_LAST_USE)."""
    later = profiles_after(item)
    return [profile for profile in RELEASED_AFTER_LAST_USE if profile not in later]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """A version's caches go as soon as the next test is not of that version: with
    pytest-xdist each worker holds one version's session fixture to the end of the run, and
    the caches are ~8 GB (serially, the next version's instance replaces it). A later test of
    the version fetches again (`cache`)."""
    version = version_of(item)
    builds = item.config.stash.get(BUILDS, {}).get(version) if version else None
    if builds is None:
        return
    if version != version_of(nextitem):
        builds.release()
    else:
        builds.release(done_with(item))
