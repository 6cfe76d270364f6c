"""The CLI's edges agree with each other (issue 39): `bundle deps --fetch` takes the source
options every other downloading command takes, so an offline agent can resolve from a mirror
folder as docs/building.md offers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bundler.errors import ExitCode
from tests.support.paths import HELLO
from tests.support.tiny import Tiny
from tests.support.tiny import tiny as tiny  # the module fixture: a release of our own


def deps(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", "deps", str(HELLO), *args, "--json"],
        capture_output=True,
        encoding="utf-8",
    )


def test_deps_fetch_offline_takes_the_artifacts_from_a_mirror_folder(
    tiny: Tiny, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    profile = ["--profile", str(tiny.profile), "--cache-dir", str(cache), "--fetch"]
    refused = deps(*profile, "--offline")  # an empty cache, no mirror, no network
    assert refused.returncode == ExitCode.FETCH, refused.stderr
    assert "--mirror" in refused.stderr  # the fix is named
    done = deps(*profile, "--offline", "--mirror", str(tiny.mirror))
    assert done.returncode in (0, ExitCode.MISSING), done.stderr
    plan = json.loads(done.stdout)
    found = {item["name"].lower() for item in plan["files"] if item.get("source")}
    assert {"onnxruntime.dll", "helper.dll"} <= found, plan["files"]
    again = deps(*profile, "--offline")  # now from the cache it filled
    assert again.returncode == done.returncode and json.loads(again.stdout) == plan
