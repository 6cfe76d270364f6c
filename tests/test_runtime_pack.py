"""The runtime pack apart from the app (issue 32), as a release pipeline and its users meet it:
`bundle build --runtime-pack --pack-url URL` writes bundle-pack.iss, setup.iss (full) and
setup-web.iss; the real ISCC 6.4.1 (under Wine) compiles the pack once into the pack cache and
each app setup from it; silent installs under Wine upgrade one folder from release to release.

The releases: v1 is examples/hello with ORT 1.31.1 (CPU) and the WebGPU pack, installed with its
full setup; v2 is the same runtime with a changed hello.exe, installed with its web setup (the
folder holds its pack: nothing is downloaded); v3 is another runtime (ORT 1.19.2, no pack),
installed with its web setup from the local HTTP server: downloaded, checked, and the WebGPU
files of the old pack removed. The pack URL is served by tests.support.httpserver on 127.0.0.1.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundler.closure.lock import PACK_MARKER, RuntimePack
from bundler.closure.lockfile import read_lock
from bundler.config.cache_root import RUNTIME_PACKS
from tests.support.httpserver import HttpServer
from tests.support.inno import InnoSetup
from tests.support.paths import HELLO, test_cache_dir
from tests.support.runs import pip_env
from tests.support.scratch import scratch
from tests.support.skips import require

pytestmark = pytest.mark.realdata

FOLDER = r"C:\runtime pack (test)"
V1_PROFILE = "ort-1.31.1-cpu"
V3_PROFILE = "ort-1.19.2-cpu"
PACK_FILES = "/packs/"
APPEND = "/Sbundlepack=$p"  # the Sign Tool that appends the pack to the full setup


def bundle(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with pip pointed at the pinned wheels."""
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        capture_output=True, encoding="utf-8", env={**os.environ, **pip_env()}, check=False,
    )  # fmt: skip


@dataclass(frozen=True)
class Release:
    """One built release: its bundle folder, its lock's pack, and its compiled setups."""

    dist: Path
    pack: RuntimePack
    full: Path
    web: Path

    def pack_exe(self, cache: Path) -> Path:
        (folder,) = (cache / RUNTIME_PACKS).glob(f"{self.pack.short}-*")
        return folder / f"bundle-pack-{folder.name}.exe"

    def pack_parts(self, cache: Path) -> list[Path]:
        """The pack setup's parts (Inno Setup's disk slices), in order."""
        exe = self.pack_exe(cache)
        parts = exe.parent.glob(f"{exe.stem}-*.bin")
        return sorted(parts, key=lambda part: int(part.stem.rsplit("-", 1)[1]))


@dataclass(frozen=True)
class Pipeline:
    work: Path
    cache: Path
    server: HttpServer
    served: Path  # what the pack URL serves: the release engineer's published packs
    v1: Release
    v2: Release
    v3: Release


def _exe(folder: Path, extra: bytes) -> Path:
    """examples/hello's exe with `extra` bytes appended (a new build of the app)."""
    folder.mkdir(parents=True)
    exe = folder / "hello.exe"
    exe.write_bytes(HELLO.read_bytes() + extra)
    return exe


def _release(
    inno: InnoSetup, work: Path, cache: Path, name: str, exe: Path, url: str, *args: str
) -> Release:
    dist = work / name / "dist"
    done = bundle(
        "build", str(exe), *args, "--out", str(dist), "--cache-dir", str(cache), "--link",
        "--runtime-pack", "--pack-url", url, "--iss-compression", "zip/1", "--pack-part-mb", "4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lock = read_lock(dist / "bundle.lock.json")
    assert lock is not None and lock.runtime_pack is not None
    full = inno.compile(dist / "setup.iss", work / name / "full", APPEND).check().setup_exe
    web = inno.compile(dist / "setup-web.iss", work / name / "web").check().setup_exe
    return Release(dist, lock.runtime_pack, full, web)


@pytest.fixture(scope="module")
def pipeline(inno: InnoSetup, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    wheel = test_cache_dir() / "wheels" / "onnxruntime_ep_webgpu-0.4.0-py3-none-win_amd64.whl"
    require(
        wheel.is_file(),
        f"{wheel.name} is not in the test cache: run python -m tools.testing.fetch_test_wheels",
    )
    with scratch(tmp_path_factory, "runtime-pack") as work, HttpServer() as server:
        cache, served = work / "cache", work / "served"
        served.mkdir()
        server.serve_directory(PACK_FILES, served)
        url = server.url(PACK_FILES.rstrip("/"))
        v1_args = ("--profile", V1_PROFILE, "--ep", "webgpu")
        v1 = _release(inno, work, cache, "v1", _exe(work / "app1", b""), url, *v1_args)
        v2 = _release(inno, work, cache, "v2", _exe(work / "app2", b"v2" * 8), url, *v1_args)
        v3_exe = _exe(work / "app3", b"v3" * 8)
        v3 = _release(inno, work, cache, "v3", v3_exe, url, "--profile", V3_PROFILE)
        for release in (v1, v3):  # the pipeline publishes each new pack at the pack URL
            for file in (release.pack_exe(cache), *release.pack_parts(cache)):
                shutil.copy2(file, served)
        yield Pipeline(work, cache, server, served, v1, v2, v3)


def install(inno: InnoSetup, setup: Path, log: Path) -> tuple[int, str]:
    result = inno.install(setup, FOLDER, log=log)
    return result.returncode, result.log


def audit(folder: Path) -> tuple[int, list[dict[str, object]]]:
    done = bundle("audit", str(folder), "--json")
    return done.returncode, json.loads(done.stdout)["findings"]


def test_the_same_runtime_has_the_same_pack_compiled_once(pipeline: Pipeline) -> None:
    v1, v2, v3 = pipeline.v1, pipeline.v2, pipeline.v3
    assert v1.pack == v2.pack  # the app changed, the runtime did not
    assert v3.pack.sha256 != v1.pack.sha256
    assert sorted((pipeline.cache / RUNTIME_PACKS).iterdir()) == sorted(
        {r.pack_exe(pipeline.cache).parent for r in (v1, v3)}
    )
    # the pack's own setup is in neither app setup's [Files] as loose DLLs: only the app is
    script = (v2.dist / "setup.iss").read_text(encoding="utf-8-sig")
    assert 'Source: "onnxruntime.dll"' not in script and 'Source: "hello.exe"' in script
    pack = [v2.pack_exe(pipeline.cache), *v2.pack_parts(pipeline.cache)]
    assert v2.web.stat().st_size < sum(file.stat().st_size for file in pack)


def test_render_iss_with_the_builds_cache_dir_writes_the_builds_scripts(
    pipeline: Pipeline,
) -> None:
    """`bundle render iss DIST --cache-dir X --runtime-pack` after `bundle build
    --runtime-pack --cache-dir X` writes the same scripts byte for byte: the pack is looked up
    in X, as the build put it there (issue 39; render iss took no --cache-dir, and rewrote the
    pack's folder to the default cache's)."""
    dist = pipeline.v3.dist
    scripts = [dist / "setup.iss", dist / "setup-web.iss", *dist.glob("*.iss")]
    built = {script: script.read_bytes() for script in scripts}  # what the build wrote
    try:
        done = bundle(
            "render", "iss", str(dist), "--cache-dir", str(pipeline.cache), "--runtime-pack",
            "--pack-url", pipeline.server.url(PACK_FILES.rstrip("/")),
            "--iss-compression", "zip/1", "--pack-part-mb", "4",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert {script: script.read_bytes() for script in scripts} == built
    finally:  # the later tests compile these scripts: put back what the build wrote
        for script, data in built.items():
            script.write_bytes(data)


def test_the_full_setup_is_the_app_setup_with_the_compiled_pack_appended(
    inno: InnoSetup, pipeline: Pipeline, tmp_path: Path
) -> None:
    """ISCC does not store the pack (it would hash and write it on every compile): the Sign
    Tool bundlepack.cmd appends its files byte for byte, then the line naming the pack."""
    v2 = pipeline.v2
    pack = b"".join(
        f.read_bytes() for f in (v2.pack_exe(pipeline.cache), *v2.pack_parts(pipeline.cache))
    )
    setup = v2.full.read_bytes()
    end = f"bundle runtime pack {v2.pack.sha256}\r\n".encode()
    assert setup.endswith(pack + end)
    app_setup = setup[: -len(pack + end)]
    assert app_setup[:2] == b"MZ" and len(app_setup) < 3_000_000  # the app and Inno's setup program
    # without the Sign Tool, ISCC stops at the line whose comment says how to compile
    compiled = inno.compile(v2.dist / "setup.iss", tmp_path / "plain")
    assert compiled.returncode != 0
    assert 'Value of [Setup] section directive "SignTool" is invalid' in compiled.stderr
    line = int(compiled.stderr.split("Error on line ", 1)[1].split(" ", 1)[0])
    script = (v2.dist / "setup.iss").read_text(encoding="utf-8-sig").splitlines()
    assert "/Sbundlepack=$p" in "\n".join(script[line - 4 : line - 1])
    assert not list((tmp_path / "plain").glob("*.exe"))


def test_a_tampered_full_setup_is_refused_before_anything_is_written(
    inno: InnoSetup, pipeline: Pipeline, tmp_path: Path
) -> None:
    """One byte of the appended pack changed: the setup checks each file's SHA-256 before it
    runs the pack, and stops with nothing written."""
    app = inno.unix_path(FOLDER)
    shutil.rmtree(app, ignore_errors=True)
    install(inno, pipeline.v1.full, tmp_path / "v1.log")
    before = {p.relative_to(app): p.stat().st_mtime_ns for p in app.rglob("*") if p.is_file()}
    tampered = bytearray(pipeline.v3.full.read_bytes())
    pack_bytes = pipeline.v3.pack_exe(pipeline.cache).stat().st_size
    tampered[len(tampered) - pack_bytes // 2] ^= 0x01  # inside the pack's last file
    setup = tmp_path / pipeline.v3.full.name
    setup.write_bytes(bytes(tampered))
    code, log = install(inno, setup, tmp_path / "v3.log")
    after = {p.relative_to(app): p.stat().st_mtime_ns for p in app.rglob("*") if p.is_file()}
    assert code == 7, log
    assert "The runtime pack in this setup is damaged" in log, log
    assert "download the setup again" in log
    assert after == before
    cut = tmp_path / "cut" / pipeline.v3.full.name  # a download cut short: no pack at its end
    cut.parent.mkdir()
    cut.write_bytes(bytes(tampered[: len(tampered) - 1000]))
    code, log = install(inno, cut, tmp_path / "cut.log")
    assert code == 7 and "This setup does not hold its runtime pack" in log, log


def _record(pack_exe: Path) -> configparser.SectionProxy:
    """PackExe.ini: the pack's SHA-256 as ISPP read it, with the size and time of the file."""
    record = configparser.ConfigParser()
    assert record.read(pack_exe.with_name(pack_exe.name + ".ini"))
    return record["pack"]


def test_the_web_setup_hashes_a_pack_once(
    inno: InnoSetup, pipeline: Pipeline, tmp_path: Path
) -> None:
    """Hashing the pack takes ISPP about 10 s a GB: the first web setup keeps the hash beside
    the pack, later ones read it, and a pack file that changed since is hashed again."""
    pack_exe = pipeline.v1.pack_exe(pipeline.cache)
    truth = hashlib.sha256(pack_exe.read_bytes()).hexdigest()
    kept = _record(pack_exe)
    assert kept["sha256"] == truth
    assert kept["file"].startswith(f"{pack_exe.stat().st_size} ")
    record = pack_exe.with_name(pack_exe.name + ".ini")
    record.write_text("[pack]\nfile=0 2000-01-01 00:00:00\nsha256=" + "0" * 64 + "\n")
    compiled = inno.compile(pipeline.v2.dist / "setup-web.iss", tmp_path / "web")
    compiled.check()
    assert _record(pack_exe)["sha256"] == truth  # the stale record was not believed
    assert kept["file"] == _record(pack_exe)["file"]


def test_v1_full_v2_web_keeps_the_pack_v3_web_replaces_it(
    inno: InnoSetup, pipeline: Pipeline, tmp_path: Path
) -> None:
    app = inno.unix_path(FOLDER)
    shutil.rmtree(app, ignore_errors=True)
    # v1, the full setup: no network at all (the server has not been asked anything)
    code, log = install(inno, pipeline.v1.full, tmp_path / "v1.log")
    assert code == 0, log
    assert (app / PACK_MARKER).read_text().strip() == pipeline.v1.pack.sha256
    assert (app / "ep" / "webgpu" / "onnxruntime_providers_webgpu.dll").is_file()
    assert pipeline.server.requests == []
    # v2, the web setup: the folder holds this pack, so nothing is downloaded
    code, log = install(inno, pipeline.v2.web, tmp_path / "v2.log")
    assert code == 0, log
    assert f"runtime pack {pipeline.v2.pack.sha256}: already installed, kept" in log
    assert pipeline.server.requests == []
    assert (app / "hello.exe").read_bytes() == (pipeline.work / "app2" / "hello.exe").read_bytes()
    code, findings = audit(app)
    assert code == 0, findings
    run = inno.run(app / "hello.exe")
    assert run.stdout.strip() == "ORT version: 1.31.1", run.errors
    # v3, another runtime: its pack is downloaded, checked and installed; the old one's surplus
    code, log = install(inno, pipeline.v3.web, tmp_path / "v3.log")
    assert code == 0, log
    pack = [pipeline.v3.pack_exe(pipeline.cache), *pipeline.v3.pack_parts(pipeline.cache)]
    assert len(pack) >= 3  # the setup program and two parts or more (--pack-part-mb 4)
    assert [r.path for r in pipeline.server.requests] == [PACK_FILES + f.name for f in pack]
    assert kept_downloads(inno) == []  # forgotten once the pack is installed
    assert (app / PACK_MARKER).read_text().strip() == pipeline.v3.pack.sha256
    assert not (app / "ep").exists() and not (app / "licenses" / "webgpu").exists(), log
    code, findings = audit(app)
    assert code == 0, findings
    run = inno.run(app / "hello.exe")
    assert run.stdout.strip() == "ORT version: 1.19.2", run.errors


def kept_downloads(inno: InnoSetup) -> list[Path]:
    """The folders where web setups keep downloaded pack files until the pack is installed."""
    return list(inno.unix_path("C:\\users").glob("*/AppData/Local/BundleRuntimePack/*"))


def test_a_broken_download_resumes_with_the_parts_it_lacks(
    inno: InnoSetup, pipeline: Pipeline, tmp_path: Path
) -> None:
    """The connection breaks in the pack's second part: the setup stops (nothing written);
    run again, it keeps the setup program and the first part it checked, downloads only what
    it lacks, installs, and forgets the downloads."""
    app = inno.unix_path(FOLDER)
    shutil.rmtree(app, ignore_errors=True)
    install(inno, pipeline.v1.full, tmp_path / "v1.log")
    exe, parts = pipeline.v3.pack_exe(pipeline.cache), pipeline.v3.pack_parts(pipeline.cache)
    assert len(parts) >= 2, parts
    broken = PACK_FILES + parts[1].name
    pipeline.server.cut_first(broken, parts[1].read_bytes(), after=100_000)
    code, log = install(inno, pipeline.v3.web, tmp_path / "broken.log")
    assert code == 7, log
    assert f"could not be downloaded from {pipeline.server.url(broken)}" in log, log
    assert "it goes on with the parts it lacks" in log
    assert (app / PACK_MARKER).read_text().strip() == pipeline.v1.pack.sha256
    asked = {name: len(pipeline.server.requests_for(PACK_FILES + name)) for name in
             (exe.name, parts[0].name, parts[1].name)}  # fmt: skip
    code, log = install(inno, pipeline.v3.web, tmp_path / "resumed.log")
    assert code == 0, log
    for kept in (exe, parts[0]):
        assert f"runtime pack: {kept.name}: kept from an earlier download" in log, log
        assert len(pipeline.server.requests_for(PACK_FILES + kept.name)) == asked[kept.name]
    assert len(pipeline.server.requests_for(broken)) == asked[parts[1].name] + 1
    assert (app / PACK_MARKER).read_text().strip() == pipeline.v3.pack.sha256
    assert kept_downloads(inno) == []
    assert audit(app)[0] == 0


def test_a_tampered_pack_is_refused_before_anything_is_written(
    inno: InnoSetup, pipeline: Pipeline, tmp_path: Path
) -> None:
    app = inno.unix_path(FOLDER)
    shutil.rmtree(app, ignore_errors=True)
    install(inno, pipeline.v1.full, tmp_path / "v1.log")
    before = {p.relative_to(app): p.stat().st_mtime_ns for p in app.rglob("*") if p.is_file()}
    exe = pipeline.v3.pack_exe(pipeline.cache).name
    tampered = bytearray((pipeline.served / exe).read_bytes())
    tampered[len(tampered) // 2] ^= 0x01
    pipeline.server.serve_bytes(PACK_FILES + exe, bytes(tampered))
    code, log = install(inno, pipeline.v3.web, tmp_path / "v3.log")
    after = {p.relative_to(app): p.stat().st_mtime_ns for p in app.rglob("*") if p.is_file()}
    assert code == 7, log  # Inno Setup: the preparing-to-install stage stopped the setup
    assert "could not be downloaded from http://127.0.0.1" in log, log
    assert "is not the one this setup was built for (Invalid file hash" in log, log
    assert after == before


def test_an_unreachable_pack_url_names_the_url_and_the_fix(
    inno: InnoSetup, pipeline: Pipeline, tmp_path: Path
) -> None:
    closed = "http://127.0.0.1:9/packs"  # the discard port: nothing listens there
    script = tmp_path / "web" / "setup.iss"
    lock = pipeline.v3.dist / "bundle.lock.json"
    env_cache = {"BUNDLE_CACHE_DIR": str(pipeline.cache)}
    done = subprocess.run(
        [sys.executable, "-m", "bundler", "render", "iss", "--lock", str(lock), "--out",
         str(script), "--runtime-pack", "--pack-url", closed],
        capture_output=True, encoding="utf-8", env={**os.environ, **env_cache}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    setup = inno.compile(script.parent / "setup-web.iss", tmp_path / "out").check().setup_exe
    app = inno.unix_path(FOLDER)
    shutil.rmtree(app, ignore_errors=True)
    code, log = install(inno, setup, tmp_path / "setup.log")
    assert code == 7, log
    assert f"could not be downloaded from {closed}/bundle-pack-" in log
    assert "Check the connection" in log and "full setup" in log
    assert not (app / "hello.exe").exists()
