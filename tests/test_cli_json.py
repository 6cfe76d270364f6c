"""--json everywhere (issue 29): every command takes --json, and a command that fails under
--json (a BundleError, or a usage error: exit 2) prints exactly one JSON object on stdout,
`{"error": ..., "exit_code": ..., "hint": ...}`, besides its line on stderr, with the exit code
unchanged. `bundle --json COMMAND ...` is the same as `bundle COMMAND ... --json`.

The table has one row a command and a test that the CLI has no command without a row, so a new
command cannot ship without its JSON failure. Every row fails before any network or download.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bundler.acquire.cache import Cache
from bundler.cli import profile_views
from bundler.cli.failures import hint_of, json_requested, move_global_json
from bundler.closure.lock import LOCK_NAME, runtime_pack
from bundler.closure.lockfile import write_lock
from bundler.errors import ExitCode
from tests.support import powershell
from tests.support.locks import sample_lock
from tests.support.runs import run_bundle

# command -> (a bad command line after `bundle COMMAND --json`, the exit code it must give)
BAD: dict[str, tuple[list[str], ExitCode]] = {
    "deps": (["nothere.exe"], ExitCode.INPUT),
    "audit": (["nothere"], ExitCode.INPUT),
    "fetch": (["--profile", "no-such-profile"], ExitCode.PROFILE),
    "build": (["nothere.exe"], ExitCode.INPUT),
    "msbuild": (["--profile", "no-such-profile"], ExitCode.PROFILE),
    "measure": (["model.onnx", "--out", "evidence.json"], ExitCode.CONFIG),  # no --ort
    "scan": (["nothere.dll"], ExitCode.INPUT),
    "publish": (["nothere"], ExitCode.INPUT),  # no bundle.lock.json there
    "verify": (["nothere.exe"], ExitCode.INPUT),  # no SHA256SUMS beside it
    "profiles": (["--no-such-option"], ExitCode.USAGE),
    "profiles show": (["no-such-profile"], ExitCode.PROFILE),
    "profiles check": (["no-such-profile"], ExitCode.PROFILE),
    # plain http is refused before any request (no --allow-http)
    "profiles outdated": (["--index-url", "http://127.0.0.1:9/simple/"], ExitCode.FETCH),
    "profiles new": (["--ort", "1.19.2", "--flavour", "no-such-flavour"], ExitCode.PROFILE),
    "cache list": (["--cache-dir"], ExitCode.USAGE),  # an option without its value
    "cache clean": (["--all", "one-argument-too-many"], ExitCode.USAGE),
    "render iss": (["--lock", "nothere.json"], ExitCode.CONFIG),
    "render postbuild": (["--lock", "nothere.json"], ExitCode.CONFIG),
}


def commands() -> list[str]:
    """Every command of the CLI that runs something: the leaves of the tree, and a group that
    runs without a sub-command (`bundle profiles` lists the profiles)."""
    from bundler.cli.commands import command

    found: list[str] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        subs = getattr(node, "commands", None)
        if path and (not subs or getattr(node, "invoke_without_command", False)):
            found.append(" ".join(path))
        for name, sub in (subs or {}).items():
            walk(sub, (*path, name))

    walk(command(), ())
    return found


def failure(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object on stdout, checked against the schema and the exit code."""
    data = json.loads(result.stdout)  # exactly one document: anything else fails to parse
    assert isinstance(data, dict) and set(data) == {"error", "exit_code", "hint"}, data
    assert data["exit_code"] == result.returncode != 0
    assert isinstance(data["error"], str) and data["error"]
    assert data["hint"] is None or (isinstance(data["hint"], str) and data["hint"])
    assert result.stderr.strip(), "the text message still goes to stderr"
    return data


def test_every_command_has_a_row() -> None:
    assert sorted(commands()) == sorted(BAD)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_command_line_with_json_prints_the_error_as_json(name: str, tmp_path: Path) -> None:
    args, code = BAD[name]
    result = run_bundle(*name.split(), "--json", *args, cwd=tmp_path)
    assert result.returncode == code, result.stdout + result.stderr
    data = failure(result)
    if code == ExitCode.USAGE:
        assert data["hint"] == f"see 'bundle {name} --help'", data
    else:
        assert data["error"] in result.stderr  # the same message as the text line


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_unknown_option_with_a_global_json_is_json_too(name: str, tmp_path: Path) -> None:
    result = run_bundle("--json", *name.split(), "--no-such-option", cwd=tmp_path)
    assert result.returncode == ExitCode.USAGE, result.stdout + result.stderr
    # click adds "(Possible options: ...)" where one is alike
    assert failure(result)["error"].startswith("No such option: --no-such-option")


def test_without_json_an_error_is_text_on_stderr_only(tmp_path: Path) -> None:
    result = run_bundle("deps", "nothere.exe", cwd=tmp_path)
    assert result.returncode == ExitCode.INPUT
    assert result.stdout == ""
    assert result.stderr == "error: nothere.exe: does not exist; check the path.\n"


def test_the_hint_is_what_the_message_says_to_do(tmp_path: Path) -> None:
    data = failure(run_bundle("deps", "nothere.exe", "--json", cwd=tmp_path))
    assert data == {
        "error": "nothere.exe: does not exist; check the path.",
        "exit_code": ExitCode.INPUT,
        "hint": "check the path.",
    }


def test_a_json_after_double_dash_is_an_argument(tmp_path: Path) -> None:
    result = run_bundle("deps", "--", "--json", cwd=tmp_path)
    assert result.returncode == ExitCode.INPUT
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("message", "hint"),
    [
        ("a.dll: not a file; give the DLLs to scan.", "give the DLLs to scan."),
        ("x: one; two; three", "three"),
        ("no EXE given and no bundle.toml in this folder.", None),
        ("unknown profile 'p'. (bundle profiles lists all; or give a file.)", None),
        ("x: bad (see a; b); fix it", "fix it"),
        ("trailing; ", None),
    ],
)
def test_hint_of(message: str, hint: str | None) -> None:
    assert hint_of(message) == hint


@pytest.mark.parametrize(
    ("args", "moved", "requested"),
    [
        (["--json", "deps", "a.exe"], ["deps", "a.exe", "--json"], True),
        (["--debug", "--json", "cache", "list"], ["--debug", "cache", "list", "--json"], True),
        (["--json", "deps", "--", "x"], ["deps", "--json", "--", "x"], True),
        (["deps", "--json"], ["deps", "--json"], True),
        (["--json"], ["--json"], True),
        (["deps", "--", "--json"], ["deps", "--", "--json"], False),
        (["deps", "a.exe"], ["deps", "a.exe"], False),
    ],
)
def test_a_global_json_moves_behind_the_command(
    args: list[str], moved: list[str], requested: bool
) -> None:
    assert move_global_json(args) == moved
    assert json_requested(moved) is requested


# --- the commands that had no --json -------------------------------------------------------------


def document(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1, data
    return data  # type: ignore[no-any-return]


def test_cache_list_and_clean_as_json(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", lock_timeout=None)
    cache.prepare()
    blob = cache.tmp / "blob"
    blob.write_bytes(b"an archive")
    digest = hashlib.sha256(b"an archive").hexdigest()
    cache.add(blob, digest, "a.zip", "https://example.invalid/a.zip")
    listed = document(run_bundle("cache", "list", "--cache-dir", str(cache.root), "--json"))
    assert listed["cache"] == str(cache.root)
    (entry,) = listed["archives"]
    assert (entry["sha256"], entry["size"], entry["names"]) == (digest, 10, ["a.zip"])
    assert entry["origins"] == ["https://example.invalid/a.zip"] and listed["size"] == 10
    assert listed["runtime_packs"] == listed["packs"] == []  # none compiled yet
    (cache.tmp / "partial").write_bytes(b"12345")
    pack = cache.root / "runtime-packs" / "0123456789abcdef-01234567" / "bundle-pack.exe"
    pack.parent.mkdir(parents=True)
    pack.write_bytes(b"a compiled runtime pack")  # 23 bytes, kept without --all
    at = ["--cache-dir", str(cache.root)]
    listing = document(run_bundle("cache", "list", *at, "--json"))
    (compiled,) = listing["runtime_packs"]
    assert listing["packs"] == listing["runtime_packs"]  # the name before, kept
    assert compiled == {"name": pack.parent.name, "path": str(pack.parent), "size": 23}
    listing = run_bundle("cache", "list", *at).stdout
    assert f"{pack.parent.name}        23 B" in listing, listing
    assert "1 compiled runtime pack(s), 23 B" in listing, listing
    archives = sum(f.stat().st_size for f in cache.blobs.iterdir())  # the blob and its record
    would = document(run_bundle("cache", "clean", *at, "--all", "--dry-run", "--json"))
    (step,) = would["would"]
    assert "runtime packs" in step and step.endswith(f"({archives + 5 + 23} B)"), step
    assert (cache.tmp / "partial").is_file() and pack.is_file()
    cleaned = document(run_bundle("cache", "clean", *at, "--json"))
    assert cleaned == {"schema_version": 1, "cache": str(cache.root), "freed_bytes": 5}
    assert pack.is_file() and cache.blob(digest).is_file()
    everything = document(run_bundle("cache", "clean", *at, "--all", "--json"))
    assert everything["freed_bytes"] == archives + 23
    assert not pack.exists() and not cache.blob(digest).exists()


@pytest.fixture()
def lock_file(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    write_lock(bundle / LOCK_NAME, sample_lock())
    return bundle / LOCK_NAME


def test_render_iss_as_json(lock_file: Path) -> None:
    data = document(run_bundle("render", "iss", "--lock", str(lock_file), "--json"))
    script = lock_file.parent / "setup.iss"
    assert data["path"] == str(script) and script.is_file()
    # the lock's payload, the app and the lock file itself
    assert data["files"] == 5 and data["app_version"] == "1.0.0.0"
    assert data["compile"] == f'iscc "{script}"' and data["iscc_args"] == []


def test_render_iss_with_the_runtime_pack_says_how_the_full_setup_compiles(
    tmp_path: Path,
) -> None:
    """The full setup compiles only with the Sign Tool that appends the pack: the command in
    --json and in the report name it, quoted for this system's shell."""
    lock = sample_lock()
    write_lock(tmp_path / LOCK_NAME, replace(lock, runtime_pack=runtime_pack(lock.files)))
    args = ("render", "iss", "--lock", str(tmp_path / LOCK_NAME), "--runtime-pack")
    data = document(run_bundle(*args, "--json"))
    assert data["iscc_args"] == ["/Sbundlepack=$p"]
    quote = '"' if os.name == "nt" else "'"
    command = f'iscc {quote}/Sbundlepack=$p{quote} "{tmp_path / "setup.iss"}"'
    assert data["compile"] == command
    assert f"compile it with: {command}" in run_bundle(*args).stdout


def test_the_powershell_line_hands_iscc_the_sign_tool_intact(tmp_path: Path) -> None:
    """PowerShell expands $p inside double quotes, which is cmd's line: ISCC then got
    `/Sbundlepack=` and failed ("Error 2: File not found"). The PowerShell line, as
    PowerShell's quoting rules split it, hands ISCC `$p` as written; cmd's would not."""
    lock = sample_lock()
    folder = tmp_path / "it's a dist"  # a quote in the path, which single quotes must double
    folder.mkdir()
    write_lock(folder / LOCK_NAME, replace(lock, runtime_pack=runtime_pack(lock.files)))
    data = document(run_bundle("render", "iss", str(folder), "--runtime-pack", "--json"))
    script = str(folder / "setup.iss")
    assert powershell.words(data["compile_powershell"]) == ["iscc", "/Sbundlepack=$p", script]
    cmd_line = f'iscc "/Sbundlepack=$p" "{script}"'
    assert powershell.words(cmd_line)[1] == "/Sbundlepack="  # what cmd's line gives there


def test_render_takes_the_bundle_folder_as_audit_does(lock_file: Path, tmp_path: Path) -> None:
    """`bundle render iss DIST`, `--lock DIST` and `--lock DIST/bundle.lock.json` are one
    bundle; two different ones are refused."""
    folder, script = lock_file.parent, lock_file.parent / "setup.iss"
    for args in (
        [str(folder)],
        ["--lock", str(folder)],
        [str(lock_file), "--lock", str(lock_file)],
    ):
        data = document(run_bundle("render", "iss", *args, "--json"))
        assert data["path"] == str(script), args
    made = document(run_bundle("render", "postbuild", str(folder), "--json"))
    assert Path(made["script"]).parent == folder
    other = tmp_path / "other"
    other.mkdir()
    refused = run_bundle("render", "iss", str(folder), "--lock", str(other))
    assert refused.returncode == ExitCode.CONFIG
    assert "two bundles given" in refused.stderr


def test_render_postbuild_as_json(lock_file: Path) -> None:
    data = document(run_bundle("render", "postbuild", "--lock", str(lock_file), "--json"))
    assert Path(data["script"]).is_file() and Path(data["event"]).is_file()
    assert data["dlls"] == 2 and data["project_relative"] is False
    assert data["placeholder"]  # the event still needs the project's path


def test_profiles_new_as_json_carries_the_profile_and_where_it_went(tmp_path: Path) -> None:
    from bundler.rules.derive import Derived
    from bundler.rules.derive.facts import Facts
    from bundler.target.profiles import load_profile

    profile = load_profile("ort-1.19.2-cpu")
    text = profile.path.read_text(encoding="utf-8")
    facts = Facts((), (), (), (), (), {}, None)
    derived = Derived(profile.name, text, facts, profile)
    data = json.loads(profile_views.profile_new_json(derived, tmp_path / "p.toml"))
    assert data["schema_version"] == 1 and data["name"] == "ort-1.19.2-cpu"
    assert data["path"] == str(tmp_path / "p.toml") and data["profile_toml"] == text
    assert "onnxruntime.dll" in data["roots"]
    assert json.loads(profile_views.profile_new_json(derived, None))["path"] is None


def test_build_json_and_render_json_say_alike_how_the_setup_compiles(tmp_path: Path) -> None:
    """Issue 41: a pipeline reading `bundle build --json` (as the Action does) learns ISCC's
    arguments there too; both views come from one function, checked here on a pack setup."""
    from bundler.cli.build_views import compile_part
    from bundler.render.iss import IssResult

    script = tmp_path / "setup.iss"
    result = IssResult(script, "1.0", False, 3, pack_script=tmp_path / "bundle-pack.iss")
    part = compile_part(result)
    assert part["iscc_args"] == ["/Sbundlepack=$p"]
    assert str(part["compile"]).endswith(f'"{script}"') and "/Sbundlepack=$p" in str(
        part["compile"]
    )
    assert powershell.words(str(part["compile_powershell"])) == [
        "iscc",
        "/Sbundlepack=$p",
        str(script),
    ]
