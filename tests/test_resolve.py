"""Tier 1: the resolver on synthetic PE graphs with a small custom profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundler.binary.pe import read_pe
from bundler.closure.plan import EdgeKind, Plan, Status, plan_from_json
from bundler.closure.resolve import SearchPath, resolve
from bundler.errors import MachineMismatchError
from bundler.target.profiles import load_profile_file
from bundler.target.system import load_system_policy
from tests.support.pefactory import write_pe
from tests.support.runs import run_bundle

PROFILE = """
schema_version = 1
name = "test"
description = "test profile"
architecture = "x64"
min_windows = "10.0.10240"
vc_runtime = "app-local"
roots = ["core.dll"]
driver_dlls = ["gpudriver.dll"]

[[runtime_rules]]
trigger = "core.dll"
loads = ["plugin.dll"]
why = "core loads its plugin at run time"

[[runtime_rules]]
trigger = "plugin.dll"
loads = ["extra_*.dll"]
why = "plugin loads every extra_ library"
"""


@pytest.fixture
def profile_path(tmp_path: Path) -> Path:
    path = tmp_path / "test.toml"
    path.write_text(PROFILE)
    return path


def closure(app: Path, profile_path: Path, *search: Path) -> Plan:
    return resolve(
        [read_pe(app)], load_profile_file(profile_path), load_system_policy(), list(search)
    )


def statuses(plan: Plan) -> dict[str, str]:
    return {item.key: item.status.value for item in plan.files}


def test_classification_of_every_kind(tmp_path: Path, profile_path: Path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    write_pe(libs / "Core.DLL", imports=("KERNEL32.dll", "api-ms-win-crt-runtime-l1-1-0.dll"))
    write_pe(libs / "plugin.dll", imports=("gpudriver.dll", "absent.dll"))
    write_pe(libs / "extra_one.dll")
    write_pe(libs / "extra_two.dll")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll", "USER32.dll"))
    plan = closure(app, profile_path, libs)
    assert statuses(plan) == {
        "app.exe": "app",
        "core.dll": "bundled",
        "user32.dll": "system",
        "kernel32.dll": "system",
        "api-ms-win-crt-runtime-l1-1-0.dll": "api-set",
        "plugin.dll": "bundled",
        "gpudriver.dll": "driver",
        "absent.dll": "missing",
        "extra_one.dll": "bundled",
        "extra_two.dll": "bundled",
    }
    # Names compare case-insensitively, but the file's own spelling is kept for display.
    core = plan.file("CORE.dll")
    assert core is not None and core.name == "Core.DLL"


def test_edges_are_labelled(tmp_path: Path, profile_path: Path) -> None:
    libs = tmp_path / "libs"
    write_pe(libs / "core.dll", delay_imports=("lazy.dll",))
    write_pe(libs / "lazy.dll")
    write_pe(libs / "plugin.dll")
    app = write_pe(tmp_path / "app.exe", dll=False, imports=("core.dll",))
    plan = closure(app, profile_path, libs)
    kinds = {(e.parent, e.child): e.kind for e in plan.edges}
    assert kinds[("app.exe", "core.dll")] == EdgeKind.IMPORT
    assert kinds[("core.dll", "lazy.dll")] == EdgeKind.DELAY_IMPORT
    assert kinds[("core.dll", "plugin.dll")] == EdgeKind.RUNTIME
    assert kinds[(None, "core.dll")] == EdgeKind.PROFILE_ROOT


def test_wrong_machine_candidate_is_skipped_and_reported(
    tmp_path: Path, profile_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_pe(first / "core.dll", machine="x86")
    write_pe(second / "core.dll", machine="x64")
    write_pe(second / "plugin.dll")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll",))
    plan = closure(app, profile_path, first, second)
    core = plan.file("core.dll")
    assert core is not None and core.source == str(second / "core.dll")
    assert [(f.kind, f.path) for f in plan.findings if f.kind != "pattern-unmatched"] == [
        ("machine-mismatch", str(first / "core.dll"))
    ]


def test_only_wrong_machine_candidates_means_missing_with_a_note(
    tmp_path: Path, profile_path: Path
) -> None:
    libs = tmp_path / "libs"
    write_pe(libs / "core.dll", machine="arm64")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll",))
    core = closure(app, profile_path, libs).file("core.dll")
    assert core is not None and core.status == Status.MISSING
    assert core.note is not None and "arm64" in core.note


def test_cycles_terminate_and_each_dll_is_read_once(tmp_path: Path, profile_path: Path) -> None:
    libs = tmp_path / "libs"
    write_pe(libs / "core.dll", imports=("ring_a.dll",))
    write_pe(libs / "ring_a.dll", imports=("ring_b.dll",))
    write_pe(libs / "ring_b.dll", imports=("ring_a.dll", "core.dll"))
    write_pe(libs / "plugin.dll")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll",))
    reads: list[str] = []

    def counting_reader(path: Path):  # type: ignore[no-untyped-def]
        reads.append(path.name)
        return read_pe(path)

    plan = resolve(
        [read_pe(app)],
        load_profile_file(profile_path),
        load_system_policy(),
        [libs],
        counting_reader,
    )
    assert sorted(reads) == ["core.dll", "plugin.dll", "ring_a.dll", "ring_b.dll"]
    chains = plan.chains_to("ring_b.dll")
    assert all(len(chain) <= 4 for chain in chains)
    assert any(
        [e.child for e in chain] == ["core.dll", "ring_a.dll", "ring_b.dll"] for chain in chains
    )


def test_each_search_folder_is_listed_once(tmp_path: Path) -> None:
    folder = tmp_path / "libs"
    folder.mkdir()
    search = SearchPath([folder, tmp_path / "libs" / ".." / "libs", folder])
    assert search.folders == [folder]


def test_app_folder_is_searched_first(tmp_path: Path, profile_path: Path) -> None:
    libs = tmp_path / "libs"
    write_pe(libs / "core.dll")
    write_pe(libs / "plugin.dll")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll",))
    write_pe(tmp_path / "app" / "core.dll")
    core = closure(app, profile_path, libs).file("core.dll")
    assert core is not None and core.source == str(tmp_path / "app" / "core.dll")


def test_unmatched_pattern_is_missing(tmp_path: Path, profile_path: Path) -> None:
    libs = tmp_path / "libs"
    write_pe(libs / "core.dll")
    write_pe(libs / "plugin.dll")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False)
    plan = closure(app, profile_path, libs)
    assert [item.name for item in plan.missing] == ["extra_*.dll"]
    assert plan.findings[0].kind == "pattern-unmatched"


def test_app_of_another_machine_is_refused(tmp_path: Path, profile_path: Path) -> None:
    app = write_pe(tmp_path / "app32.exe", dll=False, machine="x86")
    with pytest.raises(
        MachineMismatchError, match=r"app32\.exe: built for x86, but profile 'test' targets x64"
    ):
        closure(app, profile_path)


def test_plan_json_round_trip(tmp_path: Path, profile_path: Path) -> None:
    libs = tmp_path / "libs"
    write_pe(libs / "core.dll", file_version=(1, 2, 3, 4))
    write_pe(libs / "plugin.dll", imports=("absent.dll",))
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll",))
    plan = closure(app, profile_path, libs)
    again = plan_from_json(plan.to_json(), "plan.json")
    assert again == plan
    assert json.loads(plan.to_json())["schema_version"] == 1
    core = again.file("core.dll")
    assert core is not None and core.file_version == "1.2.3.4"


def test_cli_missing_exit_code_and_why(tmp_path: Path, profile_path: Path) -> None:
    libs = tmp_path / "libs"
    write_pe(libs / "core.dll")
    write_pe(libs / "plugin.dll", imports=("absent.dll",))
    write_pe(libs / "extra_1.dll")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll",))
    args = ["deps", str(app), "--profile", str(profile_path), "--search", str(libs)]
    result = run_bundle(*args)
    assert result.returncode == 3
    assert "Missing: absent.dll" in result.stdout
    why = run_bundle(*args, "--why", "ABSENT.dll")
    assert why.returncode == 3
    assert "app.exe -import-> core.dll -runtime-> plugin.dll -import-> absent.dll" in why.stdout
    assert "[profile root] -> core.dll -runtime-> plugin.dll -import-> absent.dll" in why.stdout


def test_missing_dll_in_a_sub_folder_gets_a_hint(tmp_path: Path, profile_path: Path) -> None:
    root = tmp_path / "cuda"
    write_pe(root / "bin" / "core.dll")
    app = write_pe(tmp_path / "app" / "app.exe", dll=False, imports=("core.dll",))
    core = closure(app, profile_path, root).file("core.dll")
    assert core is not None and core.status == Status.MISSING
    assert core.note == f"a copy is in {root / 'bin'}: add --search {root / 'bin'}"
