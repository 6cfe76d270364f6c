"""Windows file semantics that hold on every system (issue 27): two names that differ only by
case are one file; a deployment says whether it copied, cloned or linked, and when --link had
to copy; redirected output is UTF-8; colour only on a terminal and never with NO_COLOR.

What only Windows can show (a refused rename retried, a file held open by a running app, a
read-only target, a job object) is in the Windows tier, tests/test_windows_workflows.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bundler.disk import files
from bundler.disk.files import RETRY_DELAYS, case_collisions
from bundler.errors import ConflictError, FileInUseError
from bundler.ship.deploy import apply, plan_deployment
from bundler.ship.output_folder import Counters, Placement

REPO = Path(__file__).resolve().parent.parent


def placement(tmp_path: Path, name: str, data: bytes = b"x") -> Placement:
    source = tmp_path / "src" / name.replace("/", "_")
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(data)
    return Placement(name, source, len(data))


def test_names_that_differ_only_by_case_collide() -> None:
    names = ["onnxruntime.dll", "licenses/ORT/LICENSE", "ONNXRuntime.DLL", "licenses/ort/license"]
    assert case_collisions(names) == [
        ("onnxruntime.dll", "ONNXRuntime.DLL"),
        ("licenses/ORT/LICENSE", "licenses/ort/license"),
    ]
    assert case_collisions(["a.dll", "b.dll", "a.dll.bak"]) == []


def test_a_deployment_with_a_case_collision_is_refused_before_writing(tmp_path: Path) -> None:
    first = placement(tmp_path, "licenses/cudnn/LICENSE", b"one")
    second = placement(tmp_path, "licenses/CUDNN/License", b"two")
    out = tmp_path / "out"
    with pytest.raises(ConflictError) as raised:
        plan_deployment([first, second], out, previous={})
    message = str(raised.value)
    assert "licenses/cudnn/LICENSE" in message and "licenses/CUDNN/License" in message
    assert "differ only by case" in message and "Rename one" in message
    assert not out.exists()


def test_link_falling_back_to_copies_is_counted(tmp_path: Path) -> None:
    """A hard link across volumes fails (EXDEV; Windows: ERROR_NOT_SAME_DEVICE): the build
    copies instead and says so. /dev/shm is another filesystem than tmp_path here."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem to link across")
    source = shm / f"bundle-test-{os.getpid()}.dll"
    source.write_bytes(b"MZ" + bytes(100))
    try:
        deployment = plan_deployment([Placement("a.dll", source, 102)], tmp_path, {}, link=True)
        counters = Counters()
        apply(deployment, counters)
    finally:
        source.unlink()
    assert (counters.linked, counters.link_fallbacks) == (0, 1)
    assert counters.copied + counters.cloned == 1
    assert (tmp_path / "a.dll").read_bytes() == b"MZ" + bytes(100)


def test_the_report_names_the_link_fallback() -> None:
    from bundler.cli.build_views import counters_lines

    lines = counters_lines(Counters(copied=2, bytes_written=2048, link_fallbacks=2))
    assert lines[0].startswith("  copied 2 (2.0 KB), linked 0")
    assert "--link: 2 files copied instead of linked" in lines[1]
    assert "another volume" in lines[1]
    assert "cloned 3" in counters_lines(Counters(cloned=3))[0]


def _without_colour_settings() -> dict[str, str]:
    unset = {"NO_COLOR", "FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "TTY_COMPATIBLE"}
    return {key: value for key, value in os.environ.items() if key not in unset}


def _on_a_terminal(*args: str, env: dict[str, str]) -> bytes:
    """`bundle ARGS` with stdout and stderr on a pseudo-terminal, as a user's console."""
    import pty  # POSIX only: the tests that use it are marked posix_only

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "bundler", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**_without_colour_settings(), "COLUMNS": "100", "TERM": "xterm-256color", **env},
    )
    os.close(follower)
    output = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=60)
    os.close(leader)
    return bytes(output)


def _colours(output: bytes) -> set[str]:
    """The colour parameters of the SGR sequences in `output` (30-38, 40-48, 90-107); bold
    and dim are not colours, and NO_COLOR allows them."""
    found = set()
    for params in re.findall(rb"\x1b\[([0-9;]*)m", output):
        for param in params.decode().split(";"):
            if param and (30 <= int(param) <= 48 or 90 <= int(param) <= 107):
                found.add(param)
    return found


@pytest.mark.posix_only(reason="a pseudo-terminal (pty) is POSIX; Windows has ConPTY")
def test_colour_on_a_terminal_only_and_never_with_no_color() -> None:
    coloured = _on_a_terminal("build", "--help", env={})
    assert _colours(coloured), coloured[:300]  # the check can fail: rich colours the help
    plain = _on_a_terminal("build", "--help", env={"NO_COLOR": "1"})
    assert b"--profile" in re.sub(rb"\x1b\[[0-9;]*m", b"", plain)
    assert not _colours(plain)
    piped = subprocess.run(
        [sys.executable, "-m", "bundler", "build", "--help"], capture_output=True, check=True
    )
    assert b"\x1b[" not in piped.stdout


def test_redirected_output_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """An `é` and a CJK name in a path reach a pipe as UTF-8, even where Python's own choice
    for a pipe is cp1252, as on Windows (set here by PYTHONIOENCODING): the CJK name would
    crash the command."""
    folder = tmp_path / "café 模型"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "bundler", "audit", str(folder)],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "cp1252", "BUNDLE_DEBUG": ""},
    )
    assert "internal error" not in done.stderr.decode("utf-8"), done.stderr
    assert "café 模型".encode() in done.stdout + done.stderr


def test_a_folder_where_a_file_goes_is_refused_at_once(tmp_path: Path) -> None:
    """Windows answers "access denied" for it, as for a held file: no holder to wait for, so
    no 3 s of retries and no "close the program" advice; an OSError, as on Linux."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_bytes(b"x")
    started = time.monotonic()
    with pytest.raises(OSError):
        files.replace(tmp_path / "file", tmp_path / "folder")
    assert time.monotonic() - started < RETRY_DELAYS[-1]
    assert (tmp_path / "file").read_bytes() == b"x"


def test_an_atomic_write_replaces_the_file_or_leaves_it_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    """files.write_atomically, which the lock, the times note and every rendered file go
    through: the new bytes under the name, else the old file as it was and nothing beside it."""
    target = tmp_path / "bundle.lock.json"
    target.write_bytes(b"old")
    files.write_atomically(target, b"new\n")
    assert target.read_bytes() == b"new\n" and os.listdir(tmp_path) == [target.name]
    folder = tmp_path / "a folder where the file goes"
    (folder / "inside").mkdir(parents=True)
    with pytest.raises((OSError, FileInUseError)):  # Windows: access denied, retried, then held
        files.write_atomically(folder, b"x")  # a rename cannot replace a non-empty folder
    assert sorted(os.listdir(tmp_path)) == sorted([target.name, folder.name])
    assert os.listdir(folder) == ["inside"]
