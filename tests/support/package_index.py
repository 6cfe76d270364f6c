"""A PEP 691 package index for tests: `page` and `entry` write a project's JSON page,
`local_index` (a module fixture) serves one for every wheel in the test cache from 127.0.0.1
(it needs ORT_120, the 1.20.2 GPU wheel tools/testing/fetch_test_wheels.py adds), and `profiles_new`
runs `bundle profiles new` against an index, pip taking the wheels from the same cache."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundler.rules.derive.index import normalize
from tests.support.httpserver import HttpServer
from tests.support.paths import test_cache_dir
from tests.support.runs import pip_env
from tests.support.skips import require

ORT_120 = "onnxruntime_gpu-1.20.2-cp311-cp311-win_amd64.whl"


def page(*files: dict[str, object], api: str = "1.1") -> bytes:
    return json.dumps({"meta": {"api-version": api}, "name": "demo", "files": list(files)}).encode()


def entry(name: str, digest: str, **extra: object) -> dict[str, object]:
    return {"filename": name, "url": f"../../files/{name}", "hashes": {"sha256": digest}, **extra}


@pytest.fixture(scope="module")
def local_index() -> Iterator[str]:
    """PEP 691 pages for every wheel in the test cache, served from 127.0.0.1."""
    wheels = test_cache_dir() / "wheels"
    require(
        (wheels / ORT_120).is_file(),
        f"{ORT_120} not in {wheels}: run python -m tools.testing.fetch_test_wheels",
    )
    projects: dict[str, list[dict[str, object]]] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        item = entry(wheel.name, digest, size=wheel.stat().st_size)
        projects.setdefault(normalize(wheel.name.split("-")[0]), []).append(item)
    with HttpServer() as server:
        for project, files in projects.items():
            server.serve_bytes(f"/simple/{project}/", page(*files))
        server.serve_directory("/files/", wheels)
        yield server.url("/simple/")


def profiles_new(index: str, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = ["profiles", "new", "--index-url", index, "--allow-http", "--cache-dir", str(cache)]
    return subprocess.run(
        [sys.executable, "-m", "bundler", *command, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env()},
    )
