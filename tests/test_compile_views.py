"""How each setup compiles, as `bundle render iss --json` and `bundle build --json` say it
(bundler/cli/compile_views.py, issue 41 part 4): every setup in order with its kind and ISCC's
arguments, and the command lines built from them, read back here by each shell's own splitting
rules (POSIX: shlex; PowerShell: tests/support/powershell.py). That ISCC compiles with these
arguments is tests/test_action.py's `test_the_compile_step_compiles_every_setup_...` (Wine)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bundler.closure.lock import LOCK_NAME, LockedEp, runtime_pack
from bundler.closure.lockfile import write_lock
from tests.support import powershell
from tests.support.locks import sample_lock
from tests.support.runs import run_bundle

SECRET = "hunter2-in-the-environment"
SIGNTOOL = 'tool = "signtool"\ncertificate = "c.pfx"\npassword_env = "TEST_PFX_PASSWORD"\n'
URL = "https://downloads.example.com/packs"


@pytest.fixture(autouse=True)
def password(monkeypatch: pytest.MonkeyPatch) -> None:
    """The password's variable set, as it is when a release is signed."""
    monkeypatch.setenv("TEST_PFX_PASSWORD", SECRET)


def render(folder: Path, *args: str, sign: bool = False, lock: Any = None) -> dict[str, Any]:
    """`bundle render iss FOLDER --json` of `lock` (a pack lock by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    if lock is None:
        lock = sample_lock()
        lock = replace(lock, runtime_pack=runtime_pack(lock.files))
    write_lock(folder / LOCK_NAME, lock)
    config = folder / "bundle.toml"
    config.write_text(f"[sign]\n{SIGNTOOL}" if sign else "")
    cache = ("--cache-dir", str(folder / "cache"))
    command = ("render", "iss", str(folder), "--config", str(config), *cache, *args, "--json")
    result = run_bundle(*command)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_plain_setup_is_one_app_setup_without_arguments(tmp_path: Path) -> None:
    data = render(tmp_path, lock=sample_lock())
    (setup,) = data["setups"]
    assert setup == {
        "kind": "app",
        "script": str(tmp_path / "setup.iss"),
        "signed": False,
        "runtime_pack": None,
        "components": [],
        "iscc_args": [],
        "compile": data["compile"],
        "compile_powershell": data["compile_powershell"],
    }
    assert data["iscc_args"] == []


def test_a_signed_runtime_pack_gives_the_full_then_the_web_setup(tmp_path: Path) -> None:
    """The full setup needs the pack's Sign Tool, then the signing one (its signature covers
    the appended pack); the web setup only the signing one. The sign command is signtool.txt's,
    naming the password's variable, never its value."""
    data = render(tmp_path, "--runtime-pack", "--pack-url", URL, sign=True)
    command = (tmp_path / "signtool.txt").read_text(encoding="utf-8")
    assert "%TEST_PFX_PASSWORD%" in command
    full, web = data["setups"]
    assert (full["kind"], full["runtime_pack"], full["signed"]) == ("full", "appended", True)
    assert (web["kind"], web["runtime_pack"], web["signed"]) == ("web", "downloaded", True)
    assert full["iscc_args"] == ["/Sbundlepack=$p", f"/Sbundlesign={command}"]
    assert web["iscc_args"] == [f"/Sbundlesign={command}"]
    assert web["script"] == str(tmp_path / "setup-web.iss")
    assert data["iscc_args"] == full["iscc_args"] and data["compile"] == full["compile"]


@pytest.mark.parametrize("sign", [False, True])
def test_each_line_hands_iscc_exactly_the_arguments(tmp_path: Path, sign: bool) -> None:
    """PowerShell's line split by PowerShell's rules, the POSIX line by a POSIX shell's (shlex,
    and bash itself): ISCC gets `iscc_args` and the script, $p and %NAME% as written."""
    data = render(tmp_path / "it's here", "--runtime-pack", "--pack-url", URL, sign=sign)
    for setup in data["setups"]:
        words = ["iscc", *setup["iscc_args"], setup["script"]]
        assert powershell.words(setup["compile_powershell"]) == words
        if os.name != "nt":
            assert shlex.split(setup["compile"]) == words


@pytest.mark.posix_only(reason="runs the POSIX line in bash")
def test_bash_runs_the_posix_line_with_the_arguments_as_written(tmp_path: Path) -> None:
    data = render(tmp_path / "dist", "--runtime-pack", sign=True)
    (setup,) = data["setups"]
    program = tmp_path / "bin" / "iscc"  # prints what it was given, one argument a line
    program.parent.mkdir()
    program.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    program.chmod(0o755)
    path = f"{program.parent}{os.pathsep}{os.environ['PATH']}"
    env = {"PATH": path, "TEST_PFX_PASSWORD": SECRET, "p": "expanded", "q": "expanded"}
    done = subprocess.run(["bash", "-c", setup["compile"]], capture_output=True, text=True, env=env)
    assert done.stdout.splitlines() == [*setup["iscc_args"], setup["script"]]
    assert SECRET not in done.stdout


def test_the_cmd_line_reads_the_sign_command_from_its_file(tmp_path: Path) -> None:
    """cmd would expand %NAME% on the typed line (the password then on ISCC's command line):
    its line reads signtool.txt into a FOR variable, which cmd does not expand again."""
    from bundler.cli.compile_views import _cmd_line, compiles
    from bundler.render.iss import IssResult

    script, sign = tmp_path / "setup.iss", tmp_path / "signtool.txt"
    result = IssResult(script, "1.0", False, 3, sign, pack_script=tmp_path / "bundle-pack.iss")
    (full,) = compiles(replace(result, sign_line="cmd /c x /p $q%PW%$q $f"))
    line = _cmd_line(full)
    assert line == (
        f'for /f "usebackq delims=" %S in ("{sign}") do '
        f'iscc "/Sbundlepack=$p" "/Sbundlesign=%S" "{script}"'
    )
    (plain,) = compiles(IssResult(script, "1.0", False, 3))
    assert _cmd_line(plain) == f'iscc "{script}"'
    (call,) = compiles(replace(result, sign_line="cmd /c call $p $f"))  # no %: as it is
    assert _cmd_line(call) == (
        f'iscc "/Sbundlepack=$p" "/Sbundlesign=cmd /c call $p $f" "{script}"'
    )


def test_ep_packs_are_components_of_the_app_setup(tmp_path: Path) -> None:
    webgpu = LockedEp(
        "webgpu", "onnxruntime-ep-webgpu", "0.4.0", "WebGpuExecutionProvider",
        "WebGpuExecutionProvider", "ep/webgpu/onnxruntime_providers_webgpu.dll", "1.24.4", 10,
    )  # fmt: skip
    lock = sample_lock(eps=(webgpu,), doctor=True)
    (setup,) = render(tmp_path, lock=lock)["setups"]
    assert (setup["kind"], setup["components"], setup["iscc_args"]) == ("app", ["ep_webgpu"], [])
    script = Path(setup["script"]).read_text(encoding="utf-8-sig")
    assert 'Name: "ep_webgpu"' in script  # the component the script declares
