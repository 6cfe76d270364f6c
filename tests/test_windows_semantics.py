"""Windows itself (#27, point 2): paths spelled as Windows users write them, and the file
semantics Linux does not have. Every test runs `bundle build` (the CPU profile, 11 files, 14 MB)
under the official CPython for Windows (tests/support/winpython.py), so each one would also fail
on the `os.pread` crash #27 starts from, and asserts what the user sees: the exit code, the
message, and the output folder (exactly the lock's files with the lock's hashes, no temporary
file, no build lock left).

How each Windows situation is made, in the tier's own Wine prefix (`win_wine`):
- another drive: a drive letter mapped in the prefix's dosdevices to a folder on another Unix
  filesystem (/dev/shm), so a hard link from the cache on Z: fails as it does between two
  Windows volumes;
- a running app: tests/fixtures/windows/holddll.c keeps onnxruntime.dll loaded
  (LoadLibraryExW, as the app does) until its standard input ends;
- a killed build: a wrapper pauses the build at its second rename into the output folder (only
  the moment is chosen; every file operation is bundle's own), and another Windows process
  ends it with TerminateProcess;
- read-only files: os.chmod of the Windows Python (FILE_ATTRIBUTE_READONLY);
- a process tree: tests/fixtures/windows/hangtree.c starts a child and both wait forever;
- a Windows without long paths enabled: a wrapper makes os.mkdir refuse a long path as
  CreateDirectoryW does there (Wine never refuses one, see below).

What Wine does with long paths (measured with Wine 8.0): no MAX_PATH limit in the file APIs
(CreateFileW, CreateDirectoryW, MoveFileExW, CreateHardLinkW all take a 283-character path
without the \\\\?\\ prefix, and the LongPathsEnabled value is absent from its registry), as on a
Windows with long paths enabled, which python.org's python.exe is declared ready for
(longPathAware). But its GetFinalPathNameByHandleW answers ERROR_MORE_DATA (234) for any final
path past MAX_PATH, so os.path.realpath and Path.resolve raise there: the tier's sitecustomize
routes around that Wine bug (tools/testing/windows_python.py), bundle is not changed for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.mingw import compile_c
from tests.support.paths import CPU, HELLO, REPO
from tests.support.skips import require
from tests.support.winbuild import OFFLINE_PIP, WinBuilds, mirror
from tests.support.winpython import VERSIONS, WinPython, winpath

pytestmark = pytest.mark.real_tools

UPGRADE = "ort-1.20.1-cpu"  # the next release's CPU profile: every ORT file changes
SOURCES = REPO / "tests" / "fixtures" / "windows"
TEMP_SUFFIX = ".bundle-tmp"
BUILD_LOCK = ".bundle-build.lock"
LOCK = "bundle.lock.json"
OUTPUT_ERROR = 15  # docs/exit-codes.md: the output folder cannot be written
RUN_TIMEOUT = 180.0  # seconds for a build started in the background; one takes about five
CFLAGS = ("-O2", "-s", "-static", "-municode", "-Wall", "-Wextra", "-Werror")


# --- the builds -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Builds:
    """bundle under one Windows Python, from that Python's fetched caches (win_builds)."""

    windows: WinBuilds
    reference: dict[str, str]  # name -> sha256 of a plain build's lock (Z:\ paths)

    @property
    def python(self) -> WinPython:
        return self.windows.python

    def args(self, exe: str, out: str, *extra: str, profile: str = CPU) -> list[str]:
        """`build EXE --out OUT`, each as given (spelled for Windows)."""
        cache = winpath(self.windows.cache(profile))
        return [
            *("build", exe, "--profile", profile, "--out", out, "--cache-dir", cache),
            *("--mirror", winpath(mirror()), *extra),
        ]

    def build(
        self,
        exe: str,
        out: str,
        *extra: str,
        profile: str = CPU,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        args = self.args(exe, out, *extra, profile=profile)
        return self.python.run(*args, cwd=cwd, env={**OFFLINE_PIP, **(env or {})})

    def start(self, *args: str) -> subprocess.Popen[str]:
        """`python.exe ARGS` in the background, output through pipes (winpython's docstring)."""
        return self.python.background(*args, env={"BUNDLE_DEBUG": "", **OFFLINE_PIP})


@pytest.fixture(scope="session")
def builds(win_builds: WinBuilds, tmp_path_factory: pytest.TempPathFactory) -> Builds:
    """The reference: a plain build's lock, for the files every other build must ship."""
    out = tmp_path_factory.mktemp(f"win{win_builds.python.minor}-reference")
    done = Builds(win_builds, {}).build(winpath(win_builds.app), winpath(out))
    assert done.returncode == 0, done.stderr
    return Builds(win_builds, lock_files(out))


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fixtures/windows/*.c built for x64 Windows: NAME.exe for each NAME.c."""
    out = tmp_path_factory.mktemp("programs")
    for source in sorted(SOURCES.glob("*.c")):
        compile_c(source, out / f"{source.stem}.exe", *CFLAGS)
    return out


def lock_files(out: Path) -> dict[str, str]:
    lock = json.loads((out / LOCK).read_text(encoding="utf-8"))
    return {item["name"]: item["sha256"] for item in lock["files"]}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_whole(out: Path, expected: dict[str, str]) -> None:
    """The folder a finished build leaves: its lock lists `expected`, every listed file is
    there with the lock's hash, and nothing half-done is left (no temporary file, no build
    lock)."""
    listed = lock_files(out)
    assert listed == expected
    leftovers = [p.name for p in out.rglob("*") if p.name.endswith(TEMP_SUFFIX)]
    assert leftovers == [], leftovers
    assert not (out / BUILD_LOCK).exists()
    for name, digest in listed.items():
        assert sha256(out / name) == digest, name


def deployed(result: subprocess.CompletedProcess[str], out: str, files: int = 11) -> None:
    """Exit 0, and the report names the folder as the user spelled it."""
    assert result.returncode == 0, result.stderr
    assert f"Deployed {files} files for {CPU} into {out}\n" in result.stdout, result.stdout


# --- paths as Windows users write them ------------------------------------------------------------


def app_in(folder: Path, name: str = "hello.exe") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HELLO, folder / name)
    return folder / name


def test_a_relative_path_in_another_case(builds: Builds, tmp_path: Path) -> None:
    """`..\\App\\HELLO.EXE` from a sibling folder: the file is hello.exe, and the bundle is the
    one its own spelling gives (same lock, the exe shipped as hello.exe, not HELLO.EXE)."""
    app_in(tmp_path / "App")
    (tmp_path / "work").mkdir()
    result = builds.build(r"..\App\HELLO.EXE", r"..\Release", cwd=tmp_path / "work")
    deployed(result, r"..\Release")
    out = tmp_path / "Release"
    assert_whole(out, builds.reference)
    assert "hello.exe" in os.listdir(out)


LONG = ("a" * 90, "b" * 90, "c" * 90)  # with the test's folder: well past MAX_PATH (260)


def test_spaces_accents_and_cjk(builds: Builds, tmp_path: Path) -> None:
    """A folder and an exe named as users in France and China name them: the bundle is the
    same, the report shows the names (UTF-8 output), and audit reads the folder back."""
    exe = app_in(tmp_path / "Mes applis é" / "应用 程序", "démo 中文.exe")
    out = tmp_path / "Sortie é" / "发布 x64"
    result = builds.build(winpath(exe), winpath(out))
    deployed(result, winpath(out))
    expected = {**builds.reference, "démo 中文.exe": builds.reference["hello.exe"]}
    del expected["hello.exe"]
    assert_whole(out, expected)
    audit = builds.python.run("audit", winpath(out))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.startswith(f"Audit of {winpath(out)} for {CPU}"), audit.stdout


def prefixed(path: Path) -> str:
    return "\\\\?\\" + winpath(path)


def forward(path: Path) -> str:
    return "z:" + path.as_posix()


SPELLINGS = {
    "extended-length prefix": ((), prefixed),
    "past MAX_PATH": (LONG, winpath),
    "past MAX_PATH, prefixed": (LONG, prefixed),
    "lower-case drive, forward slashes": ((), forward),
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_absolute_spellings(builds: Builds, tmp_path: Path, spelling: str) -> None:
    """`\\\\?\\Z:\\...`, a folder past MAX_PATH (with and without the prefix) and `z:/...`: the
    same bundle, reported in the user's spelling, and audit reads it back."""
    parts, spell = SPELLINGS[spelling]
    folder = tmp_path.joinpath(*parts)
    exe, out = app_in(folder / "app"), folder / "out"
    assert len(winpath(out)) > 260 or not parts
    result = builds.build(spell(exe), spell(out))
    deployed(result, spell(out).replace("/", "\\"))  # shown with Windows' separator
    assert_whole(out, builds.reference)
    audit = builds.python.run("audit", spell(out))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.startswith(f"Audit of {spell(out)} for {CPU}".replace("/", "\\"))


# Run as `python.exe short_paths.py ARGS`: bundle ARGS on a Windows without long paths enabled
# (its default), whose CreateDirectoryW refuses a full path of 248 characters or more with
# ERROR_FILENAME_EXCED_RANGE unless it has the \\?\ prefix. Wine has no such limit.
SHORT_PATHS = r"""
import ntpath, os, runpy, sys

mkdir = os.mkdir

def refusing(path, *args, **kwargs):
    full = ntpath.abspath(os.fspath(path))
    if len(full) >= 248 and not full.startswith("\\\\?\\"):
        raise OSError(0, "The filename or extension is too long", os.fspath(path), 206)
    return mkdir(path, *args, **kwargs)

os.mkdir = refusing
sys.argv = ["bundle", *sys.argv[1:]]
runpy.run_module("bundler", run_name="__main__", alter_sys=True)
"""


def test_past_max_path_without_long_paths(builds: Builds, tmp_path: Path) -> None:
    """Where Windows refuses the folder for its length, the error says so and how to lift the
    limit, instead of blaming permissions."""
    (tmp_path / "short_paths.py").write_text(SHORT_PATHS, encoding="utf-8")
    out = tmp_path.joinpath(*LONG, "out")
    args = builds.args(winpath(builds.windows.app), winpath(out))
    result = builds.python.python(winpath(tmp_path / "short_paths.py"), *args)
    assert result.returncode == OUTPUT_ERROR, result.stdout + result.stderr
    assert result.stderr.endswith(
        f"error: {winpath(out)}: cannot write there (The filename or extension is too long). "
        f"The path is {len(winpath(out))} characters long, and a Windows without long paths "
        "refuses 260 or more (248 for a folder). Enable them (LongPathsEnabled = 1 under "
        'HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem, or the policy "Enable Win32 long '
        'paths"), give the folder with the \\\\?\\ prefix, or choose a shorter one.\n'
    ), result.stderr
    assert not out.exists()


# --- Windows file semantics -----------------------------------------------------------------------


def finish(process: subprocess.Popen[str], builds: Builds) -> subprocess.CompletedProcess[str]:
    """Wait for a process `builds.start` started; past RUN_TIMEOUT the prefix is stopped, so
    nothing it started keeps running."""
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        builds.python.wine.stop()
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def copied(result: subprocess.CompletedProcess[str]) -> int:
    """The number of files the build report says were copied."""
    found = re.search(r"^  copied (\d+) ", result.stdout, re.MULTILINE)
    assert found is not None, result.stdout
    return int(found[1])


def test_two_builds_into_one_folder_at_once(builds: Builds, tmp_path: Path) -> None:
    """Both succeed; the second waits for the first (LockFileEx on the build lock), and the
    folder is one whole bundle."""
    out = tmp_path / "out"
    args = ("-m", "bundler", *builds.args(winpath(builds.windows.app), winpath(out)))
    first, second = builds.start(*args), builds.start(*args)
    results = [finish(first, builds), finish(second, builds)]
    for result in results:
        deployed(result, winpath(out))
    assert_whole(out, builds.reference)
    assert sorted(map(copied, results)) == [0, 11]  # one after the other: the second had nothing


# Run as `python.exe pause.py SIGNAL ARGS`: bundle ARGS, paused for good at its second rename
# into the output folder (one file placed, others written under their temporary names), with
# the Windows process id in SIGNAL. Only the moment is chosen here: every file operation is
# bundle's own, and the end comes from outside (TerminateProcess).
PAUSE = """
import os, runpy, sys, threading, time
import bundler.ship.deploy as deploy

signal, *args = sys.argv[1:]
rename, renames, guard = deploy.replace, [], threading.Lock()

def paused(source, target):
    with guard:
        renames.append(target)
        first = len(renames) == 1
        if len(renames) == 2:
            with open(signal + ".tmp", "w") as note:
                note.write(str(os.getpid()))
            os.replace(signal + ".tmp", signal)
    if not first:
        time.sleep(3600)
    rename(source, target)

deploy.replace = paused
sys.argv = ["bundle", *args]
runpy.run_module("bundler", run_name="__main__", alter_sys=True)
"""
TERMINATE = (
    "import ctypes, sys\n"
    "kernel32 = ctypes.WinDLL('kernel32', use_last_error=True)\n"
    "process = kernel32.OpenProcess(0x0001, False, int(sys.argv[1]))\n"  # PROCESS_TERMINATE
    "sys.exit(0 if process and kernel32.TerminateProcess(process, 9) else 1)\n"
)


def wait_for(
    path: Path, process: subprocess.Popen[str], builds: Builds, seconds: float = 60
) -> str:
    """The text of `path` once it exists, written by (a child of) the running `process`."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, finish(process, builds).stderr
        assert time.monotonic() < deadline, f"{path} not written in {seconds} s"
        time.sleep(0.05)
    return path.read_text()


def test_a_build_killed_halfway_then_run_again(builds: Builds, tmp_path: Path) -> None:
    """TerminateProcess mid-deployment leaves no DLL under its final name that is not whole,
    and the next build finishes the folder: leftovers removed, the stale lock file no
    obstacle."""
    out, signal = tmp_path / "out", tmp_path / "paused"
    (tmp_path / "pause.py").write_text(PAUSE, encoding="utf-8")
    args = builds.args(winpath(builds.windows.app), winpath(out))
    build = builds.start(winpath(tmp_path / "pause.py"), winpath(signal), *args)
    pid = wait_for(signal, build, builds)
    kill = builds.python.python("-c", TERMINATE, pid)
    assert kill.returncode == 0, kill.stderr
    assert finish(build, builds).returncode == 9  # TerminateProcess's exit code: killed, not ended
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    placed = names & builds.reference.keys()
    temporary = {name for name in names if name.endswith(TEMP_SUFFIX)}
    assert len(placed) == 1 and temporary, names  # halfway: one placed, others in flight
    assert all(sha256(out / name) == builds.reference[name] for name in placed)

    again = builds.build(
        winpath(builds.windows.app), winpath(out), env={"BUNDLE_LOCK_TIMEOUT": "30"}
    )
    deployed(again, winpath(out))
    assert copied(again) == 10 and "unchanged 1," in again.stdout, again.stdout
    assert_whole(out, builds.reference)


@contextmanager
def holding(builds: Builds, programs: Path, dll: Path) -> Iterator[None]:
    """`dll` loaded by a running program (holddll.exe) while the block runs."""
    holder = builds.python.wine.background(
        programs / "holddll.exe", winpath(dll), stdin=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n", holder.communicate(timeout=60)
        yield
    finally:
        _, stderr = holder.communicate(timeout=60)  # closes its standard input: it ends
    assert holder.returncode == 0, stderr


def test_a_dll_the_running_app_holds(builds: Builds, programs: Path, tmp_path: Path) -> None:
    """Windows refuses to replace or delete a loaded DLL. An upgrade, and a --clean rebuild,
    then stop before touching the folder and name the file and the fix; once the app is
    closed the same command succeeds."""
    out = tmp_path / "out"
    deployed(builds.build(winpath(builds.windows.app), winpath(out)), winpath(out))
    held = out / "onnxruntime.dll"
    with holding(builds, programs, held):
        for extra, profile in (((), UPGRADE), (("--clean",), CPU)):
            refused = builds.build(
                winpath(builds.windows.app), winpath(out), *extra, profile=profile
            )
            assert refused.returncode == OUTPUT_ERROR, refused.stdout + refused.stderr
            message = refused.stderr.splitlines()[-1]
            assert message.startswith(f"error: {winpath(held)}: "), refused.stderr
            assert "another program has it open" in message and "Close that program" in message
            assert "Traceback" not in refused.stderr
            assert_whole(out, builds.reference)  # as it was: nothing replaced, nothing removed
    upgraded = builds.build(winpath(builds.windows.app), winpath(out), profile=UPGRADE)
    assert upgraded.returncode == 0, upgraded.stderr
    files = lock_files(out)
    assert files["onnxruntime.dll"] != builds.reference["onnxruntime.dll"]
    assert_whole(out, files)


READ_ONLY = (
    "import os, pathlib, stat, sys\n"
    "for path in pathlib.Path(sys.argv[1]).rglob('*'):\n"
    "    if path.is_file():\n"
    "        os.chmod(path, stat.S_IREAD)\n"  # FILE_ATTRIBUTE_READONLY
)


def test_read_only_files_in_the_output_folder(builds: Builds, tmp_path: Path) -> None:
    """Files made read-only (by a checkout from Perforce or TFVC, by hand) are replaced and
    removed as xcopy /R does: an upgrade, then a --clean rebuild back, both succeed."""
    out = tmp_path / "out"
    deployed(builds.build(winpath(builds.windows.app), winpath(out)), winpath(out))
    for extra, profile in (((), UPGRADE), (("--clean",), CPU)):
        marked = builds.python.python("-c", READ_ONLY, winpath(out))
        assert marked.returncode == 0, marked.stderr
        assert not (out / "onnxruntime.dll").stat().st_mode & 0o222  # Wine's read-only
        result = builds.build(winpath(builds.windows.app), winpath(out), *extra, profile=profile)
        assert result.returncode == 0, result.stderr
        files = lock_files(out)
        assert (files["onnxruntime.dll"] == builds.reference["onnxruntime.dll"]) == (profile == CPU)
        assert_whole(out, files)


@pytest.fixture
def other_drive(builds: Builds) -> Iterator[tuple[str, Path]]:
    """Drive R: of the prefix, on another filesystem than Z: (a tmpfs): (the letter, its Unix
    folder)."""
    shm = Path("/dev/shm")
    require(
        shm.is_dir() and shm.stat().st_dev != builds.windows.root.stat().st_dev,
        "no /dev/shm on another filesystem than the caches",
    )
    letter = builds.python.wine.prefix / "dosdevices" / "r:"
    folder = Path(tempfile.mkdtemp(prefix="bundle-drive-", dir=shm))
    letter.unlink(missing_ok=True)
    letter.symlink_to(folder)
    try:
        yield "R:", folder
    finally:
        letter.unlink()
        shutil.rmtree(folder)


def test_link_with_the_cache_on_another_drive(
    builds: Builds, other_drive: tuple[str, Path], tmp_path: Path
) -> None:
    """Hard links cannot cross volumes: --link copies instead, and says so (the cache on Z:,
    the output on R:). On the cache's own drive the same command links."""
    drive, folder = other_drive
    result = builds.build(winpath(builds.windows.app), f"{drive}\\out", "--link")
    deployed(result, f"{drive}\\out")
    size = sum((folder / "out" / name).stat().st_size for name in builds.reference)
    assert f"  copied 11 ({size / 1e6:.1f} MB), linked 0," in result.stdout, result.stdout
    assert (
        "  --link: 11 files copied instead of linked: the cache is on another volume than the "
        "output folder" in result.stdout
    )
    assert_whole(folder / "out", builds.reference)
    assert (folder / "out" / "onnxruntime.dll").stat().st_nlink == 1

    same = tmp_path / "out"
    linked = builds.build(winpath(builds.windows.app), winpath(same), "--link")
    deployed(linked, winpath(same))
    assert "  copied 0 (0 B), linked 11," in linked.stdout and "--link:" not in linked.stdout
    assert (same / "onnxruntime.dll").stat().st_nlink > 1
    assert_whole(same, builds.reference)


def processes_running(name: str) -> list[str]:
    """Command lines of the live processes whose command line names `name` (Linux /proc: a
    Wine process shows its Windows command line there)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue  # ended meanwhile
        text = command.replace(b"\0", b" ").decode(errors="replace")
        if name in text:
            found.append(text)
    return found


def test_audit_run_kills_the_apps_whole_tree(
    builds: Builds, programs: Path, tmp_path: Path
) -> None:
    """An app that starts a child and never ends: at the load proof's time limit (30 s) bundle
    ends the app and its child (a job object), reports the run as stopped, and leaves nothing
    running. The newest version only: the job object's code is the same on both, and each run
    waits out the time limit."""
    if builds.python.minor != VERSIONS[-1]:
        pytest.skip(f"the time limit is waited out on CPython {VERSIONS[-1]} only")
    exe = app_in(tmp_path / "Tree app", "hangtree.exe")
    shutil.copy2(programs / "hangtree.exe", exe)
    built = builds.build(winpath(exe), winpath(exe.parent))
    deployed(built, winpath(exe.parent), files=10)  # the app is in its folder already
    audit = builds.start("-m", "bundler", "audit", winpath(exe.parent), "--run", "--json")
    wait_for(exe.with_name("hangtree.child.txt"), audit, builds)  # written by the child
    tree = processes_running(winpath(exe))
    assert len(tree) == 2 and all("hangtree.exe" in command for command in tree), tree
    result = finish(audit, builds)
    assert result.returncode == 0, result.stderr  # nothing missing: a stopped app is no error
    runs = {run["target"]: run for run in json.loads(result.stdout)["load_proof"]["runs"]}
    assert runs["hangtree.exe"]["exit_code"] is None
    assert runs["hangtree.exe"]["verdict"] == "still running at the time limit, stopped"
    deadline = time.monotonic() + 10
    while processes_running(winpath(exe)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_running(winpath(exe)) == []
