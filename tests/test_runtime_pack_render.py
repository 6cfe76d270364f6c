"""The runtime pack as data and as scripts (issue 32), without Inno Setup: its identity, the
pack URL's checks, and what --runtime-pack renders (tests/test_runtime_pack.py compiles and
installs them under Wine)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from bundler.closure.lock import LockedFile, runtime_pack
from bundler.errors import ConfigError
from bundler.render.engine import Templates
from bundler.render.iss import write_iss
from bundler.render.pack_iss import PACK_SCRIPT, WEB_SCRIPT
from bundler.render.render_settings import IssSettings, checked_pack_url
from tests.support.locks import locked, sample_lock

TEMPLATES = Templates(None)


def test_the_pack_is_the_runtime_files_hashed_by_name_and_content() -> None:
    files = (
        locked("onnxruntime.dll"),
        locked("licenses/onnxruntime/LICENSE", "license"),
        LockedFile("hello.exe", "app", "a" * 64, 10),
        LockedFile("bundle-doctor.exe", "doctor", "b" * 64, 10),
        LockedFile("vc_redist.x64.exe", "installer", "c" * 64, 10),
    )
    pack = runtime_pack(files)
    assert pack is not None
    assert pack.files == ("licenses/onnxruntime/LICENSE", "onnxruntime.dll")
    lines = "".join(f"{f.name}\t{f.sha256}\n" for f in sorted(files[:2], key=lambda f: f.name))
    assert pack.sha256 == hashlib.sha256(lines.encode()).hexdigest()
    assert pack.size == sum(item.size for item in files[:2])
    assert runtime_pack(tuple(reversed(files))) == pack  # the order of the lock does not count
    changed = (replace(files[0], sha256="d" * 64), *files[1:])
    assert runtime_pack(changed).sha256 != pack.sha256  # type: ignore[union-attr]
    assert runtime_pack(files[2:]) is None  # nothing of a runtime


@pytest.mark.parametrize(
    "url",
    ["https://downloads.example.com/packs", "http://127.0.0.1:8000/packs", "http://localhost/p"],
)
def test_pack_urls_https_or_loopback(url: str) -> None:
    assert checked_pack_url(url) == url


@pytest.mark.parametrize("url", ["http://example.com/packs", "ftp://x/packs", "packs"])
def test_other_pack_urls_are_refused_with_the_fix(url: str) -> None:
    with pytest.raises(ConfigError, match="not an https:// URL; publish the runtime pack"):
        IssSettings(pack_url=url).checked()


def _pack_name(scripts: dict[str, str]) -> str:
    """The compiled pack's file name (without .exe), as setup.iss defines it for ISPP."""
    return scripts["setup.iss"].split('#define PackName "', 1)[1].split('"', 1)[0]


def sample_pack_sha256() -> str:
    pack = runtime_pack(sample_lock().files)
    assert pack is not None
    return pack.sha256


def _rendered(tmp_path: Path, settings: IssSettings) -> dict[str, str]:
    lock = sample_lock()
    lock = replace(lock, runtime_pack=runtime_pack(lock.files))
    write_iss(TEMPLATES, lock, tmp_path, tmp_path / "setup.iss", settings, tmp_path / "packs")
    return {p.name: p.read_text(encoding="utf-8-sig") for p in tmp_path.glob("*.iss")}


def test_runtime_pack_renders_the_pack_script_and_an_app_script_without_its_files(
    tmp_path: Path,
) -> None:
    scripts = _rendered(tmp_path, IssSettings(runtime_pack=True))
    assert sorted(scripts) == sorted({"setup.iss", PACK_SCRIPT})
    setup, pack = scripts["setup.iss"], scripts[PACK_SCRIPT]
    for name in ("onnxruntime.dll", "cudnn64_9.dll", "licenses\\onnxruntime\\LICENSE"):
        assert f'Source: "{name}"' in pack and f'Source: "{name}"' not in setup
        assert f'Type: files; Name: "{{app}}\\{name}"' in setup  # the app's uninstaller
    assert 'Source: "hello.exe"' in setup and 'Source: "hello.exe"' not in pack
    assert "Uninstallable=no" in pack
    assert "PackExe" not in setup.split("[Files]")[1].split("[Code]")[0]  # not stored by ISCC
    assert "DownloadTemporaryFile" not in setup
    (append,) = (line for line in setup.splitlines() if line.startswith("SignTool="))
    assert append.startswith("SignTool=bundlepack cmd /c call $q<#AddBackslash(SourcePath)#>")
    assert append.endswith(f" <#PackName#> <#PackParts#> {sample_pack_sha256()}")
    assert "SignedUninstaller=no" in setup.splitlines()  # no [sign]: nothing else signs
    batch = (tmp_path / "bundlepack.cmd").read_bytes()
    assert b"\r\n" in batch and b"\n" not in batch.replace(b"\r\n", b"")  # cmd's line ends


def test_a_pack_url_adds_the_web_setup_which_downloads_instead_of_storing(tmp_path: Path) -> None:
    settings = IssSettings(runtime_pack=True, pack_url="https://downloads.example.com/packs/")
    scripts = _rendered(tmp_path, settings)
    web = scripts[WEB_SCRIPT]
    assert "nocompression" not in web
    assert "PackFolderUrl = 'https://downloads.example.com/packs/';" in web
    assert "PackExeName = '<#PackName#>.exe';" in web
    assert "Url := PackFolderUrl + Name;" in web
    assert "DownloadTemporaryFile(Url, Name, Sha256, nil)" in web
    assert "#define HashPath PackExe\n#expr ReadHash\n#define PackSha256 HashValue\n" in web
    assert "    #define public HashValue GetSHA256OfFile(HashPath)" in web
    assert "OutputBaseFilename=hello-1.0.0.0-setup-web" in web


def test_the_compiled_pack_name_changes_with_its_script(tmp_path: Path) -> None:
    """A pack compiled with other settings is another file: never reused for this script."""
    fast = _rendered(tmp_path / "a", IssSettings(runtime_pack=True, compression="zip/1"))
    small = _rendered(tmp_path / "b", IssSettings(runtime_pack=True))
    assert _pack_name(fast) != _pack_name(small)
    assert _pack_name(fast).split("-")[2] == _pack_name(small).split("-")[2]  # the same pack


def test_the_pack_comes_in_parts_of_pack_part_mb(tmp_path: Path) -> None:
    """Inno Setup's disk slices, in decimal MB; another part size is another pack file."""
    default = _rendered(tmp_path / "a", IssSettings(runtime_pack=True))
    assert "DiskSpanning=yes" in default[PACK_SCRIPT].splitlines()
    assert "DiskSliceSize=100000000" in default[PACK_SCRIPT].splitlines()
    small = _rendered(tmp_path / "b", IssSettings(runtime_pack=True, pack_part_mb=4))
    assert "DiskSliceSize=4000000" in small[PACK_SCRIPT].splitlines()
    assert _pack_name(small) != _pack_name(default)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (IssSettings(runtime_pack=True, pack_part_mb=3), "pack_part_mb 3 is not between 4 and"),
        (IssSettings(runtime_pack=True, pack_part_mb=2001), "makes no part over 2100 MB"),
        (IssSettings(pack_part_mb=50), "pack_part_mb sizes the runtime pack's parts: add"),
    ],
)
def test_a_pack_part_size_out_of_range_or_without_a_pack_is_refused(
    settings: IssSettings, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        settings.checked()
