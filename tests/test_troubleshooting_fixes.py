"""The fixes docs/troubleshooting.md gives, followed as written (issue 39): a fix the page
offers is one the tool accepts. Exit 7, a damaged or hand-edited lock file: the page said
"build again", which stops with exit 7 again; its fix is now the tool's own hint (delete the
lock, then build), with what may follow (exit 12, and --force)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bundler.closure.lock import LOCK_NAME
from bundler.errors import ExitCode
from tests.support.paths import HELLO, REPO
from tests.support.tiny import Tiny
from tests.support.tiny import tiny as tiny  # the module fixture: a release of our own


def section(title: str) -> str:
    page = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    return page.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def bundle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args], capture_output=True, encoding="utf-8"
    )


def damaged(lock: Path) -> None:
    lock.write_text(lock.read_text(encoding="utf-8")[:-40], encoding="utf-8")


def edited(lock: Path) -> None:
    data = json.loads(lock.read_text(encoding="utf-8"))
    data["profile"] = "edited-by-hand"
    lock.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("harm", [damaged, edited], ids=lambda harm: harm.__name__)
def test_the_exit_7_fix_works_as_the_page_gives_it(
    harm: Callable[[Path], None], tiny: Tiny, tmp_path: Path
) -> None:
    fix = section("Exit 7")
    assert "delete" in fix.lower() and "--force" in fix and "exit 12" in fix.lower()
    out = tmp_path / "out"
    args = [str(HELLO), *tiny.args(tmp_path / "cache", out)]
    assert bundle("build", *args).returncode == 0
    lock = out / LOCK_NAME
    harm(lock)
    assert bundle("build", *args).returncode == ExitCode.PLAN  # building again is no fix
    (out / "extra.dll").write_bytes(b"a file of the user's, where the build writes extra.dll")
    lock.unlink()  # the fix: delete the lock, then build
    stopped = bundle("build", *args)
    assert stopped.returncode == ExitCode.CONFLICT, stopped.stderr  # a file it cannot vouch for
    rebuilt = bundle("build", *args, "--force")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert bundle("audit", str(out), "--profile", str(tiny.profile)).returncode == 0
