"""Settings with one home (issue 30): every command that takes --cache-dir says, with
--dry-run, which cache folder it would use and where that came from: --cache-dir ("flag"),
$BUNDLE_CACHE_DIR, or the platform's per-user folder ("default"), in `bundle build`'s JSON shape
({"value", "from"}) and in its text; and a dry run writes nothing, neither in the cache folder nor
in the output.

The platform's folder is made the test's own: HOME, XDG_CACHE_HOME and LOCALAPPDATA (and
platformdirs' WIN_PD_OVERRIDE_LOCAL_APPDATA) point into tmp_path, so that no run touches the
user's cache. Each command runs through the real CLI, in a process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bundler.closure.lock import LOCK_NAME
from bundler.closure.lockfile import write_lock
from tests.support.locks import sample_lock
from tests.support.paths import CPU, HELLO
from tests.support.tiny import Tiny
from tests.support.tiny import tiny as tiny  # the module fixture, reused: a release of our own

ORIGINS = ("flag", "$BUNDLE_CACHE_DIR", "default")
# command -> its arguments before --dry-run ({out}: a folder it would write into). Each works
# offline: the dry runs download nothing; build's reads the cache, which holds the tiny release.
COMMANDS: dict[str, list[str]] = {
    "deps": [str(HELLO), "--profile", CPU, "--fetch"],
    "fetch": ["--profile", CPU, "--to", "{out}"],
    "build": [str(HELLO), "--profile", "{tiny}", "--out", "{out}", "--offline"],
    "msbuild": ["--profile", CPU, "--out", "{out}", "--link"],
    "profiles check": [CPU, "--offline"],
    "profiles new": ["--ort", "1.19.2", "--flavour", "cpu", "--out", "{out}/new.toml"],
    "cache list": [],
    "cache clean": ["--all"],
}
# The commands that use the cache without a dry run (render: the templates' kept renderings and
# the runtime packs; audit --html: the templates): their --json says it, with {bundle} a built
# bundle's folder.
RENDERS: dict[str, list[str]] = {
    "render iss": ["{bundle}"],
    "render postbuild": ["{bundle}"],
    "audit": ["{bundle}", "--html", "{out}/audit.html"],
}
# bundle publish reads the cache's compiled runtime packs (a web setup's pack): its --json says
# where the cache came from, for a stand-in bundle (tests/support/releases.py).
PUBLISHES = ("publish",)


def test_every_command_that_takes_cache_dir_is_here() -> None:
    from bundler.cli.commands import command

    found: list[str] = []

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if any("--cache-dir" in getattr(param, "opts", ()) for param in node.params):
            found.append(" ".join(path))
        for name, sub in (getattr(node, "commands", None) or {}).items():
            walk(sub, (*path, name))

    walk(command(), ())
    assert sorted(found) == sorted([*COMMANDS, *RENDERS, *PUBLISHES])


@pytest.mark.parametrize("origin", ORIGINS)
def test_publish_says_where_its_cache_folder_came_from(origin: str, tmp_path: Path) -> None:
    from tests.support.releases import built_bundle

    env, cache = environment(origin, tmp_path)
    dist = built_bundle(tmp_path / "app")
    flag = ["--cache-dir", str(cache)] if origin == "flag" else []
    result = bundle("publish", str(dist), *flag, "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["settings"]["cache_dir"] == {"value": str(cache), "from": origin}


@pytest.mark.parametrize("origin", ORIGINS)
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_dry_run_says_where_its_cache_folder_came_from_and_writes_nothing(
    name: str,
    origin: str,
    tiny: Tiny,
    tmp_path: Path,
) -> None:
    env, cache = environment(origin, tmp_path)
    args = arguments(name, origin, cache, tiny, tmp_path)
    if name == "build":
        prefill(cache, tiny, env, tmp_path)
    before = snapshot(tmp_path)
    result = bundle(*name.split(), *args, "--dry-run", "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["dry_run"] is True
    assert data["settings"]["cache_dir"] == {"value": str(cache), "from": origin}
    assert snapshot(tmp_path) == before  # not a file, not a folder: in the cache or the output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("origin", ORIGINS)
@pytest.mark.parametrize("name", list(RENDERS))
def test_a_command_without_a_dry_run_says_where_its_cache_folder_came_from(
    name: str, origin: str, tmp_path: Path
) -> None:
    env, cache = environment(origin, tmp_path)
    folder = tmp_path / "bundle"
    folder.mkdir()
    write_lock(folder / LOCK_NAME, sample_lock())
    args = [arg.format(bundle=folder, out=tmp_path) for arg in RENDERS[name]]
    args += ["--cache-dir", str(cache)] if origin == "flag" else []
    result = bundle(*name.split(), *args, "--json", env=env)
    # the audit judges a lock whose DLLs are not there (exit 17); its JSON is the same
    assert result.returncode in ((0, 17) if name == "audit" else (0,)), result.stderr
    data = json.loads(result.stdout)
    assert data["settings"]["cache_dir"] == {"value": str(cache), "from": origin}


@pytest.mark.parametrize("name", [name for name in COMMANDS if name != "build"])
def test_the_text_of_a_dry_run_says_it_too(name: str, tiny: Tiny, tmp_path: Path) -> None:
    env, cache = environment("$BUNDLE_CACHE_DIR", tmp_path)
    result = bundle(
        *name.split(), *arguments(name, "", cache, tiny, tmp_path), "--dry-run", env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"bundle {name} --dry-run: nothing done; it would\n")
    setting = next(line for line in result.stdout.splitlines() if "cache_dir" in line)
    assert setting.split() == ["cache_dir", str(cache), "(from", "$BUNDLE_CACHE_DIR)"]
    assert str(cache) in result.stdout.split("with these settings:")[0]  # what it would use
    assert not any(tmp_path.rglob("*"))  # nothing written, not even the cache folder


def test_a_dry_run_says_each_setting_s_origin(tmp_path: Path) -> None:
    """Beside the cache folder: a flag given on the command line, a typer default, an
    environment variable of pip's (--index-url, else $PIP_INDEX_URL, else PyPI)."""
    env, _ = environment("default", tmp_path)
    env["PIP_INDEX_URL"] = "https://index.invalid/simple/"
    result = bundle("profiles", "new", "--ort", "latest", "--dry-run", "--json", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    settings = data["settings"]
    assert settings["ort"] == {"value": "latest", "from": "flag"}
    assert settings["flavour"] == {"value": "gpu", "from": "default"}
    assert settings["index_url"] == {"value": env["PIP_INDEX_URL"], "from": "$PIP_INDEX_URL"}
    assert (
        data["would"][0]
        == f"find the newest onnxruntime-gpu release's wheel on {env['PIP_INDEX_URL']}"
    )


@pytest.mark.parametrize("name", ["fetch", "profiles new"])
def test_a_dry_run_says_where_each_variable_only_setting_came_from(
    name: str, tiny: Tiny, tmp_path: Path
) -> None:
    """Issue 39: the settings no flag sets ($BUNDLE_HTTP_TIMEOUT, ...) enter the resolver's
    environment layer too, so a dry run names the variable that set each, or the default."""
    env, cache = environment("flag", tmp_path)
    env |= {"BUNDLE_HTTP_TIMEOUT": "5", "BUNDLE_HTTP_RETRIES": "2"}
    env |= {"BUNDLE_HTTP_BACKOFF": "", "BUNDLE_LOCK_TIMEOUT": ""}
    args = arguments(name, "flag", cache, tiny, tmp_path)
    result = bundle(*name.split(), *args, "--dry-run", "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    settings = json.loads(result.stdout)["settings"]
    assert settings["http_timeout"] == {"value": 5.0, "from": "$BUNDLE_HTTP_TIMEOUT"}
    assert settings["http_retries"] == {"value": 2, "from": "$BUNDLE_HTTP_RETRIES"}
    assert settings["http_backoff"] == {"value": 1.0, "from": "default"}
    assert settings["lock_timeout"] == {"value": None, "from": "default"}  # waits as long as needed
    env["BUNDLE_HTTP_RETRIES"] = "twice"
    refused = bundle(*name.split(), *args, "--dry-run", "--json", env=env)
    assert refused.returncode == 14 and "$BUNDLE_HTTP_RETRIES='twice'" in refused.stdout


# --- helpers ------------------------------------------------------------------------------------


def environment(origin: str, tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The environment of a run, the platform's per-user folders inside tmp_path, and the
    cache folder `origin` makes the command use."""
    home = tmp_path / "home"
    env = {key: value for key, value in os.environ.items() if key != "BUNDLE_CACHE_DIR"}
    env |= {"BUNDLE_DEBUG": "", "HOME": str(home), "USERPROFILE": str(home)}
    env |= {"XDG_CACHE_HOME": str(home / "xdg"), "LOCALAPPDATA": str(home / "local")}
    env["WIN_PD_OVERRIDE_LOCAL_APPDATA"] = str(home / "local")
    if origin == "$BUNDLE_CACHE_DIR":
        env["BUNDLE_CACHE_DIR"] = str(tmp_path / "variable-cache")
        return env, tmp_path / "variable-cache"
    if origin == "flag":
        return env, tmp_path / "flag-cache"
    return env, platform_cache(env)


def platform_cache(env: dict[str, str]) -> Path:
    """The platform's per-user cache folder under `env`: $XDG_CACHE_HOME/bundle on Linux,
    else what platformdirs says (%LOCALAPPDATA%\\bundle\\Cache, ~/Library/Caches/bundle)."""
    if sys.platform.startswith("linux"):
        return Path(env["XDG_CACHE_HOME"]) / "bundle"
    with pytest.MonkeyPatch.context() as patch:
        for key in ("HOME", "LOCALAPPDATA", "WIN_PD_OVERRIDE_LOCAL_APPDATA"):
            patch.setenv(key, env[key])
        from platformdirs import user_cache_path

        return user_cache_path("bundle", appauthor=False)


def arguments(name: str, origin: str, cache: Path, release: Tiny, tmp_path: Path) -> list[str]:
    out, profile = str(tmp_path / "out"), str(release.profile)
    args = [arg.format(out=out, tiny=profile) for arg in COMMANDS[name]]
    return args + (["--cache-dir", str(cache)] if origin == "flag" else [])


def prefill(cache: Path, release: Tiny, env: dict[str, str], tmp_path: Path) -> None:
    """A dry run of build still reads the profile's artifacts from the cache (and downloads the
    missing ones): a real build first puts the tiny release there, extracted."""
    first = release.args(cache, tmp_path / "first")
    result = bundle("build", str(HELLO), *first, env=env)
    assert result.returncode == 0, result.stderr


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `root`: its size and modification time."""
    return {
        path.relative_to(root).as_posix(): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
    }


def bundle(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        capture_output=True,
        encoding="utf-8",
        env=env,
    )
