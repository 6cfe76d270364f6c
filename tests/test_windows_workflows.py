"""The workflows a Windows user runs, each run by the official CPython for Windows (the Windows
tier: tests/support/winpython.py, under Wine), on the real pinned wheels from the mirror folder.

Builds (GPU 1.19.2, GPU 1.31.1, CPU, DirectML): into a new folder, again as a no-op, with
--link, with --clean, with --archive .zip and .7z, with --dry-run --json. Audits of each folder
(--run, --html, --junit, --signatures), of an archive and of the installed setup payload. Then
render iss with a real ISCC compile and silent install, msbuild, postbuild.cmd run by cmd,
fetch --verify, the cache commands, profiles and profiles check, scan and deps; the Windows
lock against the Linux lock of the same build; the README's install line.

Every test starts from a build made by the Windows Python (the module's `folders`, or a build
of its own), and every build reads the CUDA code of its DLLs (bundler/binary/fatbin.py, for the
lock's
sass/ptx): so each test fails on a Windows-only crash of that reader, such as issue 27's
`os.pread`, and on any other of the build's Windows paths (copies, links, renames, locks).

What runs on 3.11 too, and what on 3.13 alone (`NEWEST_ONLY`): the whole tier has ~12 minutes
of CI's 2 cores. Both versions fetch and build GPU 1.19.2 (40 s to 90 s under Wine, as busy as
the machine is), build it again, link it, clean it, audit it and compare its lock with
Linux's; CPU and DirectML cost seconds and run everywhere. 1.31.1's fetch (another 1.6 GB of
wheels), .7z, ISCC, msbuild, the README install and the remaining commands run on 3.13: what
they add is Windows file and process handling, the same on both versions, which the 3.11
builds and audits already cover.

A GPU build with copies (the default) writes ~2.6 GB: the newest version copies GPU 1.19.2, as
a user does; its module folder of 1.31.1 and an older version's of 1.19.2 are --link builds
(`Folders.flags`), which run the same build and read the same CUDA code, as the copies of
every other profile show the default.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from bundler.binary.signatures import FINDING_CODES as SIGNATURE_CODES
from bundler.closure.lock import LOCK_NAME
from bundler.disk.digest import file_sha256
from tests.support.archives import read_back
from tests.support.batch import Cmd, files_under, target_arg
from tests.support.builds import GENERATED
from tests.support.builds import build as linux_build
from tests.support.cache_links import linked_cache
from tests.support.inno import InnoSetup
from tests.support.paths import CPU, DIRECTML, GPU, HELLO, REPO, test_cache_dir
from tests.support.replica import ORT_GPU_WHEEL_SHA256, Replica, replica_profile
from tests.support.replica import replica as replica  # the module fixture, reused
from tests.support.runs import run_bundle
from tests.support.winbuild import WinBuilds, done_with, mirror
from tests.support.winpython import VERSIONS, WinPython, winpath

pytestmark = pytest.mark.realdata

GPU13 = "ort-1.31.1-gpu-cuda13"
PROFILES = (GPU, GPU13, CPU, DIRECTML)
VERSION_LINE = "ORT version: 1.19.2"
# ISCC under Wine 8, with the rendered LZMAUseSeparateProcess=yes, fails about one compile in
# three with exactly this (the helper process is not started; the other compiles of the same
# script are byte-identical): a Wine flake, retried once. Anything else is a real failure.
ISCC_WINE_FLAKE = "lzma: CreateProcess failed (1359)"


def newest_only(reason: str) -> pytest.MarkDecorator:
    """Run a test on the newest Windows Python alone, saying why the others skip it. The
    versions keep win_python's own order, so pytest still runs each version's tests together
    (a session fixture's instances are grouped by their index)."""
    *older, newest = VERSIONS
    return pytest.mark.parametrize(
        "win_python",
        [
            *(pytest.param(v, marks=pytest.mark.skip(reason=reason), id=f"win{v}") for v in older),
            pytest.param(newest, id=f"win{newest}"),
        ],
        indirect=True,
    )


BUDGET = "budget: the newest Windows Python only (see the module's docstring)"
NEWEST_ONLY = newest_only(BUDGET)


def skip_unless_newest(win_python: WinPython, profile: str) -> None:
    if profile == GPU13 and win_python.minor != VERSIONS[-1]:
        pytest.skip(f"{GPU13}: {BUDGET}")


def lock_of(folder: Path) -> dict[str, Any]:
    data = json.loads((folder / LOCK_NAME).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def files_of(lock: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in lock["files"]}


def on_disk(folder: Path) -> set[str]:
    """The payload files in `folder`, as the lock names them."""
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.name not in GENERATED
    }


def extracted(cache: Path, item: dict[str, Any]) -> Path:
    """Where the cache holds a locked file's source: extracted/<archive sha256>/<member>."""
    return cache / "extracted" / str(item["archive_sha256"]) / str(item["member"])


# --- the module's builds: one per profile and version, into a new folder -----------------------


@dataclass(frozen=True)
class Built:
    out: Path
    data: dict[str, Any]  # the build's --json document


class Folders:
    """The first build of each profile into a new folder (copies, the default, or --link:
    `flags`), made under this Windows Python on first use and shared by the module's tests of
    its version."""

    def __init__(self, builds: WinBuilds, root: Path) -> None:
        self.builds = builds
        self.root = root
        self._built: dict[str, Built] = {}

    def of(self, profile: str) -> Built:
        if profile not in self._built:
            out = self.root / profile
            self._built[profile] = Built(
                out, self.builds.build_json(out, profile, *self.flags(profile))
            )
        return self._built[profile]

    def flags(self, profile: str) -> tuple[str, ...]:
        """How the module's folder of `profile` is built: with copies (the default), or for the
        GPU builds the budget leaves to one copy in all, 1.31.1's and an older version's 1.19.2,
        with --link (see the module's docstring)."""
        newest = self.builds.python.minor == VERSIONS[-1]
        return ("--link",) if profile == GPU13 or (profile == GPU and not newest) else ()

    def release(self, profiles: list[str]) -> None:
        """Remove the builds of `profiles` (a later `of(profile)` builds again)."""
        for profile in profiles:
            if self._built.pop(profile, None) is not None:
                shutil.rmtree(self.root / profile, ignore_errors=True)


@pytest.fixture(scope="module")
def folders(win_builds: WinBuilds, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Folders]:
    root = tmp_path_factory.mktemp(f"win{win_builds.python.minor}-folders")
    try:
        yield Folders(win_builds, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # GPU copies: 2.6 GB each


@pytest.fixture(autouse=True)
def _large_builds_go_after_their_last_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """The CUDA 13 build goes once no later test names its profile (winbuild.done_with)."""
    yield
    if "folders" in request.fixturenames:
        request.getfixturevalue("folders").release(done_with(request.node))


# --- builds -----------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_a_build_into_a_new_folder_ships_its_lock_and_again_changes_nothing(
    win_python: WinPython, win_builds: WinBuilds, folders: Folders, profile: str
) -> None:
    skip_unless_newest(win_python, profile)
    first = folders.of(profile)
    lock = lock_of(first.out)
    files = files_of(lock)
    assert lock["profile"] == profile
    assert set(files) == on_disk(first.out)
    for name, item in files.items():
        assert (first.out / name).stat().st_size == item["size"], name
    counters = first.data["counters"]
    copied, linked = counters["copied"] + counters["cloned"], counters["linked"]
    placed, other = (linked, copied) if folders.flags(profile) else (copied, linked)
    assert placed == len(first.data["steps"]) == len(files) and other == 0
    ort = files["onnxruntime.dll"]
    assert file_sha256(first.out / "onnxruntime.dll") == ort["sha256"]
    assert ort["sass"] is not None, "the build read no CUDA code"
    if profile in (GPU, GPU13):
        assert files["onnxruntime_providers_cuda.dll"]["sass"], "no SASS found in the provider"
    if profile == GPU13:  # issue 40: its exports and onnxruntime.dll's build information
        assert lock["cuda_ep"] == {"plugin_capable": True, "default_mode": "legacy"}

    again = win_builds.build_json(first.out, profile, *folders.flags(profile))
    counters = again["counters"]
    assert (counters["copied"], counters["cloned"], counters["linked"], counters["hashed"]) == (
        0,
        0,
        0,
        0,
    )
    assert counters["skipped"] == len(again["steps"]) == len(files)
    assert lock_of(first.out)["files"] == lock["files"]


@pytest.mark.parametrize("profile", PROFILES)
def test_link_hard_links_the_cache_and_clean_rebuilds_it_keeping_the_users_files(
    win_python: WinPython, win_builds: WinBuilds, profile: str, tmp_path: Path
) -> None:
    skip_unless_newest(win_python, profile)
    out = tmp_path / "linked"
    linked = win_builds.build_json(out, profile, "--link")
    files = files_of(lock_of(out))
    counters = linked["counters"]
    assert (counters["linked"], counters["copied"], counters["link_fallbacks"]) == (
        len(files),
        0,
        0,
    )
    cache = win_builds.cache(profile)
    for name, item in files.items():
        if item["kind"] == "bundled":
            assert os.path.samefile(out / name, extracted(cache, item)), name

    (out / "readme.txt").write_text("mine", encoding="utf-8")
    cleaned = win_builds.build_json(out, profile, "--link", "--clean")
    assert cleaned["counters"]["removed"] == len(files)
    assert cleaned["counters"]["linked"] == len(files)
    assert (out / "readme.txt").read_text(encoding="utf-8") == "mine"
    assert set(files_of(lock_of(out))) == on_disk(out) - {"readme.txt"} == set(files)


@pytest.mark.parametrize("profile", PROFILES)
def test_dry_run_json_shows_the_plan_and_writes_nothing(
    win_python: WinPython, win_builds: WinBuilds, folders: Folders, profile: str, tmp_path: Path
) -> None:
    skip_unless_newest(win_python, profile)
    out = tmp_path / "dry"
    data = win_builds.build_json(out, profile, "--dry-run")
    assert data["dry_run"] is True
    assert {step["action"] for step in data["steps"]} == {"copy"}
    assert not out.exists()
    shown = files_of(data["lock"])
    built = files_of(lock_of(folders.of(profile).out))
    assert {n: i["sha256"] for n, i in shown.items()} == {n: i["sha256"] for n, i in built.items()}


@pytest.mark.parametrize(
    ("profile", "suffix"),
    [
        pytest.param(CPU, ".zip", id="cpu-zip"),
        pytest.param(DIRECTML, ".zip", id="directml-zip"),
        pytest.param(CPU, ".7z", id="cpu-7z"),
    ],
)
def test_archive_holds_the_payload_and_audits_clean(
    win_python: WinPython, win_builds: WinBuilds, profile: str, suffix: str, tmp_path: Path
) -> None:
    """Packed from the small folders: a .zip of the 2.6 GB GPU folder took 700 s under Wine on
    2 busy cores, and .7z (LZMA2 at xz's preset 6, ~0.5 MB/s a core here) 36 s for the 15 MB
    CPU payload, 74 s for DirectML's 38 MB: so one .7z, on the newest version. The packing code
    is the same for any size (tests/test_archive.py streams large files on Linux)."""
    if suffix == ".7z" and win_python.minor != VERSIONS[-1]:
        pytest.skip(f".7z: {BUDGET}")
    out, archive = tmp_path / "dist", tmp_path / f"hello-1.0{suffix}"
    data = win_builds.build_json(out, profile, "--link", "--archive", winpath(archive))
    lock = lock_of(out)
    members = read_back(archive)  # the stdlib or py7zr, on Linux
    expected = {name: item["sha256"] for name, item in files_of(lock).items() if item["sha256"]}
    expected[LOCK_NAME] = file_sha256(out / LOCK_NAME)
    top = "hello-1.0/"
    assert {name: members[top + name] for name in expected} == expected
    assert data["archive"]["sha256"] == file_sha256(archive)

    audited = win_builds.bundle("audit", winpath(archive), "--json")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    report = json.loads(audited.stdout)
    assert report["archive"] == winpath(archive) and report["lock"] is not None


# --- audits -----------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_audit_with_run_html_and_junit_passes_and_the_loader_agrees(
    win_python: WinPython, win_builds: WinBuilds, folders: Folders, profile: str, tmp_path: Path
) -> None:
    """--run starts the app and loads each runtime-loaded DLL under Windows' own loader (here
    Wine's, reached through CreateProcess, with a job object around the tree)."""
    skip_unless_newest(win_python, profile)
    folder = folders.of(profile).out
    html, junit = tmp_path / "audit.html", tmp_path / "audit.xml"
    done = win_builds.bundle(
        "audit", winpath(folder), "--run", "--html", winpath(html), "--junit", winpath(junit),
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["error"] == 0
    proof = report["load_proof"]
    assert proof["agrees"] is True, proof
    runs = {run["target"]: run for run in proof["runs"]}
    assert runs["hello.exe"]["exit_code"] == 0, runs["hello.exe"]
    assert proof["missing"] == {"absent": [], "unusable": [], "cascades": [], "driver": []}
    text = html.read_text(encoding="utf-8")
    assert text.lstrip().lower().startswith("<!doctype html") and profile in text
    suites = ET.parse(junit).getroot()
    assert int(suites.get("failures", "0")) == 0 and int(suites.get("tests", "0")) > 0


@NEWEST_ONLY
@pytest.mark.parametrize("profile", PROFILES)
def test_audit_signatures_verifies_the_shipped_dlls(
    win_python: WinPython,
    folders: Folders,
    readme_python: ReadmePython,
    profile: str,
) -> None:
    """--signatures needs LIEF (the signatures extra), which the tier's interpreters lack and
    the README's install brings: this audit runs in that interpreter (readme_python)."""
    folder = folders.of(profile).out
    done = readme_python.bundle("audit", winpath(folder), "--signatures", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["signatures_checked"] is True
    assert not [f for f in report["findings"] if f["code"] in SIGNATURE_CODES], report["findings"]


# --- the rest ---------------------------------------------------------------------------------


def compile_setup(inno: InnoSetup, script: Path, output: Path) -> Path:
    """ISCC, with its one known Wine flake retried once (ISCC_WINE_FLAKE); the setup .exe."""
    compiled = inno.compile(script, output)
    if compiled.returncode != 0 and ISCC_WINE_FLAKE in compiled.stdout + compiled.stderr:
        compiled = inno.compile(script, output)
    return compiled.check().setup_exe


@NEWEST_ONLY
def test_render_iss_compiles_installs_and_the_setup_payload_audits_clean(
    win_python: WinPython, win_builds: WinBuilds, inno: InnoSetup, tmp_path: Path
) -> None:
    """The CPU payload (the GPU one is 2.6 GB to compress: tests/test_installer.py compiles it
    on Linux), rendered again from its lock under Windows, compiled by the real ISCC, installed
    silently into a path with blanks, parentheses, & and é; the installed folder is audited."""
    dist = tmp_path / "dist"
    win_builds.build_json(dist, CPU, "--link")
    built = (dist / "setup.iss").read_bytes()
    (dist / "setup.iss").unlink()
    rendered = win_builds.bundle("render", "iss", "--lock", winpath(dist / LOCK_NAME))
    assert rendered.returncode == 0, rendered.stderr
    assert (dist / "setup.iss").read_bytes() == built
    setup = compile_setup(inno, dist / "setup.iss", tmp_path / "output")

    folder = r"C:\Program Files\bundle test (x64)\héllo & co"
    installed = inno.install(setup, folder, log=tmp_path / "setup.log").check()
    app = inno.unix_path(folder)
    assert set(files_of(lock_of(dist))) <= on_disk(app), installed.log
    run = inno.run(app / "hello.exe")
    assert (run.returncode, run.stdout.strip(), run.missing) == (0, VERSION_LINE, ())
    # Inno Setup's own uninstaller beside the app (a 32-bit unins000.exe the lock does not
    # list) is the setup's, not the bundle's: where bundle-installed.txt says a setup installed
    # the folder, the audit leaves it out, with nothing to --ignore.
    audited = win_builds.bundle("audit", winpath(app), "--verify", "--json")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    report = json.loads(audited.stdout)
    assert report["hashes_verified"] is True and report["suppressed"] == []
    assert (app / "unins000.exe").is_file()
    assert not [f for f in report["findings"] if "unins000.exe" in f["files"]], report


@NEWEST_ONLY
def test_postbuild_cmd_run_by_cmd_copies_the_dlls_into_the_target(
    win_python: WinPython, win_builds: WinBuilds, tmp_path: Path
) -> None:
    """postbuild.cmd as a Visual Studio post-build event runs it: "$(OutDir)" with its trailing
    backslash, in a folder whose name has blanks, parentheses and &."""
    dist = tmp_path / "dist"
    win_builds.build_json(dist, CPU, "--link")
    target = tmp_path / "x64 (Release) & co"
    ran = Cmd(win_python.wine, tmp_path).run(dist / "postbuild.cmd", target_arg(target))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    dlls = {name: digest for name, digest in files_under(dist).items() if name.endswith(".dll")}
    assert files_under(target) == dlls and dlls


@NEWEST_ONLY
def test_msbuild_lays_out_the_folder_visual_studio_imports(
    win_python: WinPython,
    win_builds: WinBuilds,
    folders: Folders,
    replica: Replica,
    tmp_path: Path,
) -> None:
    """The GPU profile with ORT's release zip (a replica in its real layout, with the real
    DLLs: tests/support/replica.py) from a mirror folder, every other artifact from the
    Windows cache. What Visual Studio copies next to the app is what `bundle build` ships."""
    profile = replica_profile(tmp_path / "replica.toml", replica)
    cache = linked_cache(win_builds.cache(GPU), tmp_path / "cache", without=ORT_GPU_WHEEL_SHA256)
    out = tmp_path / "ort (x64) & co"
    args = [
        "msbuild", "--profile", winpath(profile), "--cache-dir", winpath(cache),
        "--out", winpath(out), "--mirror", winpath(replica.path.parent), "--link",
    ]  # fmt: skip
    done = win_builds.bundle(*args)
    assert done.returncode == 0, done.stderr
    for name in ("ort-bundle.props", "ort-bundle.targets"):
        assert (out / name).read_bytes().startswith(b"\xef\xbb\xbf<?xml"), name
    assert (out / "include" / "onnxruntime_c_api.h").is_file()
    assert (out / "lib" / "onnxruntime.lib").read_bytes() == replica.import_libraries[
        "onnxruntime.lib"
    ]
    laid_out = files_of(lock_of(out))
    bins = {p.name: laid_out[f"bin/{p.name}"]["sha256"] for p in (out / "bin").iterdir()}
    shipped = files_of(lock_of(folders.of(GPU).out))
    assert bins == {n: i["sha256"] for n, i in shipped.items() if n.endswith(".dll")}
    assert bins["onnxruntime.dll"] == file_sha256(out / "bin" / "onnxruntime.dll")
    again = win_builds.bundle(*args)
    assert again.returncode == 0, again.stderr
    assert "copied 0 (0 B), linked 0" in again.stdout and "hashed 0 files" in again.stdout


@NEWEST_ONLY
def test_fetch_verify_rehashes_the_cache_a_build_used(
    win_python: WinPython, win_builds: WinBuilds, folders: Folders
) -> None:
    folders.of(GPU)
    cache = win_builds.cache(GPU)
    done = win_builds.bundle(
        "fetch", "--profile", GPU, "--cache-dir", winpath(cache), "--mirror", winpath(mirror()),
        "--verify", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["artifacts"]
    assert items and all(item["cached"] for item in items)
    first = json.loads(win_builds.fetched[GPU].stdout)["artifacts"]
    assert {i["filename"]: i["sha256"] for i in items} == {
        i["filename"]: i["sha256"] for i in first
    }


@NEWEST_ONLY
def test_cache_list_and_clean_then_a_build_extracts_again(
    win_python: WinPython, win_builds: WinBuilds, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    common = ["--cache-dir", winpath(cache)]
    build = ["build", winpath(win_builds.app), "--profile", CPU, "--mirror", winpath(mirror())]
    build += common
    first = win_builds.bundle(*build, "--out", winpath(tmp_path / "one"))
    assert first.returncode == 0, first.stderr
    listing = win_builds.bundle("cache", "list", *common)
    assert listing.returncode == 0, listing.stderr
    ort = "onnxruntime-1.19.2-cp311-cp311-win_amd64.whl"
    assert ort in listing.stdout and "msvc_runtime-" in listing.stdout

    cleaned = win_builds.bundle("cache", "clean", *common)
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (cache / "extracted").exists() and any((cache / "blobs").rglob("*"))
    second = win_builds.bundle(*build, "--out", winpath(tmp_path / "two"))
    assert second.returncode == 0, second.stderr
    assert lock_of(tmp_path / "two")["files"] == lock_of(tmp_path / "one")["files"]

    everything = win_builds.bundle("cache", "clean", "--all", *common)
    assert everything.returncode == 0, everything.stderr
    assert not [p for p in (cache / "blobs").rglob("*") if p.is_file()]


@NEWEST_ONLY
def test_profiles_show_and_check_the_profile_a_build_used(
    win_python: WinPython, win_builds: WinBuilds, folders: Folders
) -> None:
    used = lock_of(folders.of(GPU).out)["profile"]
    listed = win_builds.bundle("profiles", "--json")
    assert listed.returncode == 0, listed.stderr
    assert set(PROFILES) <= {item["name"] for item in json.loads(listed.stdout)["profiles"]}
    assert listed.stdout == run_bundle("profiles", "--json").stdout  # what Linux says
    shown = win_builds.bundle("profiles", "show", used)
    assert shown.returncode == 0 and used in shown.stdout, shown.stderr
    checked = win_builds.bundle(
        "profiles", "check", used, "--cache-dir", winpath(win_builds.cache(GPU)), "--offline",
        "--json",
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    data = json.loads(checked.stdout)
    assert data["ok"] is True and len(data["scanned"]) == 21


@NEWEST_ONLY
def test_scan_and_deps_of_the_built_folder(
    win_python: WinPython, win_builds: WinBuilds, folders: Folders
) -> None:
    folder = folders.of(GPU).out
    scanned = win_builds.bundle("scan", winpath(folder / "cudnn64_9.dll"), "--json")
    assert scanned.returncode == 0, scanned.stderr
    loads = json.dumps(json.loads(scanned.stdout))
    for name in ("cudnn_graph64_9.dll", "cudnn_ops64_9.dll", "cudnn_cnn64_9.dll"):
        assert name in loads, name

    deps = win_builds.bundle(
        "deps", winpath(folder / "hello.exe"), "--profile", GPU, "--search", winpath(folder),
        "--why", "cudnn_ops64_9.dll",
    )  # fmt: skip
    assert deps.returncode == 0, deps.stdout + deps.stderr
    assert "cudnn64_9.dll -runtime-> cudnn_ops64_9.dll" in deps.stdout


# --- the same result as on Linux ----------------------------------------------------------------

# The lock file is written with LF line ends on every system (bundler/closure/lockfile.py). Fields
# allowed
# to differ between a Windows and a Linux build of the same inputs:
# - mtime_ns (null in both since issue 41: the times are in bundle.times.json; in an older lock,
#   of the files whose time is the file system's own, the app and bundle-doctor.exe):
#   Windows keeps file times in 100 ns ticks (FILETIME), Linux in nanoseconds, so Windows reads
#   the same file's time rounded down to 100 ns. The files taken from archives carry the
#   member's time (2 s resolution), the same on both.
# - digest: the SHA-256 of the lock's content, those times included.
# Everything else (names, kinds, hashes, sizes, versions, origins, members, reason chains,
# imports, SASS/PTX, loads, driver requirements, the tool's version) must be equal.
TICK_NS = 100


@pytest.fixture(scope="module")
def linux_gpu_lock(gpu_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Linux build of the same inputs: examples/hello, the GPU profile, the same wheels."""
    out = tmp_path_factory.mktemp("linux-gpu")
    done = linux_build(
        str(HELLO), "--profile", GPU, "--out", str(out), "--cache-dir", str(gpu_cache), "--link"
    )
    assert done.returncode == 0, done.stderr
    return lock_of(out)


def test_the_windows_lock_equals_the_linux_lock(
    folders: Folders, linux_gpu_lock: dict[str, Any]
) -> None:
    windows = lock_of(folders.of(GPU).out)
    linux = linux_gpu_lock
    assert b"\r" not in (folders.of(GPU).out / LOCK_NAME).read_bytes()  # LF, as on Linux
    assert sorted(files_of(windows)) == sorted(files_of(linux))
    assert len(windows["files"]) == 31
    for name, ours in files_of(windows).items():
        theirs = files_of(linux)[name]
        if ours["mtime_ns"] != theirs["mtime_ns"]:
            assert ours["mtime_ns"] == theirs["mtime_ns"] // TICK_NS * TICK_NS, name
            assert ours["artifact"] is None, f"{name}: an archive member's time differs"
        assert {**ours, "mtime_ns": None} == {**theirs, "mtime_ns": None}, name
    rest = {key: value for key, value in windows.items() if key not in ("files", "digest")}
    assert rest == {key: value for key, value in linux.items() if key not in ("files", "digest")}


# --- the README's install line ---------------------------------------------------------------


class ReadmePython(WinPython):
    """The newest CPython for Windows as a user has it after the README's install line:
    `python -m pip install -e ".[test]"` in the checkout, everything from PyPI. bundle runs
    from that install (BUNDLE_TEST_PYTHONPATH empty), never from the tier's path."""

    installed: subprocess.CompletedProcess[str] | None = None  # the install's output

    def bundle(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.python(
            "-m", "bundler", *args, env={"BUNDLE_TEST_PYTHONPATH": "", "BUNDLE_DEBUG": ""}
        )

    def script(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        """A console script pip installed into Scripts\\ (bundle.exe), run as a user does."""
        extra = self.extras({"BUNDLE_TEST_PYTHONPATH": "", "BUNDLE_DEBUG": ""})
        return self.wine.program(self.exe.parent / "Scripts" / name, *args, env=extra, timeout=600)


# The embeddable build's ._pth file makes CPython ignore PYTHONPATH, which python.org's
# regular installer honours; pip's build isolation hands the build backend (hatchling) to its
# subprocess through PYTHONPATH: a folder whose sitecustomize.py adds the build environment.
# (pip's default "virtual" isolation). Without this, `pip install -e .` fails in the
# embeddable build, on Windows itself as under Wine: "Cannot import build backend
# 'hatchling.build'". A property of the embeddable zip, not of bundle nor of Wine: appended to
# the copy's sitecustomize (after the tier's Wine routes), never to the tier's interpreters.
PYTHONPATH_ROUTE = """
# The README-install copy only (tests/test_windows_workflows.py): honour PYTHONPATH as the
# regular installer does, running a sitecustomize.py found there as CPython would have.
for _folder in [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p][::-1]:
    sys.path.insert(0, _folder)
    _custom = os.path.join(_folder, "sitecustomize.py")
    if os.path.isfile(_custom):
        with open(_custom, encoding="utf-8") as _source:
            exec(compile(_source.read(), _custom, "exec"), {"__name__": "_pythonpath_site"})
"""
KEPT = ("pip", "sitecustomize.py")  # what the copy keeps of the tier's site-packages
SITE_CUSTOMIZE = Path("Lib", "site-packages", "sitecustomize.py")


def readme_home(base: Path) -> Path:
    """A copy of the tier's interpreter with only pip and the Wine routes installed, cached
    beside it: the first install brings ~90 packages from PyPI (5 minutes under Wine, most of
    it unpacking ~10,000 files); later runs of the same line find them satisfied and rebuild
    the project alone (~40 s). The pip cache lies in the test cache too."""
    home = test_cache_dir() / "winpython" / f"readme-{base.parent.name}" / "python"
    marker = home.parent / ".base"
    stamp = (base.parent / ".complete").read_text(encoding="utf-8")
    home.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(home.parent.with_name(home.parent.name + ".lock")):
        if not marker.is_file() or marker.read_text(encoding="utf-8") != stamp:
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(base, home, ignore=shutil.ignore_patterns("__pycache__"))
            site = home / "Lib" / "site-packages"
            for entry in site.iterdir():
                if not entry.name.startswith(KEPT):
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            shutil.rmtree(home / "Scripts", ignore_errors=True)
            marker.write_text(stamp, encoding="utf-8")
        # The tier's routes as they are now (tools/testing/windows_python.py rewrites its own),
        # then ours.
        routes = (base / SITE_CUSTOMIZE).read_text(encoding="utf-8") + PYTHONPATH_ROUTE
        if (home / SITE_CUSTOMIZE).read_text(encoding="utf-8") != routes:
            (home / SITE_CUSTOMIZE).write_text(routes, encoding="utf-8")
    return home


@pytest.fixture(scope="session")
def readme_python(win_python: WinPython) -> ReadmePython:
    """The README's install line run in the copy (see readme_home); its output is kept for
    the acceptance test."""
    newest = VERSIONS[-1]
    assert win_python.minor == newest, "the README install runs on the newest version alone"
    python = ReadmePython(newest, readme_home(win_python.exe.parent), win_python.wine)
    pip_cache = test_cache_dir() / "pip-windows"
    done = python.python(
        "-m", "pip", "install", "-e", ".[test]",
        cwd=REPO,
        env={"BUNDLE_TEST_PYTHONPATH": "", "PIP_CACHE_DIR": winpath(pip_cache),
             "PIP_FIND_LINKS": "", "PIP_NO_WARN_SCRIPT_LOCATION": "1"},
        timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"pip install -e .[test] under Windows:\n{done.stdout[-3000:]}\n{done.stderr}"
    )
    python.installed = done
    return python


@NEWEST_ONLY
def test_the_readme_install_then_the_gpu_build_and_its_audit_exit_0(
    win_python: WinPython, win_builds: WinBuilds, readme_python: ReadmePython, tmp_path: Path
) -> None:
    """The acceptance of issue 27: the README's install line, then the GPU build of
    examples/hello with the mirror, then `bundle audit`, exit 0 (with the signatures the
    [test] extra lets it check). The build hard-links from the cache (--link): the copying
    build of the same profile under the same Python is `folders`', and a third 2.6 GB copy
    would sit on the disk's low point of the run (benchmarks/README.md, issue 38)."""
    assert readme_python.installed is not None
    assert "Successfully installed" in readme_python.installed.stdout
    where = readme_python.python(
        "-c", "import bundler, lief; print(bundler.__file__)", env={"BUNDLE_TEST_PYTHONPATH": ""}
    )
    assert where.stdout.strip().lower() == winpath(REPO / "bundler" / "__init__.py").lower()
    out = tmp_path / "dist"
    built = readme_python.script(
        "bundle.exe", "build", winpath(HELLO), "--profile", GPU, "--out", winpath(out),
        "--mirror", winpath(mirror()), "--cache-dir", winpath(win_builds.cache(GPU)), "--link",
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert len(files_of(lock_of(out))["onnxruntime_providers_cuda.dll"]["sass"]) == 6
    audited = readme_python.script("bundle.exe", "audit", winpath(out), "--signatures")
    assert audited.returncode == 0, audited.stdout + audited.stderr
