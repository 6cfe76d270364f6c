"""The suite's tiers and how its tests are shared out, for tests/conftest.py's collection hook:
the slow tier (real tools, real data), the fast tier's POSIX-only tests, and the pytest-xdist
groups."""

from __future__ import annotations

import sys

import pytest

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


def mark_tiers(config: pytest.Config, items: list[pytest.Item]) -> None:
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
    if shares_out(config):
        share_out(items)


def shares_out(config: object) -> bool:
    """Whether the run is shared out by pytest-xdist: the controller has -n, and the workers,
    which collect the items the controller schedules, have numprocesses unset but their
    `workerinput` (the groups must be marked there, or --dist loadgroup finds none)."""
    option = getattr(config, "option", None)
    return bool(getattr(option, "numprocesses", None)) or hasattr(config, "workerinput")


# The Windows tier, one group per CPython version, the newest version's unit tier (tests/
# test_windows_unit_tier.py, ~8 minutes, a third of a worker's time) a group of its own.
# Scheduling, by rank and then in collection order: the newest version's two groups start on
# the two workers (its unit tier and the rest of its tier take the same interpreter, each
# worker in its own prefix); the Inno Setup prefix's group, the display prefix's and the older
# version's then go to whichever worker is free first, the other real-tools modules after
# them and the fast tests last, so the two workers end within minutes of each other.
WINDOWS_TIER = {"win_python", "win_wine"}
UNIT_TIER = "test_windows_unit_tier"
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
            if version == newest and module.endswith(f"/{UNIT_TIER}.py"):
                group += "-unit"  # the longest test: on the other worker (see WINDOWS_TIER)
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
