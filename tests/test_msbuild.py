"""`bundle msbuild`: the folder a Visual Studio project imports, judged by a real MSBuild.

Debian's xbuild (Mono's MSBuild) runs a small test project that imports the generated
ort-bundle.props and ort-bundle.targets through xbuild's own common targets (Build, the
record of file writes, Clean, Rebuild), with a stub compile step: there is no C++ compiler.
xbuild ignores ItemDefinitionGroup (measured: metadata defined there reads back empty), so the
ClCompile/Link metadata is checked structurally, and its values through the properties it is
built from, which xbuild evaluates. The release zip is a replica in the real layout
(tests/support/replica.py), served by the local HTTP server, with the real DLLs of the pinned wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundler.closure.lock import LOCK_NAME, Lock, LockedFile
from bundler.closure.lockfile import read_lock
from bundler.errors import ConfigError, ExitCode
from bundler.render.engine import Templates
from bundler.render.escaping import msbuild_escape, xml_text
from bundler.render.msbuild_props import (
    PROPS_NAME,
    TARGETS_NAME,
    msbuild_values,
    render_msbuild,
    write_msbuild_files,
)
from bundler.render.postbuild import EVENT_NAME, POSTBUILD_NAME
from tests.support.cache_links import linked_cache
from tests.support.httpserver import HttpServer
from tests.support.paths import REPO
from tests.support.pefactory import build_pe
from tests.support.replica import (
    HEADERS,
    ORT_GPU_WHEEL_SHA256,
    TOP,
    ZIP_NAME,
    Replica,
    replica_profile,
)
from tests.support.replica import replica as replica  # the module fixture
from tests.support.runs import bundle_from_cache
from tests.support.scratch import scratch
from tests.support.skips import require
from tests.support.tiny import TINY_DLLS, TINY_LIBS, TINY_ROOTS, TINY_TOP, Tiny, tiny_profile
from tests.support.tiny import tiny as tiny  # the module fixture: a release of our own
from tests.support.wine import Wine

TEMPLATES = Templates(None)  # renders without keeping anything between runs

GOLDEN = Path(__file__).parent / "golden"
MSB = "{http://schemas.microsoft.com/developer/msbuild/2003}"
HELLO = REPO / "examples" / "hello"
# A folder name xbuild can take whole: blanks, parentheses, &, ' and non-ASCII. (`;` and `%`
# cannot be tested with xbuild: it does not escape $(MSBuildThisFileDirectory), MSBuild does.)
ODD = "ORT (x64) & co's bündel"
STUB_ASSEMBLY = "app.dll"  # what the test project's stub compile step writes into $(OutDir)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def msbuild(*args: str) -> subprocess.CompletedProcess[str]:
    return bundle_from_cache("msbuild", *args)


def stamps(folder: Path, but: str = "") -> dict[str, tuple[int, int, int]]:
    """Inode, modification and change time of every file (but one): a rewrite changes one."""
    return {
        name: (s.st_ino, s.st_mtime_ns, s.st_ctime_ns)
        for name in files_under(folder)
        if name != but
        for s in [(folder / name).stat()]
    }


# --- escaping and rendering ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("onnxruntime.lib", "onnxruntime.lib"),
        ("100%;50%", "100%25%3B50%25"),
        ("$(OutDir)@(Items)", "%24(OutDir)%40(Items)"),
        ("it's *.dll?", "it%27s %2A.dll%3F"),
        ("C:\\Program Files (x86)\\A & B\\bündel", "C:\\Program Files (x86)\\A & B\\bündel"),
    ],
)
def test_msbuild_escape_writes_special_characters_as_hex(value: str, escaped: str) -> None:
    assert msbuild_escape(value) == escaped


def test_xml_text_escapes_markup_after_msbuild_escaping() -> None:
    value = 'R&D <"x64"> 100%;\'é'
    assert xml_text(msbuild_escape(value)) == "R&amp;D &lt;&quot;x64&quot;&gt; 100%25%3B%27é"


@pytest.mark.parametrize("value", ["two\nlines", "tab\there", "nul\x00"])
def test_control_characters_are_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="control character"):
        msbuild_escape(value)
    with pytest.raises(ConfigError, match="control character"):
        xml_text(value)


def folder_lock(profile: str = "ort-1.19.2-gpu-cuda12", architecture: str = "x64") -> Lock:
    files = (
        LockedFile("bin/onnxruntime.dll", "bundled", "0" * 64, 10),
        LockedFile("include/onnxruntime_c_api.h", "sdk", "1" * 64, 5),
        LockedFile("lib/onnxruntime.lib", "sdk", "2" * 64, 7),
    )
    return Lock(profile, architecture, "app-local", files)


def test_golden_files_with_a_profile_name_full_of_special_characters(tmp_path: Path) -> None:
    """The only free text in the files is the profile's name: every MSBuild and XML special
    character is escaped, and the folder's own odd path appears nowhere."""
    folder = tmp_path / "a%b;c&d'e ünï"
    lock = folder_lock(profile='odd %;&\'é <$(x)> @(y) "z" *?')
    written = write_msbuild_files(TEMPLATES, lock, folder)
    for path in written.paths:
        data = path.read_bytes()
        assert data == (GOLDEN / f"escaping.{path.name}").read_bytes(), path.name
        assert str(tmp_path).encode() not in data
    props = (folder / PROPS_NAME).read_text(encoding="utf-8-sig")
    assert (
        "<OrtBundleProfile>odd %25%3B&amp;%27é &lt;%24(x)&gt; %40(y) &quot;z&quot; %2A%3F"
        "</OrtBundleProfile>"
    ) in props


def test_rendering_twice_gives_the_same_bytes_and_writes_nothing(tmp_path: Path) -> None:
    first = write_msbuild_files(TEMPLATES, folder_lock(), tmp_path)
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in first.paths}
    second = write_msbuild_files(TEMPLATES, folder_lock(), tmp_path)
    assert first.changed == first.paths and second.changed == ()
    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in second.paths} == before
    assert render_msbuild(TEMPLATES, msbuild_values(folder_lock())) == render_msbuild(
        TEMPLATES, msbuild_values(folder_lock())
    )


def test_files_are_utf8_with_bom_and_crlf(tmp_path: Path) -> None:
    for path in write_msbuild_files(TEMPLATES, folder_lock(), tmp_path).paths:
        data = path.read_bytes()
        assert data.startswith(b"\xef\xbb\xbf<?xml")
        assert data.count(b"\n") == data.count(b"\r\n")


def test_an_x86_profile_targets_the_win32_platform() -> None:
    texts = render_msbuild(TEMPLATES, msbuild_values(folder_lock(architecture="x86")))
    assert "'$(Platform)'=='Win32'" in texts[PROPS_NAME]
    assert "'$(Platform)'=='Win32'" in texts[TARGETS_NAME]


# --- structure: what xbuild cannot evaluate ----------------------------------------------------


def parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode("utf-8"))


def test_props_prepend_to_the_item_definitions_of_the_platform_only() -> None:
    """ItemDefinitionGroup (ignored by xbuild): each value puts ours first and keeps what the
    project already has, for x64 only; the paths are the properties xbuild does evaluate."""
    root = parse(render_msbuild(TEMPLATES, msbuild_values(folder_lock()))[PROPS_NAME])
    (group,) = root.findall(f"{MSB}ItemDefinitionGroup")
    assert group.get("Condition") == "'$(Platform)'=='x64'"
    metadata = {
        f"{item.tag[len(MSB) :]}/{child.tag[len(MSB) :]}": child.text
        for item in group
        for child in item
    }
    assert metadata == {
        "ClCompile/AdditionalIncludeDirectories": (
            "$(OrtBundleIncludeDir);%(AdditionalIncludeDirectories)"
        ),
        "Link/AdditionalLibraryDirectories": "$(OrtBundleLibDir);%(AdditionalLibraryDirectories)",
        "Link/AdditionalDependencies": "$(OrtBundleLibraries);%(AdditionalDependencies)",
    }
    (properties,) = root.findall(f"{MSB}PropertyGroup")
    assert properties.get("Condition") == "'$(Platform)'=='x64'"
    values = {child.tag[len(MSB) :]: child.text or "" for child in properties}
    for name in ("OrtBundleIncludeDir", "OrtBundleLibDir", "OrtBundleBinDir"):
        assert values[name].startswith("$(MSBuildThisFileDirectory)")
    assert values["OrtBundleLibraries"] == "onnxruntime.lib"


def test_targets_copy_after_build_and_register_the_copies_for_clean() -> None:
    """AfterTargets, Copy with SkipUnchangedFiles and FileWrites as MSBuild needs them; xbuild
    runs these too (below), this pins the exact constructs."""
    root = parse(render_msbuild(TEMPLATES, msbuild_values(folder_lock()))[TARGETS_NAME])
    (items,) = root.findall(f"{MSB}ItemGroup")
    assert items.get("Condition") == "'$(Platform)'=='x64'"
    dlls = items.find(f"{MSB}OrtBundleDll")
    writes = items.find(f"{MSB}FileWrites")
    assert dlls is not None and dlls.get("Include") == "$(MSBuildThisFileDirectory)bin\\*.dll"
    assert writes is not None
    assert writes.get("Include") == "@(OrtBundleDll->'$(OutDir)%(Filename)%(Extension)')"
    (target,) = root.findall(f"{MSB}Target")
    assert target.get("AfterTargets") == "Build"
    (copy,) = target.findall(f"{MSB}Copy")
    assert copy.attrib == {
        "SourceFiles": "@(OrtBundleDll)",
        "DestinationFolder": "$(OutDir)",
        "SkipUnchangedFiles": "true",
    }
    (output,) = copy.findall(f"{MSB}Output")
    assert output.attrib == {"TaskParameter": "DestinationFiles", "ItemName": "FileWrites"}


# --- a small release zip of our own, from a mirror folder (tests/support/tiny.py) ----------


@pytest.fixture(scope="module")
def tiny_folder(tiny: Tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The laid-out folder, under a path with blanks, parentheses, & ' and non-ASCII."""
    out = tmp_path_factory.mktemp("tiny-out") / ODD / "ort"
    result = msbuild(*tiny.args(out.parent.parent / "cache", out))
    assert result.returncode == 0, result.stderr
    return out


def test_tiny_layout_has_headers_import_libraries_closure_and_licences(
    tiny: Tiny, tiny_folder: Path
) -> None:
    assert files_under(tiny_folder) == [
        "bin/extra.dll",
        "bin/helper.dll",
        "bin/onnxruntime.dll",
        "bin/onnxruntime_providers_shared.dll",
        "bundle.lock.json",
        "bundle.times.json",  # the build's local note of its files' times (not shipped)
        "include/core/providers/resource.h",
        "include/onnxruntime_c_api.h",
        "lib/extra.lib",
        "lib/helper.lib",
        "lib/onnxruntime.lib",
        "lib/onnxruntime_providers_shared.lib",
        "licenses/onnxruntime/LICENSE",
        PROPS_NAME,
        TARGETS_NAME,
        POSTBUILD_NAME,
        EVENT_NAME,
    ]  # no unused.dll (not in the closure), so no unused.lib; no .pdb
    assert (tiny_folder / "lib/helper.lib").read_bytes() == TINY_LIBS["helper.lib"]
    lock = locked(tiny_folder)
    for item in lock.values():
        assert sha256(tiny_folder / item.name) == item.sha256, item.name
        assert item.archive_sha256 == tiny.zip_sha256
    header = lock["include/core/providers/resource.h"]
    assert (header.kind, header.member) == ("sdk", f"{TINY_TOP}/include/core/providers/resource.h")
    assert lock["bin/helper.dll"].why == "[profile root] -> onnxruntime.dll -import-> helper.dll"


def locked(folder: Path) -> dict[str, LockedFile]:
    """The folder's lock file, by file name."""
    lock = read_lock(folder / LOCK_NAME)
    assert lock is not None
    return lock.by_name()


def rendered_elsewhere_excluded(folder: Path) -> dict[str, tuple[int, int, int]]:
    """stamps() of every file but the post-build files, which their renderer writes again on
    every run (render_postbuild writes unconditionally); their bytes are compared instead."""
    posts = (POSTBUILD_NAME, EVENT_NAME)
    return {name: stamp for name, stamp in stamps(folder).items() if name not in posts}


def test_a_second_run_changes_nothing(tiny: Tiny, tiny_folder: Path) -> None:
    posts = {name: (tiny_folder / name).read_bytes() for name in (POSTBUILD_NAME, EVENT_NAME)}
    before = rendered_elsewhere_excluded(tiny_folder)
    again = msbuild(*tiny.args(tiny_folder.parent.parent / "cache", tiny_folder))
    assert again.returncode == 0, again.stderr
    assert "copied 0 (0 B), linked 0, unchanged 11, removed 0; hashed 0 files" in again.stdout
    assert "(0 written, 2 unchanged)" in again.stdout
    assert rendered_elsewhere_excluded(tiny_folder) == before
    assert {name: (tiny_folder / name).read_bytes() for name in posts} == posts


def test_a_run_as_json_says_what_the_text_says(tiny: Tiny, tiny_folder: Path) -> None:
    """--json: the folder, the counters, the files written and the lock, with a schema."""
    again = msbuild(*tiny.args(tiny_folder.parent.parent / "cache", tiny_folder, "--json"))
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["schema_version"] == 1 and data["out"] == str(tiny_folder)
    assert data["counters"]["skipped"] == 11 and data["changed"] == []
    assert [Path(path).name for path in data["msbuild_files"]] == [PROPS_NAME, TARGETS_NAME]
    assert data["lock_file"] == str(tiny_folder / "bundle.lock.json")
    assert Path(data["postbuild"]["script"]).name == POSTBUILD_NAME
    assert {item["name"] for item in data["lock"]["files"]} >= {"bin/onnxruntime.dll"}


def test_files_an_earlier_run_wrote_and_no_longer_needed_are_removed(
    tiny: Tiny, tmp_path: Path
) -> None:
    cache, out = tmp_path / "cache", tmp_path / "ort"
    assert msbuild(*tiny.args(cache, out)).returncode == 0
    (out / "notes.txt").write_text("mine")
    digest, size = tiny.zip_sha256, (tiny.mirror / f"{TINY_TOP}.zip").stat().st_size
    fewer = tiny_profile(tmp_path / "fewer.toml", digest, size, TINY_ROOTS[:2])
    result = msbuild(*tiny.args(cache, out, "--profile", str(fewer)))
    assert result.returncode == 0, result.stderr
    assert "removed 2" in result.stdout
    assert not (out / "bin/extra.dll").exists() and not (out / "lib/extra.lib").exists()
    assert (out / "notes.txt").read_text() == "mine"  # never written by bundle: kept


def test_a_foreign_file_in_the_way_stops_the_run_before_writing(tiny: Tiny, tmp_path: Path) -> None:
    out = tmp_path / "ort"
    (out / "bin").mkdir(parents=True)
    (out / "bin/helper.dll").write_bytes(b"someone else's helper")
    result = msbuild(*tiny.args(tmp_path / "cache", out))
    assert result.returncode == ExitCode.CONFLICT
    assert files_under(out) == ["bin/helper.dll"]
    forced = msbuild(*tiny.args(tmp_path / "cache", out, "--force"))
    assert forced.returncode == 0, forced.stderr
    assert (out / "bin/helper.dll").read_bytes() == build_pe(TINY_DLLS["helper"])


def test_a_relative_cache_dir_keeps_provenance_and_licences(tiny: Tiny, tmp_path: Path) -> None:
    """The resolver's paths are absolute, the cache's as given: both are compared absolute."""
    result = bundle_from_cache(
        "msbuild", "--profile", str(tiny.profile), "--cache-dir", "cache", "--out", "ort",
        "--mirror", str(tiny.mirror), "--offline", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ort/licenses/onnxruntime/LICENSE").read_bytes() == b"MIT"
    assert locked(tmp_path / "ort")["bin/onnxruntime.dll"].artifact == "onnxruntime"


def test_fetch_extracts_the_sdk_of_a_source_that_has_one(tiny: Tiny, tmp_path: Path) -> None:
    result = bundle_from_cache(
        "fetch", "--profile", str(tiny.profile), "--cache-dir", str(tmp_path / "cache"),
        "--mirror", str(tiny.mirror), "--offline", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (item,) = json.loads(result.stdout)["artifacts"]
    assert item["sdk"] is True
    tree = Path(item["folder"]) / TINY_TOP
    assert (tree / "include/core/providers/resource.h").is_file()
    assert (tree / "lib/unused.lib").is_file()  # the cache keeps the archive's SDK whole
    assert not (tree / "lib/onnxruntime.pdb").exists()


def windows(path: Path) -> str:
    """`path` as Windows programs under Wine see it (Wine maps / to drive Z:)."""
    return "Z:" + os.path.abspath(path).replace("/", "\\")


def test_postbuild_cmd_copies_the_dlls_of_bin_into_the_target(
    wine: Wine, tiny: Tiny, tmp_path: Path
) -> None:
    """Wine's cmd runs the folder's postbuild.cmd as a post-build event would, "$(OutDir)"
    with its trailing backslash: the target gets exactly bin's DLLs, no bin folder."""
    folder = tmp_path / "deps (x64) & more" / "ort"
    assert msbuild(*tiny.args(tmp_path / "cache", folder)).returncode == 0
    target = tmp_path / "x64 (Release) & co"
    caller = tmp_path / "caller.cmd"
    caller.write_bytes(b'@"%PB_SCRIPT%" "%PB_TARGET%\\"\r\n')
    told: dict[str, str | None] = {
        "PB_SCRIPT": windows(folder / POSTBUILD_NAME),
        "PB_TARGET": windows(target),
    }
    done = wine.program("cmd", "/c", windows(caller), env=told)
    assert done.returncode == 0, done.stdout + done.stderr
    assert files_under(target) == sorted(dlls_in(folder / "bin"))
    for name in dlls_in(folder / "bin"):
        assert (target / name).read_bytes() == (folder / "bin" / name).read_bytes()


# --- no release zip: one line, its own exit code, nothing written ------------------------------


def assert_sdk_missing(result: subprocess.CompletedProcess[str], out: Path) -> None:
    assert result.returncode == ExitCode.SDK == 16, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "headers and import libraries" in result.stderr
    assert not out.exists()


def test_source_pip_has_no_sdk(tiny: Tiny, tmp_path: Path) -> None:
    out = tmp_path / "ort"
    result = msbuild(*tiny.args(tmp_path / "cache", out, "--source", "pip"))
    assert_sdk_missing(result, out)
    assert f"only in {TINY_TOP}.zip" in result.stderr
    assert "url: not allowed by --source pip" in result.stderr
    assert f"--mirror DIR with {TINY_TOP}.zip" in result.stderr
    assert "downloads.invalid" in result.stderr


def test_offline_without_the_zip_has_no_sdk(tiny: Tiny, tmp_path: Path) -> None:
    out = tmp_path / "ort"
    result = msbuild(
        "--profile", str(tiny.profile), "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
        "--offline",
    )  # fmt: skip
    assert_sdk_missing(result, out)
    assert "url: network disabled by --offline" in result.stderr
    assert "pip: has no C/C++ headers or import libraries" in result.stderr


def test_a_profile_without_a_release_zip_fails_before_any_download(tmp_path: Path) -> None:
    out = tmp_path / "ort"
    result = msbuild(
        "--profile", "ort-1.19.2-directml", "--cache-dir", str(tmp_path), "--out", str(out)
    )
    assert result.returncode == ExitCode.SDK
    assert "no artifact has a source with ORT's C/C++ headers" in result.stderr
    assert not out.exists() and not (tmp_path / "blobs").exists()


@pytest.mark.realdata
def test_the_wheels_in_the_cache_are_not_taken_for_the_sdk(gpu_cache: Path, tmp_path: Path) -> None:
    """The session's cache holds the onnxruntime-gpu wheel, not the zip: no SDK, exit 16."""
    out = tmp_path / "ort"
    result = msbuild("--cache-dir", str(gpu_cache), "--out", str(out), "--offline")
    assert_sdk_missing(result, out)
    assert "only in onnxruntime-win-x64-gpu-1.19.2.zip" in result.stderr
    assert "allow a connection to github.com" in result.stderr


# --- xbuild runs the generated files ---------------------------------------------------------


@pytest.fixture(scope="session")
def xbuild() -> str:
    found = shutil.which("xbuild")
    require(found is not None, "xbuild is not installed (apt-get install mono-xbuild)")
    assert found is not None
    return found


def write_project(folder: Path, bundle: Path) -> Path:
    """A project with xbuild's common targets (Build records file writes, Clean deletes them)
    and a stub compile step, importing the bundle's files by absolute, escaped path."""
    props, targets = (
        xml_text(msbuild_escape(str(bundle / name))) for name in (PROPS_NAME, TARGETS_NAME)
    )
    project = folder / "app.proj"
    folder.mkdir(parents=True, exist_ok=True)
    project.write_text(
        f"""<?xml version="1.0" encoding="utf-8"?>
<Project DefaultTargets="Build" ToolsVersion="4.0" xmlns="http://schemas.microsoft.com/developer/msbuild/2003">
  <PropertyGroup>
    <Platform Condition="'$(Platform)'==''">x64</Platform>
    <OutputType>Library</OutputType>
    <AssemblyName>app</AssemblyName>
    <OutputPath>out/</OutputPath>
    <OutDir>$(MSBuildProjectDirectory)/out/</OutDir>
    <IntermediateOutputPath>obj/</IntermediateOutputPath>
  </PropertyGroup>
  <Import Project="{props}" />
  <Import Project="$(MSBuildToolsPath)/Microsoft.CSharp.targets" />
  <Import Project="{targets}" />
  <Target Name="CoreCompile">
    <MakeDir Directories="$(IntermediateOutputPath)" />
    <Touch Files="@(IntermediateAssembly)" AlwaysCreate="true" />
  </Target>
  <Target Name="ShowOrtBundle" AfterTargets="Build">
    <Message Importance="high" Text="ORT-BUNDLE include=$(OrtBundleIncludeDir)" />
    <Message Importance="high" Text="ORT-BUNDLE libdir=$(OrtBundleLibDir)" />
    <Message Importance="high" Text="ORT-BUNDLE libs=$(OrtBundleLibraries)" />
  </Target>
</Project>
""",
        encoding="utf-8",
    )
    return project


def run_xbuild(xbuild: str, project: Path, *args: str) -> dict[str, str]:
    result = subprocess.run(
        [xbuild, "/nologo", "/v:minimal", *args, str(project)],
        capture_output=True,
        text=True,
        cwd=project.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    shown = {}
    for line in result.stdout.splitlines():
        if "ORT-BUNDLE " in line:
            key, _, value = line.split("ORT-BUNDLE ", 1)[1].partition("=")
            shown[key] = value
    return shown


def dlls_in(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.glob("*.dll") if p.name != STUB_ASSEMBLY}


def test_xbuild_copies_every_dll_once_and_evaluates_the_paths(
    xbuild: str, tiny_folder: Path, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "app", tiny_folder)
    out = project.parent / "out"
    shown = run_xbuild(xbuild, project)
    assert dlls_in(out) == dlls_in(tiny_folder / "bin")
    for name in dlls_in(out):
        assert (out / name).read_bytes() == (tiny_folder / "bin" / name).read_bytes()
    assert Path(shown["include"]) == tiny_folder / "include"
    assert Path(shown["libdir"]) == tiny_folder / "lib"
    assert shown["libs"] == "onnxruntime.lib"
    assert (Path(shown["include"]) / "onnxruntime_c_api.h").is_file()
    assert (Path(shown["libdir"]) / shown["libs"]).is_file()

    before = stamps(out, but=STUB_ASSEMBLY)
    run_xbuild(xbuild, project)
    assert stamps(out, but=STUB_ASSEMBLY) == before  # nothing copied: same inodes and times


def test_xbuild_clean_removes_the_copies_and_rebuild_restores_them(
    xbuild: str, tiny_folder: Path, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "app", tiny_folder)
    out = project.parent / "out"
    run_xbuild(xbuild, project)
    recorded = (project.parent / "obj" / "app.proj.FilesWrittenAbsolute.txt").read_text()
    for name in dlls_in(tiny_folder / "bin"):
        assert str(out / name) in recorded.splitlines()
    run_xbuild(xbuild, project, "/t:Clean")
    assert dlls_in(out) == {}
    run_xbuild(xbuild, project, "/t:Rebuild")
    assert dlls_in(out) == dlls_in(tiny_folder / "bin")


def test_xbuild_for_another_platform_adds_nothing(
    xbuild: str, tiny_folder: Path, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "app", tiny_folder)
    shown = run_xbuild(xbuild, project, "/p:Platform=Win32")
    assert shown == {"include": "", "libdir": "", "libs": ""}
    assert dlls_in(project.parent / "out") == {}


# --- examples/hello/hello.vcxproj ------------------------------------------------------------


def stub_vc_targets(folder: Path) -> Path:
    """Stand-ins for Visual Studio's C++ targets: no compiler, only what the example's imports
    need (an OutDir as VS sets it, a Build target)."""
    folder.mkdir(parents=True)
    project = '<Project xmlns="http://schemas.microsoft.com/developer/msbuild/2003">{}</Project>\n'
    (folder / "Microsoft.Cpp.Default.props").write_text(
        project.format(
            "<PropertyGroup><OutDir>$(MSBuildProjectDirectory)/$(Platform)/"
            "$(Configuration)/</OutDir></PropertyGroup>"
        )
    )
    (folder / "Microsoft.Cpp.props").write_text(project.format(""))
    (folder / "Microsoft.Cpp.targets").write_text(project.format('<Target Name="Build" />'))
    return folder


def test_example_vcxproj_imports_the_folder_laid_out_beside_it(
    xbuild: str, tiny: Tiny, tmp_path: Path
) -> None:
    hello = tmp_path / "hello"
    hello.mkdir()
    shutil.copy(HELLO / "hello.vcxproj", hello)
    missing = subprocess.run(
        [xbuild, "/nologo", "/v:minimal", "/p:Configuration=Release", "/p:Platform=x64",
         f"/p:VCTargetsPath={stub_vc_targets(tmp_path / 'vc')}/", "hello.vcxproj"],
        capture_output=True, text=True, cwd=hello,
    )  # fmt: skip
    assert missing.returncode != 0 and "bundle msbuild --out msbuild" in missing.stdout
    laid_out = msbuild(*tiny.args(tmp_path / "cache", hello / "msbuild"))
    assert laid_out.returncode == 0, laid_out.stderr
    built = subprocess.run(
        [xbuild, "/nologo", "/v:minimal", "/p:Configuration=Release", "/p:Platform=x64",
         f"/p:VCTargetsPath={tmp_path / 'vc'}/", "hello.vcxproj"],
        capture_output=True, text=True, cwd=hello,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout
    assert dlls_in(hello / "x64" / "Release") == dlls_in(hello / "msbuild" / "bin")


def test_example_vcxproj_imports_props_early_and_targets_late() -> None:
    root = ET.parse(HELLO / "hello.vcxproj").getroot()
    imports = [element.get("Project") for element in root.iter(f"{MSB}Import")]
    assert "msbuild\\ort-bundle.props" in imports and "msbuild\\ort-bundle.targets" in imports
    cpp_props = imports.index("$(VCTargetsPath)\\Microsoft.Cpp.props")
    cpp_targets = imports.index("$(VCTargetsPath)\\Microsoft.Cpp.targets")
    assert cpp_props < imports.index("msbuild\\ort-bundle.props") < cpp_targets
    assert cpp_targets < imports.index("msbuild\\ort-bundle.targets")


# --- the real zip layout, served over HTTP, from the real wheel DLLs -------------------------


@dataclass(frozen=True)
class Served:
    replica: Replica
    profile: Path
    cache: Path
    mirror: str  # the server's URL of the folder holding the zip
    server: HttpServer


@pytest.fixture(scope="module")
def served(
    replica: Replica, gpu_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with scratch(tmp_path_factory, "served") as work, HttpServer() as server:
        profile = replica_profile(work / "replica.toml", replica)
        server.serve_directory("/mirror/", replica.path.parent)
        cache = linked_cache(gpu_cache, work / "cache", without=ORT_GPU_WHEEL_SHA256)
        yield Served(replica, profile, cache, server.url("/mirror"), server)


def zip_member(replica: Replica, name: str) -> bytes:
    with zipfile.ZipFile(replica.path) as archive:
        return archive.read(f"{TOP}/{name}")


@pytest.fixture(scope="module")
def fetched(served: Served) -> Mapping[str, object]:
    result = bundle_from_cache(
        "fetch", "--profile", str(served.profile), "--cache-dir", str(served.cache),
        "--mirror", served.mirror, "--allow-http", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    items = {item["artifact"]: item for item in json.loads(result.stdout)["artifacts"]}
    ort = items["onnxruntime"]
    assert isinstance(ort, dict)
    return ort


@pytest.mark.realdata
def test_fetch_takes_the_served_zip_and_extracts_its_sdk(
    served: Served, fetched: Mapping[str, object]
) -> None:
    assert fetched["origin"] == f"{served.mirror}/{ZIP_NAME}"
    assert (fetched["source"], fetched["sha256"], fetched["sdk"]) == (
        "url",
        served.replica.sha256,
        True,
    )
    # One download; on a loaded machine a stalled read may be resumed (206), never restarted.
    first, *resumed = [r.status for r in served.server.requests_for(f"/mirror/{ZIP_NAME}")]
    assert (first, set(resumed) - {206}) == (200, set())
    tree = Path(str(fetched["folder"]))
    members = files_under(tree / TOP)
    headers = [member for member in members if member.startswith("include/")]
    assert headers == sorted(f"include/{header}" for header in HEADERS)
    assert [m for m in members if m.startswith("lib/")] == sorted(
        f"lib/{stem}.{ext}"
        for stem in (
            "onnxruntime",
            "onnxruntime_providers_shared",
            "onnxruntime_providers_cuda",
            "onnxruntime_providers_tensorrt",
        )
        for ext in ("dll", "lib")
    )  # the .pdb files stay in the archive
    assert "LICENSE" in members and "ThirdPartyNotices.txt" in members


@pytest.mark.realdata
def test_build_takes_dlls_and_licences_from_the_zip(
    served: Served, fetched: Mapping[str, object], tmp_path: Path
) -> None:
    out = tmp_path / "dist"
    result = bundle_from_cache(
        "build", str(HELLO / "hello.exe"), "--profile", str(served.profile),
        "--cache-dir", str(served.cache), "--out", str(out), "--link", "--no-iss",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lock = locked(out)
    for name in (
        "onnxruntime.dll",
        "onnxruntime_providers_cuda.dll",
        "onnxruntime_providers_shared.dll",
    ):
        item = lock[name]
        assert item.archive_sha256 == served.replica.sha256
        assert item.member == f"{TOP}/lib/{name}"
        assert (
            item.origin
            == "https://github.com/microsoft/onnxruntime/releases/download/v1.19.2/" + ZIP_NAME
        )
    assert (out / "licenses/onnxruntime/LICENSE").read_bytes() == zip_member(
        served.replica, "LICENSE"
    )
    assert (
        lock["licenses/onnxruntime/ThirdPartyNotices.txt"].member == f"{TOP}/ThirdPartyNotices.txt"
    )


@pytest.fixture(scope="module")
def real_folder(
    served: Served, fetched: Mapping[str, object], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    with scratch(tmp_path_factory, "real-msbuild") as work:
        out = work / "ort"
        result = msbuild(
            "--profile", str(served.profile), "--cache-dir", str(served.cache), "--out", str(out),
            "--link",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        yield out


@pytest.mark.realdata
def test_msbuild_takes_headers_and_import_libraries_from_the_zip(
    served: Served, real_folder: Path, gpu_cache: Path
) -> None:
    names = files_under(real_folder)
    assert [n for n in names if n.startswith("include/")] == sorted(f"include/{h}" for h in HEADERS)
    for header in HEADERS:
        assert (real_folder / "include" / header).read_bytes() == zip_member(
            served.replica, f"include/{header}"
        )
    libraries = served.replica.import_libraries
    shipped = (
        "onnxruntime.lib",
        "onnxruntime_providers_cuda.lib",
        "onnxruntime_providers_shared.lib",
    )
    assert [n for n in names if n.startswith("lib/")] == [f"lib/{name}" for name in shipped]
    for name in shipped:
        assert (real_folder / "lib" / name).read_bytes() == libraries[name]
    bins = [n.removeprefix("bin/") for n in names if n.startswith("bin/")]
    assert len(bins) == 21 and "cudnn_ops64_9.dll" in bins and "vcruntime140_1.dll" in bins
    lock = locked(real_folder)
    assert lock["bin/onnxruntime.dll"].archive_sha256 == served.replica.sha256
    assert lock["bin/cudnn_ops64_9.dll"].origin == "pip:nvidia-cudnn-cu12==9.1.0.70"
    assert "licenses/cudnn/License.txt" in lock and "licenses/onnxruntime/LICENSE" in lock


@pytest.mark.realdata
def test_msbuild_again_is_a_no_op(served: Served, real_folder: Path) -> None:
    before = rendered_elsewhere_excluded(real_folder)
    again = msbuild(
        "--profile", str(served.profile), "--cache-dir", str(served.cache),
        "--out", str(real_folder), "--link",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "copied 0 (0 B), linked 0" in again.stdout and "hashed 0 files" in again.stdout
    assert rendered_elsewhere_excluded(real_folder) == before


HEADER_BYTES = 4096  # of each real DLL in the layout's shadow: its PE headers


def shadow_layout(real: Path, shadow: Path) -> Path:
    """`real`'s layout with the same names, hard-linked, but each DLL of bin/ a new file of its
    first HEADER_BYTES: the .targets copy `bin/*.dll` by name, whatever the bytes, and the
    real closure's 2.6 GB copied by xbuild would prove nothing the names do not (issue 38)."""
    for source in real.rglob("*"):
        target = shadow / source.relative_to(real)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            target.mkdir(exist_ok=True)
        elif source.parent == real / "bin" and source.suffix == ".dll":
            with source.open("rb") as dll:
                target.write_bytes(dll.read(HEADER_BYTES))
        else:
            os.link(source, target)
    return shadow


@pytest.mark.realdata
def test_xbuild_copies_the_real_closure_once(
    xbuild: str, real_folder: Path, tmp_path: Path
) -> None:
    """The real GPU layout's props and targets, with its 21 DLLs' names (cut to their headers:
    shadow_layout); the copying itself is the tiny layout's tests' too, byte for byte."""
    layout = shadow_layout(real_folder, tmp_path / "ort")
    project = write_project(tmp_path / "app", layout)
    out = project.parent / "out"
    shown = run_xbuild(xbuild, project)
    assert dlls_in(out) == dlls_in(layout / "bin") and len(dlls_in(out)) == 21
    assert set(dlls_in(out)) == {p.name for p in (real_folder / "bin").glob("*.dll")}
    assert (out / "onnxruntime.dll").read_bytes() == (
        layout / "bin" / "onnxruntime.dll"
    ).read_bytes()
    assert Path(shown["include"]) == layout / "include" and shown["libs"] == "onnxruntime.lib"
    before = stamps(out, but=STUB_ASSEMBLY)
    run_xbuild(xbuild, project)
    assert stamps(out, but=STUB_ASSEMBLY) == before
