"""The catalogue of bad inputs, run through the CLI as a user would.

Each row is one input a user can get wrong. The row says which command meets it, the exit code
(README, "Exit codes") and the key words of the one-line message: which file, what is wrong,
what to do. Every row also checks that stderr holds that one line and no traceback, that the
output folder is exactly as it was before, and that the download cache was not touched.

Rows prepare their files in a fresh workspace. The default profile is a small custom one whose
only artifact is a local folder of synthetic DLLs (a `kind = "dir"` source), so a build that
wrongly gets past a bad input still finishes offline and fast instead of downloading.

Network, archive and disk rows serve their bytes from a real HTTP server on 127.0.0.1: a row
lists what it `needs` from the test's fixtures ("http": the `http_server` of
tests/support/httpserver.py, reachable as `ws.server`), and its `also` check asserts any further
effect
(a file outside the output folder left alone, a partial download removed, ...). Short
timeouts and one retry come from the download layer's own environment variables
(BUNDLE_HTTP_TIMEOUT, _RETRIES, _BACKOFF). Every row, whatever it expects, also checks that the
cache holds no file under a final name that is not what that name promises (a blob whose
SHA-256 is not its name, an extracted tree without its `.complete` marker). Interruption and
concurrency have their own files (tests/test_interrupt.py, tests/test_concurrency.py).

A row that fails today because of code outside the PE reader and the profile/config loaders is
kept, marked xfail(strict=True) with `raises=` the one check that fails, so that every other
check of the row still fails the test for real, and a fix makes the row pass (strict: then the
mark must go).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import struct
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bundler.errors import ExitCode
from tests.support.httpserver import Handler, HttpServer
from tests.support.pefactory import (
    DIR_DELAY_IMPORT,
    DIR_IMPORT,
    PEPatch,
    PESpec,
    build_pe,
    write_pe,
)
from tests.support.profiles import artifact, profile, source
from tests.support.runs import run_bundle
from tests.support.skips import require

DEPS_ENV = "BUNDLE_TEST_DEPS"
OUTSIDE = 0x7FFF0000  # an RVA past every section of the synthetic images
SHIPPED_X64 = "ort-1.19.2-gpu-cuda12"

LOCAL_ORT = artifact(
    "onnxruntime", "1.19.2", ["onnxruntime.dll"], source("dir", env=DEPS_ENV, subdir=".")
)
PROFILE = "# A one-artifact profile for these tests: onnxruntime.dll from a local folder.\n" + (
    profile("bad-inputs", ["onnxruntime.dll"], LOCAL_ORT)
)


# --- the workspace a row prepares ----------------------------------------------------------------


@dataclass
class Workspace:
    """Files of one row, all under `root`. `exe` may be moved by a row (see `place_exe`)."""

    root: Path
    server: HttpServer | None = None
    exe: Path = field(init=False)
    url: str = ""  # what a network row's profile downloads
    sha256: str = ""  # and its pin
    cleanups: list[Callable[[], None]] = field(default_factory=list)  # e.g. unmount

    def __post_init__(self) -> None:
        self.exe = self.root / "app" / "app.exe"
        write_pe(
            self.deps / "onnxruntime.dll", imports=("KERNEL32.dll",), file_version=(1, 19, 2, 0)
        )
        self.profile.write_text(PROFILE)

    @property
    def deps(self) -> Path:
        return self.root / "deps"

    @property
    def profile(self) -> Path:
        return self.root / "profile.toml"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def lock(self) -> Path:
        return self.out / "bundle.lock.json"

    @property
    def config(self) -> Path:
        return self.exe.parent / "bundle.toml"

    def words(self) -> dict[str, str]:
        """What a row's expected key words may name: {exe}, {profile}, ..."""
        names = ("exe", "deps", "profile", "out", "cache", "lock", "config", "root", "url")
        return {name: str(getattr(self, name)) for name in (*names, "sha256")}

    def build(self, *extra: str, exe: Path | None = None, profile: str | None = None) -> list[str]:
        """`bundle build` into the row's output folder and cache, never onto the network."""
        return [
            "build",
            str(exe or self.exe),
            "--profile",
            profile or str(self.profile),
            "--out",
            str(self.out),
            "--cache-dir",
            str(self.cache),
            "--offline",
            *extra,
        ]

    def app(self, data: bytes | None = None, machine: str = "x64") -> Path:
        """Write the app exe (default: a healthy one importing onnxruntime.dll)."""
        if data is None:
            data = build_pe(PESpec(machine=machine, dll=False, imports=("onnxruntime.dll",)))
        self.exe.parent.mkdir(parents=True, exist_ok=True)
        self.exe.write_bytes(data)
        return self.exe

    def damaged_app(self, damage: Callable[[PEPatch], None]) -> Path:
        image = PEPatch(healthy_exe())
        damage(image)
        return self.app(image.to_bytes())

    def previous_build(self) -> dict[str, object]:
        """A successful build into `out` (with a cache of its own), its lock as JSON."""
        self.app()
        first = self.build()
        first[first.index("--cache-dir") + 1] = str(self.root / "setup-cache")
        result = run_bundle(*first)
        assert result.returncode == 0, result.stderr
        lock: dict[str, object] = json.loads(self.lock.read_text())
        return lock

    def edit_lock(self, edit: Callable[[dict[str, object]], object]) -> None:
        lock = self.previous_build()
        edit(lock)
        self.lock.write_text(json.dumps(lock, indent=2))


def healthy_exe() -> bytes:
    """The app every damaged-exe row starts from: two imports and two delay imports."""
    return build_pe(
        PESpec(
            dll=False,
            imports=("onnxruntime.dll", "KERNEL32.dll"),
            delay_imports=("DirectML.dll", "dxgi.dll"),
        )
    )


# --- what a row checks, each check its own failure type (xfail raises= names one) ---------------


class WrongExit(AssertionError):
    pass


class WrongMessage(AssertionError):
    pass


class OutputWritten(AssertionError):
    pass


class CacheWritten(AssertionError):
    pass


# --- rows --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One bad input. `setup` prepares the workspace and returns the command line."""

    id: str
    setup: Callable[[Workspace], list[str]]
    exit_code: ExitCode
    words: tuple[str, ...]  # key words of the message; {exe}, {profile}, ... are filled in
    needs: frozenset[str] = frozenset()  # fixtures beyond the workspace: "http"
    also: Callable[[Workspace], None] | None = None  # a further check after the run
    expect_files: tuple[str, ...] = ()  # for a good input: what the output folder must hold
    # False where the input can only be judged after the artifacts are in the cache
    cache_untouched: bool = True
    marks: tuple[pytest.MarkDecorator, ...] = ()


def terminator_copy(table: int) -> Callable[[PEPatch], None]:
    """Overwrite a table's all-zero terminator with its last entry (the delay table is the
    last thing in .rdata, so for the import table the delay directory is dropped first)."""
    size = 32 if table == DIR_DELAY_IMPORT else 20

    def damage(image: PEPatch) -> None:
        *entries, terminator = image.descriptors(table)
        image.write(terminator, image.read(entries[-1], size))
        if table == DIR_IMPORT:
            image.set_section(
                ".rdata", virtual_size=terminator + size - image.section(".rdata").rva
            )
            image.set_directory(DIR_DELAY_IMPORT, 0, 0)

    return damage


def name_at_end_of_file(image: PEPatch) -> None:
    last = image.sections[-1]
    image.set_section(last.name, virtual_size=last.raw_size)
    image.write(last.rva + last.raw_size - 6, b"abcdef")
    image.write_u32(image.descriptors(DIR_IMPORT)[0] + 12, last.rva + last.raw_size - 6)


def zero_section_header(image: PEPatch) -> None:
    start = image.sections[1].header_offset
    image.data[start : start + 40] = bytes(40)


def past_the_data(image: PEPatch) -> None:
    rdata = image.section(".rdata")
    image.set_section(".rdata", virtual_size=0x4000)
    image.set_directory(DIR_IMPORT, rdata.rva + rdata.raw_size + 0x100)


def profile_with(text: str) -> Callable[[Workspace], list[str]]:
    """A row whose profile is `text` (a full TOML document) and whose exe is healthy."""

    def setup(ws: Workspace) -> list[str]:
        ws.app()
        ws.profile.write_text(text)
        return ws.build()

    return setup


def url_artifact(pin: str, url: str = "https://example.invalid/pinned.zip") -> str:
    """PROFILE and a second artifact from `url`, its source ending in the raw line(s) `pin`."""
    return PROFILE + artifact("pinned", "1.0", ["pinned.dll"], source("url", url=url)) + pin + "\n"


def config_with(text: str) -> Callable[[Workspace], list[str]]:
    """A row whose settings come from bundle.toml beside the exe: `bundle build --config`."""

    def setup(ws: Workspace) -> list[str]:
        ws.app()
        ws.config.write_text(text.format(profile=ws.profile.as_posix()))
        args = ws.build("--config", str(ws.config))
        del args[1]  # the exe comes from bundle.toml
        return args

    return setup


def unicode_path(ws: Workspace) -> None:
    ws.exe = ws.root / "my app (x64)" / "Ünïcødé 名前" / "app.exe"


def unicode_path_damaged(ws: Workspace) -> list[str]:
    unicode_path(ws)
    return ws.build(exe=ws.damaged_app(lambda i: i.set_directory(DIR_IMPORT, OUTSIDE)))


def unicode_path_healthy(ws: Workspace) -> list[str]:
    unicode_path(ws)
    return ws.build(exe=ws.app())


def missing_search_folder(ws: Workspace) -> list[str]:
    ws.app()
    return ws.build("--search", str(ws.root / "nowhere"))


def escaping_lock_entry(ws: Workspace) -> list[str]:
    precious = ws.root / "precious.dll"
    precious.write_bytes(b"not bundle's file")

    def add_entry(lock: dict[str, object]) -> None:
        files = lock["files"]
        assert isinstance(files, list)
        files.append({**files[-1], "name": "../precious.dll", "size": precious.stat().st_size})

    ws.edit_lock(add_entry)
    return ws.build("--clean")


def precious_is_kept(ws: Workspace) -> None:
    assert (ws.root / "precious.dll").read_bytes() == b"not bundle's file"


def edit_first_file(key: str, value: object) -> Callable[[dict[str, object]], None]:
    def edit(lock: dict[str, object]) -> None:
        files = lock["files"]
        assert isinstance(files, list)
        files[0][key] = value

    return edit


def lock_row(edit: Callable[[dict[str, object]], object]) -> Callable[[Workspace], list[str]]:
    def setup(ws: Workspace) -> list[str]:
        ws.edit_lock(edit)
        return ws.build()

    return setup


def broken_json(ws: Workspace) -> list[str]:
    ws.previous_build()
    text = ws.lock.read_text()
    ws.lock.write_text(text.replace('"profile":', '"profile"', 1))  # a lost colon
    return ws.build()


def corrupt_search_dll(ws: Workspace) -> list[str]:
    ws.app()
    image = PEPatch(build_pe(PESpec(imports=("KERNEL32.dll",), file_version=(1, 19, 2, 0))))
    image.set_directory(DIR_IMPORT, OUTSIDE)
    (ws.root / "mine").mkdir()
    (ws.root / "mine" / "onnxruntime.dll").write_bytes(image.to_bytes())
    return ws.build("--search", str(ws.root / "mine"))


# --- rows served over HTTP: the network, the archive, the disk -----------------------------------

ARCHIVE_PATH = "/dl/onnxruntime-1.19.2.zip"
DLL_MEMBER = "ort/bin/onnxruntime.dll"
HTTP_ENV = {
    "BUNDLE_HTTP_TIMEOUT": "1",
    "BUNDLE_HTTP_RETRIES": "1",
    "BUNDLE_HTTP_BACKOFF": "0.05",
    "NO_PROXY": "127.0.0.1",  # the server is on loopback, whatever proxy the machine has
}


def ort_dll(padding: int = 0) -> bytes:
    spec = PESpec(imports=("KERNEL32.dll",), file_version=(1, 19, 2, 0), padding=padding)
    return build_pe(spec)


def zip_of(members: dict[str, bytes], symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, (2024, 9, 4, 12, 0, 0)), data)
        if symlink:
            info = zipfile.ZipInfo(symlink, (2024, 9, 4, 12, 0, 0))
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "../../../etc/passwd")
    return buffer.getvalue()


def good_zip() -> bytes:
    return zip_of({DLL_MEMBER: ort_dll(), "ort/LICENSE": b"MIT"})


def pin_to(ws: Workspace, archive: bytes) -> list[str]:
    """Pin the profile's artifact to `archive` and return an online `bundle build` whose
    mirror is the row's server. Profiles take only https:// URLs, so the pinned URL is
    unreachable and the bytes come from the mirror on loopback, allowed by --allow-http; the
    mirror serves them under the pinned file name, ARCHIVE_PATH."""
    assert ws.server is not None, "a network row needs={'http'}"
    ws.url, ws.sha256 = ws.server.url(ARCHIVE_PATH), hashlib.sha256(archive).hexdigest()
    pinned = f"https://downloads.invalid{ARCHIVE_PATH}"
    zip_source = source("url", url=pinned, sha256=ws.sha256, size=len(archive))
    ort = artifact("onnxruntime", "1.19.2", ["onnxruntime.dll"], zip_source)
    ws.profile.write_text(
        "# onnxruntime.dll from a zip on the test's HTTP server, pinned.\n"
        + profile("bad-inputs-url", ["onnxruntime.dll"], ort)
    )
    ws.app()
    args = ws.build(*mirror_args(ws))
    args.remove("--offline")
    return args


def mirror_args(ws: Workspace) -> list[str]:
    assert ws.server is not None
    return ["--mirror", ws.server.url(ARCHIVE_PATH.rsplit("/", 1)[0]), "--allow-http"]


def served(
    serve: Callable[[HttpServer, bytes], None], pinned: Callable[[], bytes] = good_zip
) -> Callable[[Workspace], list[str]]:
    """A row whose profile pins `pinned()` and whose server does `serve` with those bytes."""

    def setup(ws: Workspace) -> list[str]:
        archive = pinned()
        args = pin_to(ws, archive)
        assert ws.server is not None
        serve(ws.server, archive)
        return args

    return setup


def hostile(archive: Callable[[], bytes]) -> Callable[[Workspace], list[str]]:
    """A row whose server serves exactly the pinned bytes, and those bytes are a bad archive:
    the download is verified, stored, and the extraction must refuse it."""
    return served(lambda server, data: server.serve_bytes(ARCHIVE_PATH, data), archive)


def cut_every_time(server: HttpServer, data: bytes) -> None:
    """Every answer announces the whole file and hangs up after 100 bytes (no Range)."""

    def behaviour(handler: Handler, _n: int) -> None:
        handler.send_bytes(data, ranges=False, cut_after=100)

    server.route(ARCHIVE_PATH, behaviour)


def other_bytes_same_size(server: HttpServer, data: bytes) -> None:
    server.serve_bytes(ARCHIVE_PATH, data[:-1] + bytes([data[-1] ^ 0xFF]))


def zip_bomb() -> bytes:
    """A member whose headers declare 1 MiB but whose deflate stream inflates to 8 MiB: within
    deflate's possible ratio, so only counting the inflated bytes catches it."""
    archive = bytearray(zip_of({DLL_MEMBER: ort_dll() + bytes(8 << 20)}))
    info = zipfile.ZipFile(io.BytesIO(bytes(archive))).getinfo(DLL_MEMBER)
    declared = struct.pack("<L", 1 << 20)
    archive[info.header_offset + 22 : info.header_offset + 26] = declared  # local header
    central = archive.index(b"PK\x01\x02")
    archive[central + 24 : central + 28] = declared  # central directory entry
    return bytes(archive)


def corrupt_central_directory() -> bytes:
    archive = bytearray(good_zip())
    central = archive.index(b"PK\x01\x02")
    archive[central : central + 4] = b"XXXX"
    return bytes(archive)


def sevenzip_bad_crc() -> bytes:
    """A 7z whose members are stored (copy filter), one data byte flipped: the headers are
    intact, the member's CRC-32 is not."""
    import py7zr

    buffer = io.BytesIO()
    with py7zr.SevenZipFile(buffer, "w", filters=[{"id": py7zr.FILTER_COPY}]) as archive:
        archive.writestr(ort_dll(), DLL_MEMBER)
    data = bytearray(buffer.getvalue())
    data[32 + 200] ^= 0xFF  # the packed streams start right after the 32-byte signature header
    return bytes(data)


def mount_tmpfs(ws: Workspace, options: str, folder: Path | None = None) -> None:
    """The output folder (or `folder`) on its own tmpfs (we run as root in CI: chmod stops
    nobody)."""
    where = folder or ws.out
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    require(mounted.returncode == 0, f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    ws.cleanups.append(lambda: subprocess.run(["umount", str(where)], check=True))


def cache_on_tmpfs(options: str, archive: Callable[[], bytes]) -> Callable[[Workspace], list[str]]:
    """A network row whose cache folder is its own tmpfs mounted with `options`."""

    def setup(ws: Workspace) -> list[str]:
        mount_tmpfs(ws, options, ws.cache)
        return hostile(archive)(ws)

    return setup


def compressible_zip() -> bytes:
    """A few kB that inflate to 3 MiB (the DLL ends in zeros), deflated."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in {DLL_MEMBER: ort_dll(padding=3 << 20), "ort/LICENSE": b"MIT"}.items():
            info = zipfile.ZipInfo(name, (2024, 9, 4, 12, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    assert len(buffer.getvalue()) < 64 << 10
    return buffer.getvalue()


def nothing_left_in_the_cache(ws: Workspace) -> None:
    """No partial tree, no temporary file, no blob without its check."""
    no_extracted_tree(ws)
    assert not list((ws.cache / "tmp").iterdir()) if (ws.cache / "tmp").exists() else True


def read_only_output(ws: Workspace) -> list[str]:
    mount_tmpfs(ws, "ro,size=1m")
    ws.app()
    return ws.build()


def disk_fills_up(ws: Workspace) -> list[str]:
    """A 1 MiB output folder and a 3 MiB DLL: the copy runs out of space part way."""
    mount_tmpfs(ws, "size=1m")
    (ws.deps / "onnxruntime.dll").write_bytes(ort_dll(padding=3 << 20))
    ws.app()
    return ws.build()


def no_extracted_tree(ws: Workspace) -> None:
    extracted = ws.cache / "extracted"
    assert not extracted.exists() or not list(extracted.iterdir()), list(extracted.iterdir())
    assert not list(ws.root.rglob("evil.dll")), "a member was written outside its tree"


def no_download_kept(ws: Workspace) -> None:
    """Bytes known to be wrong are neither stored nor kept for resuming."""
    for folder in ("blobs/sha256", "tmp"):
        path = ws.cache / folder
        assert not path.exists() or not list(path.iterdir()), list(path.iterdir())


def partial_kept_for_resume(ws: Workspace) -> None:
    """A network failure keeps the bytes received under a temp name, never a final one."""
    assert not (ws.cache / "blobs" / "sha256" / ws.sha256).exists()
    (part,) = (ws.cache / "tmp").iterdir()
    assert part.name == f"{ws.sha256}.part" and part.stat().st_size > 0


def requests_made(count: int) -> Callable[[Workspace], None]:
    def check(ws: Workspace) -> None:
        assert ws.server is not None
        got = ws.server.requests_for(ARCHIVE_PATH)
        assert len(got) == count, got

    return check


def flipped_cache_entry(*extra: str) -> Callable[[Workspace], list[str]]:
    """`bundle fetch --verify` on a cache whose blob has one byte flipped (same size: only a
    full re-hash can tell)."""

    def setup(ws: Workspace) -> list[str]:
        archive = good_zip()
        pin_to(ws, archive)
        assert ws.server is not None
        ws.server.serve_bytes(ARCHIVE_PATH, archive)
        args = ["fetch", "--profile", str(ws.profile), "--cache-dir", str(ws.cache)]
        first = run_bundle(*args, *mirror_args(ws))
        assert first.returncode == 0, first.stderr
        blob = ws.cache / "blobs" / "sha256" / ws.sha256
        damaged = bytearray(blob.read_bytes())
        damaged[len(damaged) // 2] ^= 0x01
        blob.write_bytes(bytes(damaged))
        mirror = mirror_args(ws)[1]
        return [*args, "--verify", *(arg.replace("{mirror}", mirror) for arg in extra)]

    return setup


def cache_entry_replaced(ws: Workspace) -> None:
    blob = ws.cache / "blobs" / "sha256" / ws.sha256
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == ws.sha256
    requests_made(2)(ws)  # the first fetch, and the replacement


def cache_entry_removed(ws: Workspace) -> None:
    assert not (ws.cache / "blobs" / "sha256" / ws.sha256).exists()
    requests_made(1)(ws)  # --offline: only the first fetch went to the server


CASES = [
    # --- the exe -------------------------------------------------------------------------------
    Case(
        "exe-not-a-pe-file",
        lambda ws: ws.build(exe=ws.app(b"#!/bin/sh\necho this is no Windows program\n")),
        ExitCode.INPUT,
        ("{exe}: not a valid PE file", "right file", "copy, download or build the file again"),
    ),
    Case(
        "exe-empty",
        lambda ws: ws.build(exe=ws.app(b"")),
        ExitCode.INPUT,
        ("{exe}: not a valid PE file (the file is empty)", "build the file again"),
    ),
    Case(
        "exe-headers-cut",
        lambda ws: ws.build(exe=ws.app(healthy_exe()[:0x100])),
        ExitCode.INPUT,
        ("{exe}: truncated PE file", "headers end at byte", "copy or download it again"),
    ),
    Case(
        "exe-section-cut",
        lambda ws: ws.build(exe=ws.app(healthy_exe()[:-300])),
        ExitCode.INPUT,
        ("{exe}: truncated PE file", "section .rdata ends at byte", "copy or download it again"),
    ),
    Case(
        "exe-certificate-cut",
        lambda ws: ws.build(
            exe=ws.app(build_pe(PESpec(dll=False, imports=("onnxruntime.dll",), signed=True))[:-8])
        ),
        ExitCode.INPUT,
        ("{exe}: truncated PE file", "certificate table", "copy or download it again"),
    ),
    Case(
        "exe-import-directory-outside-the-file",  # the issue's own case
        lambda ws: ws.build(exe=ws.damaged_app(lambda i: i.set_directory(DIR_IMPORT, OUTSIDE))),
        ExitCode.INPUT,
        (
            "{exe}: corrupt PE file",
            "the import directory (RVA 0x7fff0000) points outside every section",
            "build the file again",
        ),
    ),
    Case(
        "exe-import-directory-past-the-data",
        lambda ws: ws.build(exe=ws.damaged_app(past_the_data)),
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "import directory", "past the data of section .rdata"),
    ),
    Case(
        "exe-delay-import-directory-outside",
        lambda ws: ws.build(
            exe=ws.damaged_app(lambda i: i.set_directory(DIR_DELAY_IMPORT, OUTSIDE))
        ),
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "the delay-import directory (RVA 0x7fff0000) points outside"),
    ),
    Case(
        "exe-import-chain-without-terminator",
        lambda ws: ws.build(exe=ws.damaged_app(terminator_copy(DIR_IMPORT))),
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "the import directory has no terminating entry"),
    ),
    Case(
        "exe-delay-chain-without-terminator",
        lambda ws: ws.build(exe=ws.damaged_app(terminator_copy(DIR_DELAY_IMPORT))),
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "the delay-import directory has no terminating entry"),
    ),
    Case(
        "exe-dll-name-runs-off-the-file",
        lambda ws: ws.build(exe=ws.damaged_app(name_at_end_of_file)),
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "DLL name of entry 1 of the import directory runs off"),
    ),
    Case(
        "exe-dll-name-outside",
        lambda ws: ws.build(
            exe=ws.damaged_app(lambda i: i.write_u32(i.descriptors(DIR_IMPORT)[1] + 12, OUTSIDE))
        ),
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "DLL name of entry 2 of the import directory", "outside"),
    ),
    Case(
        "exe-section-header-zeroed",
        lambda ws: ws.build(exe=ws.damaged_app(zero_section_header)),
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "section header 2 of 3 is damaged"),
    ),
    Case(
        "exe-is-a-folder",
        lambda ws: ws.build(exe=ws.root),
        ExitCode.INPUT,
        ("{root}: is a folder, not a file", "give the path of the file"),
    ),
    Case(
        "exe-does-not-exist",
        lambda ws: ws.build(),
        ExitCode.INPUT,
        ("{exe}: does not exist", "check the path"),
    ),
    Case(
        "exe-x86-with-x64-profile",
        lambda ws: ws.build(exe=ws.app(machine="x86"), profile=SHIPPED_X64),
        ExitCode.MACHINE,
        (
            "{exe}: built for x86",
            f"profile '{SHIPPED_X64}' targets x64",
            "build the app for x64: no profile of bundle targets x86",
        ),
    ),
    Case(
        "exe-arm64-with-x64-profile",
        lambda ws: ws.build(exe=ws.app(machine="arm64"), profile=SHIPPED_X64),
        ExitCode.MACHINE,
        ("{exe}: built for arm64", "targets x64", "build the app for x64"),
    ),
    Case(
        "exe-path-with-spaces-and-non-ascii-damaged",
        unicode_path_damaged,
        ExitCode.INPUT,
        ("{exe}: corrupt PE file", "import directory"),
    ),
    Case(
        "exe-path-with-spaces-and-non-ascii-builds",  # a good input that tools often break on
        unicode_path_healthy,
        ExitCode.OK,
        (),
        expect_files=("app.exe", "onnxruntime.dll", "bundle.lock.json"),
    ),
    # --- DLLs the build would take from a --search folder --------------------------------------
    Case(
        "search-folder-with-a-corrupt-dll",
        corrupt_search_dll,
        ExitCode.INPUT,
        ("{root}/mine/onnxruntime.dll: corrupt PE file", "import directory"),
        cache_untouched=False,  # the closure, and so this candidate, comes after acquiring
    ),
    Case(
        "search-folder-does-not-exist",
        missing_search_folder,
        ExitCode.INPUT,
        ("--search {root}/nowhere: no such folder",),
    ),
    # --- the profile -----------------------------------------------------------------------------
    Case(
        "profile-unknown",
        lambda ws: ws.build(exe=ws.app(), profile="ort-9.9.9-quantum"),
        ExitCode.PROFILE,
        ("unknown profile 'ort-9.9.9-quantum'", "closest releases", "bundle profiles lists all"),
    ),
    Case(
        "profile-toml-syntax-error",
        profile_with(PROFILE.replace('name = "bad-inputs"', "name = bad inputs")),
        ExitCode.PROFILE,
        ("{profile}: invalid TOML", "line 3"),
    ),
    Case(
        "profile-newer-schema",
        profile_with(PROFILE.replace("schema_version = 1", "schema_version = 2")),
        ExitCode.PROFILE,
        ("{profile}: schema_version 2 is not supported", "upgrade bundle"),
    ),
    Case(
        "profile-unknown-key",
        profile_with(PROFILE.replace('architecture = "x64"', 'architecture = "x64"\narch = "x64"')),
        ExitCode.PROFILE,
        ("{profile}: unknown key(s): arch",),
    ),
    Case(
        "profile-bad-sha256",
        profile_with(url_artifact('sha256 = "C04C6342B9E351D2EC7EBD84CE08F3EA"')),
        ExitCode.PROFILE,
        ("{profile} [artifacts#2] [sources#1]: key 'sha256' must be 64 lower-case hex digits",),
    ),
    Case(
        "profile-artifact-without-a-pin",
        profile_with(url_artifact("size = 1234")),
        ExitCode.PROFILE,
        ("{profile} [artifacts#2] [sources#1]: key 'sha256' is required",),
    ),
    Case(
        "profile-artifact-without-sources",
        profile_with(PROFILE.split("[[artifacts.sources]]")[0] + "sources = []\n"),
        ExitCode.PROFILE,
        ("{profile} [artifacts#1]: key 'sources' is empty", "sha256"),
    ),
    Case(
        "profile-plain-http-url",
        profile_with(url_artifact(f'sha256 = "{"0" * 64}"', url="http://example.invalid/a.zip")),
        ExitCode.PROFILE,
        ("{profile} [artifacts#2] [sources#1]: key 'url' must be an https:// URL",),
    ),
    Case(
        "profile-negative-size",
        profile_with(url_artifact(f'sha256 = "{"0" * 64}"\nsize = -1')),
        ExitCode.PROFILE,
        ("{profile} [artifacts#2] [sources#1]: key 'size'", "> 0"),
    ),
    # --- bundle.toml -----------------------------------------------------------------------------
    Case(
        "config-unknown-key",
        config_with('[build]\nexe = "app.exe"\nprofile = "{profile}"\nprofle = "x"\n'),
        ExitCode.CONFIG,
        ("{config} [build]: unknown key(s): profle",),
    ),
    Case(
        "config-unknown-table",
        config_with(
            '[build]\nexe = "app.exe"\nprofile = "{profile}"\n[instaler]\nshortcut = true\n'
        ),
        ExitCode.CONFIG,
        ("{config}: unknown key(s): instaler",),
    ),
    Case(
        "config-wrong-type",
        config_with('[build]\nexe = "app.exe"\nprofile = "{profile}"\nlink = "yes"\n'),
        ExitCode.CONFIG,
        ("{config} [build]: key 'link' must be a bool, not str",),
    ),
    Case(
        "config-toml-syntax-error",
        config_with('[build]\nexe = "app.exe"\nprofile = "{profile}"\nsbom = \n'),
        ExitCode.CONFIG,
        ("{config}: invalid TOML", "line 4"),
    ),
    # --- the lock file of an earlier build -------------------------------------------------------
    Case(
        "lock-newer-schema",
        lock_row(lambda lock: lock.update(schema_version=3)),
        ExitCode.PLAN,
        ("{lock}: lock schema_version 3", "delete it"),
    ),
    Case(
        "lock-edited-into-invalid-json",
        broken_json,
        ExitCode.PLAN,
        ("{lock}: not a valid bundle lock file", "line 3", "delete it"),
    ),
    Case(
        "lock-edited-unknown-field",
        lock_row(edit_first_file("colour", "red")),
        ExitCode.PLAN,
        ("{lock}: files[1]", "unknown key 'colour'", "delete it"),
    ),
    Case(
        # the next build trusts the lock's hash of a file unchanged in size and time: an
        # edited hash must be refused, not copied into the new lock
        "lock-edited-hash",
        lock_row(edit_first_file("sha256", "0" * 64)),
        ExitCode.PLAN,
        ("{lock}", "edited by hand", "delete it"),
    ),
    Case(
        # --clean deletes what the lock lists: a name outside the folder must never get there
        "lock-entry-outside-the-output-folder",
        escaping_lock_entry,
        ExitCode.PLAN,
        ("{lock}", "'../precious.dll'", "outside the output folder"),
        also=precious_is_kept,
    ),
    # --- the network (a real server on 127.0.0.1) ---------------------------------------------
    Case(
        "url-http-404",
        served(lambda server, data: server.status(ARCHIVE_PATH, 404)),
        ExitCode.FETCH,
        ("artifact onnxruntime 1.19.2", "{url}: HTTP 404", "check the URL", "--mirror DIR"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_download_kept,
    ),
    Case(
        "url-http-500-forever",
        served(lambda server, data: server.status(ARCHIVE_PATH, 500)),
        ExitCode.FETCH,
        ("download of {url} failed after 2 attempts", "HTTP 500", "try again later"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=requests_made(2),
    ),
    Case(
        "url-stalled-server",
        served(lambda server, data: server.stall(ARCHIVE_PATH, data, after=100, seconds=4)),
        ExitCode.FETCH,
        (
            "download of {url} failed after 2 attempts",
            "the server stopped sending data for 1 s",
            "try again later or use a mirror",
        ),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_download_kept,
    ),
    Case(
        "url-wrong-hash",
        served(other_bytes_same_size),
        ExitCode.INTEGRITY,
        ("{url}: SHA-256 mismatch, expected {sha256}", "the file was discarded", "mirror"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_download_kept,
    ),
    Case(
        "url-truncated-file-on-the-server",
        served(lambda server, data: server.serve_bytes(ARCHIVE_PATH, data[:-50])),
        ExitCode.INTEGRITY,
        ("{url} is", "bytes according to the server but the pin says", "check the URL"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_download_kept,
    ),
    Case(
        "url-connection-cut-every-time",
        served(cut_every_time),
        ExitCode.FETCH,
        (
            "download of {url} failed after 2 attempts",
            "connection lost after 100 bytes",
            "kept in {cache}/tmp/{sha256}.part and resumed next time",
        ),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=partial_kept_for_resume,
    ),
    # --- hostile or damaged archives (downloaded, verified against their pin, then opened) -------
    Case(
        "zip-slip-dotdot-member",
        hostile(lambda: zip_of({DLL_MEMBER: ort_dll(), "../../evil.dll": b"MZ"})),
        ExitCode.ARCHIVE,
        ("unsafe member '../../evil.dll'", "'..' in its path", "nothing was extracted"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_extracted_tree,
    ),
    Case(
        "zip-absolute-member",
        hostile(lambda: zip_of({DLL_MEMBER: ort_dll(), "/tmp/evil.dll": b"MZ"})),
        ExitCode.ARCHIVE,
        ("unsafe member '/tmp/evil.dll'", "absolute path", "check where it came from"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_extracted_tree,
    ),
    Case(
        "zip-symlink-member",
        hostile(lambda: zip_of({DLL_MEMBER: ort_dll()}, symlink="ort/bin/cudart64_12.dll")),
        ExitCode.ARCHIVE,
        ("unsafe member 'ort/bin/cudart64_12.dll'", "symbolic link", "nothing was extracted"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_extracted_tree,
    ),
    Case(
        "zip-bomb-declared-size-lie",
        hostile(zip_bomb),
        ExitCode.ARCHIVE,
        (f"unsafe member '{DLL_MEMBER}'", "more than the 1048576 bytes", "zip bomb"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_extracted_tree,
    ),
    Case(
        "zip-corrupt-central-directory",
        hostile(corrupt_central_directory),
        ExitCode.ARCHIVE,
        ("corrupt archive", "delete it from the cache and download it again"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_extracted_tree,
    ),
    Case(
        "7z-bad-crc",
        hostile(sevenzip_bad_crc),
        ExitCode.ARCHIVE,
        ("corrupt archive (member 'ort/bin/onnxruntime.dll')", "CRC-32 mismatch", "download"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=no_extracted_tree,
    ),
    # --- the output folder's disk ---------------------------------------------------------------
    Case(
        "output-folder-read-only",
        read_only_output,
        ExitCode.OUTPUT,
        ("{out}: cannot write there", "Read-only file system", "pass --out DIR"),
        cache_untouched=False,  # the artifacts are acquired before anything is written
    ),
    Case(
        "output-disk-fills-up-during-the-copy",
        disk_fills_up,
        ExitCode.OUTPUT,
        ("{out}: cannot write", "No space left on device", "Check free space"),
        cache_untouched=False,
    ),
    # --- the cache's disk ----------------------------------------------------------------------
    Case(
        "cache-folder-read-only",
        cache_on_tmpfs("ro,size=1m", good_zip),
        ExitCode.OUTPUT,
        ("{cache}: cannot write to the cache", "Read-only file system", "--cache-dir DIR"),
        needs=frozenset({"http"}),
        cache_untouched=False,
    ),
    Case(
        "cache-disk-fills-up-during-the-download",
        cache_on_tmpfs("size=1m", lambda: zip_of({DLL_MEMBER: ort_dll() + os.urandom(3 << 20)})),
        ExitCode.OUTPUT,
        ("{cache}/tmp/{sha256}.part: cannot write the download", "No space left on device"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=lambda ws: no_extracted_tree(ws),
    ),
    Case(
        "cache-disk-fills-up-during-the-extraction",
        cache_on_tmpfs("size=1m", compressible_zip),
        ExitCode.OUTPUT,
        ("{cache}: cannot write to the cache", "No space left on device", "--cache-dir DIR"),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=nothing_left_in_the_cache,
    ),
    # --- the cache, damaged on disk after it was verified -------------------------------------
    Case(
        "cache-entry-flipped-byte-is-replaced-by-verify",  # a good outcome: caught and re-fetched
        flipped_cache_entry("--mirror", "{mirror}", "--allow-http"),
        ExitCode.OK,
        (),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=cache_entry_replaced,
    ),
    Case(
        "cache-entry-flipped-byte-offline",
        flipped_cache_entry("--offline"),
        ExitCode.INTEGRITY,
        (
            "artifact onnxruntime 1.19.2: the cached copy was damaged",
            "expected {sha256}; it was removed",
            "network disabled by --offline",
            "fetch it anew",
        ),
        needs=frozenset({"http"}),
        cache_untouched=False,
        also=cache_entry_removed,
    ),
]


# --- the checks -------------------------------------------------------------------------------


Snapshot = dict[str, tuple[int, int, str]] | None


def snapshot(folder: Path) -> Snapshot:
    """Every file and folder below `folder`: size, mtime and content hash (None: absent)."""
    if not folder.exists():
        return None
    found: dict[str, tuple[int, int, str]] = {}
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder"
        found[path.relative_to(folder).as_posix()] = (stat.st_size, stat.st_mtime_ns, digest)
    return found


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_bad_input(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    ws = Workspace(tmp_path)
    if "http" in case.needs:
        ws.server = request.getfixturevalue("http_server")
        for name, value in HTTP_ENV.items():
            monkeypatch.setenv(name, value)
    monkeypatch.setenv(DEPS_ENV, str(ws.deps))
    try:
        check_row(case, ws)
    finally:
        for cleanup in reversed(ws.cleanups):
            cleanup()


def check_row(case: Case, ws: Workspace) -> None:
    args = case.setup(ws)
    output_before, cache_before = snapshot(ws.out), snapshot(ws.cache)

    result = run_bundle(*args)

    if result.returncode != case.exit_code:
        raise WrongExit(f"exit {result.returncode}, expected {case.exit_code:d}: {result.stderr}")
    if "Traceback" in result.stderr:
        raise WrongMessage(result.stderr)
    if case.exit_code is ExitCode.OK:
        missing = [name for name in case.expect_files if not (ws.out / name).is_file()]
        assert not missing, f"not in the output folder: {missing}"
    else:
        check_message(result.stderr, [word.format(**ws.words()) for word in case.words])
        if snapshot(ws.out) != output_before:
            raise OutputWritten(f"{ws.out} changed: {snapshot(ws.out)} (was {output_before})")
        if case.cache_untouched and snapshot(ws.cache) != cache_before:
            raise CacheWritten(f"{ws.cache} changed: {snapshot(ws.cache)} (was {cache_before})")
    check_cache_honest(ws.cache)
    if case.also is not None:
        case.also(ws)


_HASH_NAME = re.compile(r"[0-9a-f]{64}")


def check_cache_honest(cache: Path) -> None:
    """Whatever happened, every final name in the cache keeps its promise: a blob's SHA-256 is
    its name, and an extracted tree is complete (has its marker)."""
    blobs, trees = cache / "blobs" / "sha256", cache / "extracted"
    for blob in blobs.iterdir() if blobs.is_dir() else ():
        named = _HASH_NAME.fullmatch(blob.name)
        if named and hashlib.sha256(blob.read_bytes()).hexdigest() != blob.name:
            raise CacheWritten(f"{blob}: its bytes do not hash to its name")
    for tree in trees.iterdir() if trees.is_dir() else ():
        if _HASH_NAME.fullmatch(tree.name) and not (tree / ".complete").is_file():
            raise CacheWritten(f"{tree}: an extracted tree without its .complete marker")


# bundler/cli/progress.py's plain lines (stderr is not a terminal here): "label: 40% (...)"
_PROGRESS = re.compile(r"[^\n]*: \d+% \([^\n]*\)\n")


def check_message(stderr: str, words: list[str]) -> None:
    """One `error: ...` line, after nothing but the progress lines of the work done before."""
    stderr = _PROGRESS.sub("", stderr)
    if not (stderr.startswith("error: ") and stderr.count("\n") == 1 and stderr.endswith("\n")):
        raise WrongMessage(f"not one 'error: ...' line: {stderr!r}")
    absent = [word for word in words if word not in stderr]
    if absent:
        raise WrongMessage(f"{absent} not in {stderr!r}")


def test_every_exit_code_of_a_row_is_documented() -> None:
    """The table speaks the README's exit codes; ids are unique (they name the rows in CI)."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "exit-codes.md").read_text()
    for case in CASES:
        assert f"| {case.exit_code:d} " in readme or case.exit_code is ExitCode.OK, case.id
    assert len({case.id for case in CASES}) == len(CASES)


def test_the_default_workspace_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows' starting point is a good input: each row's failure is its own bad input."""
    ws = Workspace(tmp_path)
    monkeypatch.setenv(DEPS_ENV, str(ws.deps))
    ws.app()
    result = run_bundle(*ws.build())
    assert result.returncode == 0, result.stderr
    assert (ws.out / "onnxruntime.dll").is_file()
