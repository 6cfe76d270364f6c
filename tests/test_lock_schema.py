"""The lock's format across a rename (issue 39): schema 2 names the EP packs `eps` and the
runtime pack `runtime_pack` (schema 1: `packs`, `pack`). The reader takes both; a lock the
previous release wrote audits clean, passes `--locked`, and the next build rewrites it as
schema 2 without re-deploying anything.

A schema-1 lock is made as the previous release wrote it: its keys renamed back, its version 1,
its digest over that content (bundler.closure.lock.content_digest, unchanged since)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bundler.closure.lock import LOCK_NAME, READABLE, SCHEMA_VERSION, content_digest
from bundler.closure.lockfile import read_lock
from bundler.errors import ExitCode, PlanFormatError
from tests.support.paths import HELLO
from tests.support.tiny import Tiny
from tests.support.tiny import tiny as tiny  # the module fixture: a release of our own

RENAMED = {"eps": "packs", "runtime_pack": "pack"}  # schema 2 -> schema 1


def as_schema_1(lock: Path) -> None:
    data = json.loads(lock.read_text(encoding="utf-8"))
    data.pop("digest")
    body = {RENAMED.get(key, key): value for key, value in data.items()}
    body["schema_version"] = 1
    lock.write_text(json.dumps({**body, "digest": content_digest(body)}, indent=2) + "\n")


def bundle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args], capture_output=True, encoding="utf-8"
    )


def test_the_schema_is_2_and_reads_1() -> None:
    assert SCHEMA_VERSION == 2 and READABLE == (1, 2)


def test_a_schema_1_lock_audits_clean_passes_locked_and_is_rewritten(
    tiny: Tiny, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = [str(HELLO), *tiny.args(tmp_path / "cache", out), "--runtime-pack"]
    first = bundle("build", *args, "--no-iss")
    assert first.returncode == 0, first.stderr
    lock = out / LOCK_NAME
    written = read_lock(lock)
    assert written is not None and written.runtime_pack is not None
    as_schema_1(lock)
    old = json.loads(lock.read_text(encoding="utf-8"))
    assert old["schema_version"] == 1 and "pack" in old and "runtime_pack" not in old
    assert read_lock(lock) == written  # the same content under the old names
    audited = bundle("audit", str(out), "--profile", str(tiny.profile), "--json")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    locked = bundle("build", *args, "--no-iss", "--locked", "--json")
    assert locked.returncode == 0, locked.stderr
    counters = json.loads(locked.stdout)["counters"]
    assert counters["copied"] == 0 and counters["bytes_written"] == 0, counters
    assert counters["hashed"] == 0, counters  # the lock's hashes trusted: no DLL read again
    assert json.loads(lock.read_text(encoding="utf-8"))["schema_version"] == 2  # rewritten


def test_a_lock_of_an_unknown_schema_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / LOCK_NAME
    lock.write_text(json.dumps({"schema_version": 3, "files": []}), encoding="utf-8")
    with pytest.raises(PlanFormatError, match="schema_version 3 is not 1 or 2") as raised:
        read_lock(lock)
    assert raised.value.exit_code == ExitCode.PLAN
