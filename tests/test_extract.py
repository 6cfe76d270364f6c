"""Extraction of release archives: only DLLs and licence files come out, cached by SHA-256,
and an unsafe or corrupt archive is refused as a whole with nothing written.

Archives are built here with zipfile / py7zr; unsafe ones by patching real archives' headers.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

import py7zr
import pytest

from bundler.acquire import extract as extract_module
from bundler.acquire.extract import MARKER, Extracted, extract, is_extracted, wanted_member
from bundler.acquire.unpack import CHUNK
from bundler.errors import ArchiveError, ExitCode, InputFileError

ORT = "onnxruntime-win-x64-gpu-1.19.2"
ORT_MEMBERS = {
    f"{ORT}/lib/onnxruntime.dll": b"MZ ort" * 1000,
    f"{ORT}/lib/onnxruntime_providers_cuda.dll": b"MZ cuda provider" * 500,
    f"{ORT}/lib/onnxruntime.lib": b"!<arch> import library",
    f"{ORT}/lib/onnxruntime.pdb": b"Microsoft C/C++ MSF 7.00" * 100,
    f"{ORT}/include/onnxruntime_c_api.h": b"#pragma once\n",
    f"{ORT}/include/onnxruntime_cxx_api.h": b"#pragma once\n",
    f"{ORT}/LICENSE": b"MIT License\n",
    f"{ORT}/ThirdPartyNotices.txt": b"Third party notices\n",
    f"{ORT}/README.md": b"# ONNX Runtime\n",
    f"{ORT}/VERSION_NUMBER": b"1.19.2\n",
}
ORT_WANTED = [
    f"{ORT}/LICENSE",
    f"{ORT}/ThirdPartyNotices.txt",
    f"{ORT}/lib/onnxruntime.dll",
    f"{ORT}/lib/onnxruntime_providers_cuda.dll",
]


# Extracted files are 0o644; Windows keeps only the read-only attribute of a mode, and a file
# without it reads as 0o666 there.
WRITTEN_MODE = 0o666 if os.name == "nt" else 0o644


def write_zip(
    path: Path, members: Mapping[str, bytes], mode: int | None = None, *, dirs: bool = False
) -> Path:
    """A deflated zip of `members`; `mode` sets Unix permissions in the archive, `dirs` adds
    folder entries the way most zip tools do."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        if dirs:
            folders = {name.rsplit("/", 1)[0] + "/" for name in members if "/" in name}
            for folder in sorted(folders):
                archive.writestr(folder, b"")
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.filename = name  # as given, on Windows too (ZipInfo turns "\\" into "/" there)
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode is not None:
                info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, data)
    return path


def write_7z(path: Path, members: Mapping[str, bytes]) -> Path:
    with py7zr.SevenZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(data, name)
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir())


def assert_nothing_written(root: Path) -> None:
    """No tree, no temp folder, no file: the extract root is absent or empty."""
    assert not root.exists() or list(root.iterdir()) == []


def patch_zip_header(path: Path, name: str, *, file_size: int, crc: int | None = None) -> None:
    """Rewrite a member's uncompressed size (and CRC) in its local and central headers, the
    way a lying or malicious archive would; the compressed data stays as it is."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
    crc = info.CRC if crc is None else crc
    local = info.header_offset
    assert data[local : local + 4] == b"PK\x03\x04"
    struct.pack_into("<L", data, local + 14, crc)
    struct.pack_into("<L", data, local + 22, file_size)
    encoded = name.encode()
    central = data.find(b"PK\x01\x02")
    while data[central + 46 : central + 46 + len(encoded)] != encoded:
        central = data.find(b"PK\x01\x02", central + 4)
        assert central >= 0, f"no central directory entry for {name}"
    struct.pack_into("<L", data, central + 16, crc)
    struct.pack_into("<L", data, central + 24, file_size)
    path.write_bytes(bytes(data))


def rename_in_7z(path: Path, old: str, new: str) -> None:
    """Rename a member of an unencoded-header 7z in place (py7zr refuses to write unsafe
    names) and fix the header CRCs, so only our own validation can catch it."""
    assert len(old) == len(new)
    data = bytearray(path.read_bytes())
    at = data.find(old.encode("utf-16-le"))
    assert at > 0, f"{old} not found in the 7z header"
    data[at : at + 2 * len(old)] = new.encode("utf-16-le")
    offset, size = struct.unpack_from("<QQ", data, 12)
    header = data[32 + offset : 32 + offset + size]
    struct.pack_into("<L", data, 28, zlib.crc32(header))
    struct.pack_into("<L", data, 8, zlib.crc32(data[12:32]))
    path.write_bytes(bytes(data))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "extracted"


# --- wanted_member ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "onnxruntime.dll",
        f"{ORT}/lib/onnxruntime.dll",
        "nvidia/cudnn/bin/CUDNN64_9.DLL",
        "bin\\cublas64_12.Dll",
        f"{ORT}/LICENSE",
        "nvidia_cudnn_cu12-9.1.0.70.dist-info/License.txt",
        f"{ORT}/ThirdPartyNotices.txt",
        "EULA.txt",
        "docs/licence.md",
        "NOTICE",
    ],
)
def test_wanted_member_keeps_dlls_and_licence_files(name: str) -> None:
    assert wanted_member(name)


@pytest.mark.parametrize(
    "name",
    [
        f"{ORT}/lib/onnxruntime.lib",
        f"{ORT}/lib/onnxruntime.pdb",
        f"{ORT}/include/onnxruntime_c_api.h",
        f"{ORT}/README.md",
        "nvidia/cudnn/bin/",
        "license/readme.txt",  # the word is in a folder name, not in the file's name
        "onnxruntime.dll.sig",
        "NVIDIA_SLA_cuDNN_Support.txt",
    ],
)
def test_wanted_member_drops_everything_else(name: str) -> None:
    assert not wanted_member(name)


def test_wanted_member_licence_names_match_basenames_case_insensitively() -> None:
    names = ["NVIDIA_SLA_cuDNN_Support.txt"]
    assert wanted_member("cudnn/nvidia_sla_cudnn_support.TXT", names)
    assert wanted_member("a\\b\\NVIDIA_SLA_cuDNN_Support.txt", names)
    assert not wanted_member("cudnn/other.txt", names)


# --- what comes out --------------------------------------------------------------------------


def test_ort_release_zip_gives_only_dlls_and_licences_at_their_paths(
    tmp_path: Path, root: Path
) -> None:
    archive = write_zip(tmp_path / f"{ORT}.zip", ORT_MEMBERS, dirs=True)
    sha = sha256_of(archive)

    result = extract(archive, sha, root)

    assert result == Extracted(root / sha, tuple(ORT_WANTED), reused=False)
    assert files_under(result.root) == sorted([*ORT_WANTED, MARKER])
    for name in ORT_WANTED:
        assert (result.root / name).read_bytes() == ORT_MEMBERS[name]
    assert [p.name for p in root.iterdir()] == [sha]  # no temp folder left beside the tree


def test_wheel_members_come_out_with_licence_names_from_the_profile(
    tmp_path: Path, root: Path
) -> None:
    members = {
        "nvidia/cudnn/bin/cudnn64_9.dll": b"MZ cudnn",
        "nvidia/cudnn/bin/cudnn_graph64_9.dll": b"MZ graph",
        "nvidia/cudnn/include/cudnn.h": b"#define CUDNN_MAJOR 9",
        "nvidia/cudnn/NVIDIA_SLA_cuDNN_Support.txt": b"SLA",
        "nvidia_cudnn_cu12-9.1.0.70.dist-info/License.txt": b"NVIDIA licence",
        "nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD": b"...",
    }
    archive = write_zip(tmp_path / "nvidia_cudnn_cu12-9.1.0.70-py3-none-win_amd64.whl", members)

    result = extract(archive, sha256_of(archive), root, ["nvidia_sla_cudnn_support.txt"])

    assert result.members == (
        "nvidia/cudnn/NVIDIA_SLA_cuDNN_Support.txt",
        "nvidia/cudnn/bin/cudnn64_9.dll",
        "nvidia/cudnn/bin/cudnn_graph64_9.dll",
        "nvidia_cudnn_cu12-9.1.0.70.dist-info/License.txt",
    )
    for name in result.members:
        assert (result.root / name).read_bytes() == members[name]


def test_7z_archive_gives_only_dlls_and_licences(tmp_path: Path, root: Path) -> None:
    members = {
        "cudnn-windows-x86_64-9.1.0.70_cuda12/bin/cudnn64_9.dll": b"MZ cudnn" * 5000,
        "cudnn-windows-x86_64-9.1.0.70_cuda12/include/cudnn.h": b"#define CUDNN_MAJOR 9",
        "cudnn-windows-x86_64-9.1.0.70_cuda12/LICENSE": b"NVIDIA licence",
    }
    archive = write_7z(tmp_path / "cudnn.7z", members)

    result = extract(archive, sha256_of(archive), root)

    wanted = sorted(name for name in members if not name.endswith(".h"))
    assert result.members == tuple(wanted)
    assert files_under(result.root) == sorted([*wanted, MARKER])
    for name in wanted:
        written = result.root / name
        assert written.read_bytes() == members[name]
        assert stat.S_IMODE(written.stat().st_mode) == WRITTEN_MODE


def read_only_7z(path: Path, members: Mapping[str, bytes]) -> Path:
    """A 7z whose members are read-only both ways: FILE_ATTRIBUTE_READONLY and mode 0o444."""
    with py7zr.SevenZipFile(path, "w") as handle:
        handle.set_encoded_header_mode(False)
        for name, data in members.items():
            handle.writestr(data, name)
    for name in members:
        read_only = 0x20 | 0x1 | UNIX_EXTENSION | (stat.S_IFREG | 0o444) << 16
        set_7z_attributes(path, name, read_only)
    return path


@pytest.mark.parametrize(
    "make",
    [
        lambda path, members: write_zip(path.with_suffix(".zip"), members, 0o4777),
        lambda path, members: write_zip(path.with_suffix(".zip"), members, 0o444),
        read_only_7z,
    ],
    ids=["zip-4777", "zip-444", "7z-read-only"],
)
def test_archive_permissions_are_never_applied(
    tmp_path: Path, root: Path, make: Callable[[Path, Mapping[str, bytes]], Path]
) -> None:
    """A read-only file would make the next rebuild over it ask Windows to clear the attribute
    first; set-uid bits have no business in a DLL folder."""
    archive = make(tmp_path / "modes.7z", {"bin/a.dll": b"a", "bin/b.dll": b"b"})

    umask = os.umask(0o077)  # 0o644 is set, not left to the umask
    try:
        result = extract(archive, sha256_of(archive), root)
    finally:
        os.umask(umask)

    assert result.members == ("bin/a.dll", "bin/b.dll")
    for name in result.members:
        assert stat.S_IMODE((result.root / name).stat().st_mode) == WRITTEN_MODE


def test_parallel_extraction_gives_identical_bytes(tmp_path: Path) -> None:
    members: dict[str, bytes] = {}
    for index in range(20):
        size = 1000 + index * 120_000  # up to ~2.3 MB: several read chunks per member
        members[f"bin/lib{index:02}.dll"] = random.Random(index).randbytes(size)
    members["bin/zeros.dll"] = bytes(5 << 20)  # inflates to many output chunks per input block
    archive = write_zip(tmp_path / "many.zip", members)
    sha = sha256_of(archive)

    serial = extract(archive, sha, tmp_path / "serial", workers=1)
    parallel = extract(archive, sha, tmp_path / "parallel", workers=8)

    assert serial.members == parallel.members == tuple(sorted(members))
    for name, data in members.items():
        assert (serial.root / name).read_bytes() == data
        assert (parallel.root / name).read_bytes() == data


@pytest.mark.parametrize("extra", [-1, 0, 1, 10, CHUNK + 1])
def test_highly_compressible_members_inflate_completely(
    tmp_path: Path, root: Path, extra: int
) -> None:
    # Some of these sizes leave inflated output pending inside zlib once all input is read.
    data = bytes(CHUNK + extra)
    archive = write_zip(tmp_path / "zeros.zip", {"bin/zeros.dll": data})

    result = extract(archive, sha256_of(archive), root)

    assert (result.root / "bin/zeros.dll").read_bytes() == data


def test_stored_members_are_extracted_too(tmp_path: Path, root: Path) -> None:
    archive = tmp_path / "stored.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as handle:
        handle.writestr("bin/a.dll", b"stored bytes" * 100_000)

    result = extract(archive, sha256_of(archive), root)

    assert (result.root / "bin/a.dll").read_bytes() == b"stored bytes" * 100_000


# --- cache -----------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_complete_tree_is_reused_without_opening_the_archive(
    tmp_path: Path, root: Path, damage: str
) -> None:
    archive = write_zip(tmp_path / f"{ORT}.zip", ORT_MEMBERS)
    sha = sha256_of(archive)
    first = extract(archive, sha, root)
    if damage == "delete":
        archive.unlink()
    else:
        archive.write_bytes(b"not a zip any more")

    second = extract(archive, sha, root)

    assert second == Extracted(first.root, first.members, reused=True)
    assert (second.root / f"{ORT}/lib/onnxruntime.dll").is_file()


@pytest.mark.parametrize("kind", ["zip", "7z"])
def test_suffixless_cache_blob_is_recognised_by_its_first_bytes(
    tmp_path: Path, root: Path, kind: str
) -> None:
    members = {"bin/cudnn64_9.dll": b"MZ cudnn", "include/cudnn.h": b"#", "LICENSE": b"L"}
    built = tmp_path / f"cudnn.{kind}"
    (write_zip if kind == "zip" else write_7z)(built, members)
    sha = sha256_of(built)
    blob = tmp_path / "blobs" / "sha256" / sha  # how the download cache stores archives
    blob.parent.mkdir(parents=True)
    built.rename(blob)

    first = extract(blob, sha, root)
    blob.unlink()
    second = extract(blob, sha, root)

    assert first.members == ("LICENSE", "bin/cudnn64_9.dll")
    assert (first.root / "bin/cudnn64_9.dll").read_bytes() == b"MZ cudnn"
    assert second == Extracted(first.root, first.members, reused=True)


def test_missing_archive_without_a_tree_is_an_input_error(tmp_path: Path, root: Path) -> None:
    with pytest.raises(InputFileError, match="not found"):
        extract(tmp_path / "gone.zip", "0" * 64, root)


def test_more_licence_names_than_the_cached_tree_had_extracts_again(
    tmp_path: Path, root: Path
) -> None:
    sla = "cudnn/NVIDIA_SLA_cuDNN_Support.txt"
    archive = write_zip(tmp_path / "cudnn.zip", {"cudnn/bin/cudnn64_9.dll": b"MZ", sla: b"SLA"})
    sha = sha256_of(archive)

    narrow = extract(archive, sha, root)
    wide = extract(archive, sha, root, [Path(sla).name])
    again = extract(archive, sha, root)  # fewer names than the tree has: reuse the wider tree

    assert narrow.members == ("cudnn/bin/cudnn64_9.dll",)
    assert (wide.reused, wide.members) == (False, (sla, *narrow.members))
    assert (again.reused, again.members) == (True, wide.members)
    assert (root / sha / sla).read_bytes() == b"SLA"
    assert [p.name for p in root.iterdir()] == [sha]


def test_a_tree_made_for_other_licence_names_grows_and_keeps_theirs(
    tmp_path: Path, root: Path
) -> None:
    members = {"bin/a.dll": b"MZ", "docs/SLA.txt": b"SLA", "docs/TERMS.txt": b"TERMS"}
    archive = write_zip(tmp_path / "cuda.zip", members)
    sha = sha256_of(archive)

    extract(archive, sha, root, ["SLA.txt"])
    both = extract(archive, sha, root, ["TERMS.txt"])

    assert both.members == ("bin/a.dll", "docs/SLA.txt", "docs/TERMS.txt")
    assert files_under(root / sha) == sorted([*members, MARKER])
    assert extract(archive, sha, root, ["SLA.txt", "terms.txt"]).reused is True


def test_stale_temp_and_unmarked_tree_from_a_killed_run_are_not_complete(
    tmp_path: Path, root: Path
) -> None:
    archive = write_zip(tmp_path / f"{ORT}.zip", ORT_MEMBERS)
    sha = sha256_of(archive)
    stale = root / f".{sha}.killed.partial"
    (stale / ORT / "lib").mkdir(parents=True)
    (stale / ORT / "lib/onnxruntime.dll").write_bytes(b"half")
    (stale / MARKER).write_text('{"members": [], "licence_names": []}')
    unmarked = root / sha
    (unmarked / ORT / "lib").mkdir(parents=True)
    (unmarked / ORT / "lib/onnxruntime.dll").write_bytes(b"half")
    (unmarked / "junk.dll").write_bytes(b"junk")

    result = extract(archive, sha, root)

    assert result.reused is False
    assert files_under(result.root) == sorted([*ORT_WANTED, MARKER])
    assert (result.root / f"{ORT}/lib/onnxruntime.dll").read_bytes() == ORT_MEMBERS[
        f"{ORT}/lib/onnxruntime.dll"
    ]
    assert extract(archive, sha, root).reused is True


def test_tree_completed_by_another_process_meanwhile_is_reused(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = write_zip(tmp_path / f"{ORT}.zip", ORT_MEMBERS)
    sha = sha256_of(archive)
    real_write_marker = extract_module._write_marker
    raced: list[Extracted] = []
    started = {"other": False}

    def racing_write_marker(*args: object) -> None:
        if not started["other"]:  # the other process finishes while we write our marker
            started["other"] = True
            raced.append(extract(archive, sha, root))
        real_write_marker(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(extract_module, "_write_marker", racing_write_marker)

    ours = extract(archive, sha, root)

    assert raced[0].reused is False
    assert ours == Extracted(root / sha, raced[0].members, reused=True)
    assert [p.name for p in root.iterdir()] == [sha]  # our temp tree was discarded


def test_sha256_must_be_a_digest(tmp_path: Path, root: Path) -> None:
    archive = write_zip(tmp_path / "a.zip", {"a.dll": b"a"})
    with pytest.raises(ValueError, match="64 hexadecimal"):
        extract(archive, "../../elsewhere", root)
    assert_nothing_written(root)


# --- refused archives ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("../evil.dll", "'..'"),
        ("lib/../../evil.dll", "'..'"),
        ("..\\evil.dll", "'..'"),
        ("/abs.dll", "absolute"),
        ("\\abs.dll", "absolute"),
        ("\\\\server\\share\\abs.dll", "absolute"),
        ("C:\\Windows\\System32\\evil.dll", "Windows drive path"),
        ("C:/evil.dll", "Windows drive path"),
        ("C:evil.dll", "Windows drive path"),
        ("lib/evil.dll:stream", "':'"),
    ],
)
def test_unsafe_path_refuses_the_whole_archive(
    tmp_path: Path, root: Path, member: str, reason: str
) -> None:
    archive = write_zip(tmp_path / "evil.zip", {"lib/good.dll": b"good", member: b"evil"})
    assert archive.read_bytes().count(member.encode()) == 2  # local and central header
    # zipfile on Windows reads a "\\" in a member name as "/", and the message shows its name
    shown = member.replace(os.sep, "/")

    with pytest.raises(ArchiveError, match=reason) as caught:
        extract(archive, sha256_of(archive), root)

    assert str(archive) in str(caught.value)
    assert repr(shown) in str(caught.value)
    assert caught.value.exit_code == ExitCode.ARCHIVE
    assert "\n" not in str(caught.value)
    assert_nothing_written(root)
    assert not (tmp_path / "evil.dll").exists()


def test_unsafe_unwanted_member_refuses_the_archive_too(tmp_path: Path, root: Path) -> None:
    archive = write_zip(tmp_path / "evil.zip", {"lib/good.dll": b"good", "../x/evil.h": b"#"})

    with pytest.raises(ArchiveError, match=r"'\.\./x/evil\.h'"):
        extract(archive, sha256_of(archive), root)
    assert_nothing_written(root)


def test_symlink_member_in_zip_is_refused(tmp_path: Path, root: Path) -> None:
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("lib/good.dll", b"good")
        link = zipfile.ZipInfo("lib/link.dll")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        handle.writestr(link, "/etc/passwd")

    with pytest.raises(ArchiveError, match=r"symbolic link.*") as caught:
        extract(archive, sha256_of(archive), root)

    assert "'lib/link.dll'" in str(caught.value)
    assert_nothing_written(root)


# How a link member's attribute word reads (7z: Windows attributes in the low half, and the
# unix extension flag 0x8000 with st_mode in the high half).
UNIX_EXTENSION = 0x8000
LINK_ATTRIBUTES = {
    # p7zip and py7zr on Linux: S_IFLNK in the unix extension (py7zr adds the reparse bit)
    "unix": UNIX_EXTENSION | (stat.S_IFLNK | 0o777) << 16,
    # 7-Zip for Windows (-snl): FILE_ATTRIBUTE_REPARSE_POINT, no unix extension
    "windows": 0x20 | 0x400,
    # the reparse bit with a unix extension that says "regular file": py7zr writes a file, but
    # 7-Zip for Windows would restore a link
    "windows-and-unix-file": 0x20 | 0x400 | UNIX_EXTENSION | (stat.S_IFREG | 0o644) << 16,
}


def set_7z_attributes(path: Path, name: str, attributes: int) -> None:
    """Set one member's attribute word in an unencoded-header 7z in place (found as the run
    of every member's word, in order) and fix the header CRCs."""
    with py7zr.SevenZipFile(path) as handle:
        members = [(f.filename, f.file_properties()["attributes"]) for f in handle.files]
    words = b"".join(struct.pack("<L", word) for _, word in members)
    data = bytearray(path.read_bytes())
    at = data.find(words)
    assert at > 0 and data.find(words, at + 1) < 0, "attribute words not found once"
    index = [member for member, _ in members].index(name)
    struct.pack_into("<L", data, at + 4 * index, attributes)
    offset, size = struct.unpack_from("<QQ", data, 12)
    struct.pack_into("<L", data, 28, zlib.crc32(data[32 + offset : 32 + offset + size]))
    struct.pack_into("<L", data, 8, zlib.crc32(data[12:32]))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("form", LINK_ATTRIBUTES)
def test_symlink_member_in_7z_is_refused(tmp_path: Path, root: Path, form: str) -> None:
    """Built without a link on disk: under Wine 8, os.symlink reports success and creates
    nothing, so an archive of a folder with a link holds no link (this test once passed by
    that on Windows). The member's data is the link's target, as 7z stores it."""
    archive = tmp_path / "link.7z"
    with py7zr.SevenZipFile(archive, "w") as handle:
        handle.set_encoded_header_mode(False)
        handle.writestr(b"good", "pkg/bin/good.dll")
        handle.writestr(b"good.dll", "pkg/bin/link.dll")
    set_7z_attributes(archive, "pkg/bin/link.dll", LINK_ATTRIBUTES[form])
    with py7zr.SevenZipFile(archive) as handle:  # the archive holds the link we meant
        (link,) = [f for f in handle.files if f.filename == "pkg/bin/link.dll"]
        assert link.file_properties()["attributes"] == LINK_ATTRIBUTES[form]

    with pytest.raises(ArchiveError, match="symbolic link") as caught:
        extract(archive, sha256_of(archive), root)

    assert "'pkg/bin/link.dll'" in str(caught.value)
    assert_nothing_written(root)


def test_traversal_member_in_7z_is_refused(tmp_path: Path, root: Path) -> None:
    archive = tmp_path / "evil.7z"
    with py7zr.SevenZipFile(archive, "w") as handle:
        handle.set_encoded_header_mode(False)
        handle.writestr(b"good", "bin/good.dll")
        handle.writestr(b"evil", "xx/evil.dll")
    rename_in_7z(archive, "xx/evil.dll", "../evil.dll")

    with pytest.raises(ArchiveError, match=r"'\.\./evil\.dll' \('\.\.' in its path\)"):
        extract(archive, sha256_of(archive), root)
    assert_nothing_written(root)
    assert not (tmp_path / "evil.dll").exists()


def test_member_inflating_past_its_declared_size_is_refused(tmp_path: Path, root: Path) -> None:
    content = bytes(range(256)) * 400
    declared = 1000
    archive = write_zip(tmp_path / "liar.zip", {"bin/ok.dll": b"ok", "bin/liar.dll": content})
    # A CRC that matches the first `declared` bytes: zipfile itself silently truncates.
    patch_zip_header(archive, "bin/liar.dll", file_size=declared, crc=zlib.crc32(content[:1000]))
    with zipfile.ZipFile(archive) as handle:
        assert handle.read("bin/liar.dll") == content[:declared]

    with pytest.raises(ArchiveError, match="more than the 1000 bytes its header declares") as e:
        extract(archive, sha256_of(archive), root)

    assert "'bin/liar.dll'" in str(e.value)
    assert_nothing_written(root)


def test_member_shorter_than_its_declared_size_is_corrupt(tmp_path: Path, root: Path) -> None:
    content = bytes(range(256)) * 4
    archive = write_zip(tmp_path / "short.zip", {"bin/short.dll": content})
    patch_zip_header(archive, "bin/short.dll", file_size=len(content) + 10)

    with pytest.raises(ArchiveError, match=r"'bin/short\.dll'.*1024 bytes, header declares 1034"):
        extract(archive, sha256_of(archive), root)
    assert_nothing_written(root)


def test_absurd_declared_size_is_refused_before_writing(tmp_path: Path, root: Path) -> None:
    archive = write_zip(tmp_path / "bomb.zip", {"bin/a.dll": b"a", "bin/bomb.dll": bytes(1000)})
    patch_zip_header(archive, "bin/bomb.dll", file_size=0xFFFF_FFF0)

    with pytest.raises(ArchiveError, match=r"'bin/bomb\.dll'.*more than deflate can produce"):
        extract(archive, sha256_of(archive), root)
    assert_nothing_written(root)


def test_truncated_zip_is_corrupt(tmp_path: Path, root: Path) -> None:
    archive = write_zip(tmp_path / f"{ORT}.zip", ORT_MEMBERS)
    archive.write_bytes(archive.read_bytes()[:-100])

    with pytest.raises(ArchiveError, match=r"corrupt archive.*download it again") as caught:
        extract(archive, sha256_of(archive), root)

    assert str(archive) in str(caught.value)
    assert "\n" not in str(caught.value)
    assert_nothing_written(root)


def test_damaged_member_data_is_corrupt_and_names_the_member(tmp_path: Path, root: Path) -> None:
    content = os.urandom(50_000)
    archive = write_zip(tmp_path / "damaged.zip", {"bin/a.dll": content})
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the deflated data of the only member
    archive.write_bytes(bytes(data))

    with pytest.raises(ArchiveError, match=r"corrupt archive \(member 'bin/a\.dll'\)"):
        extract(archive, sha256_of(archive), root)
    assert_nothing_written(root)


def test_corrupt_7z_is_corrupt(tmp_path: Path, root: Path) -> None:
    archive = write_7z(tmp_path / "cudnn.7z", {"bin/cudnn64_9.dll": os.urandom(20_000)})
    archive.write_bytes(archive.read_bytes()[:-40])

    with pytest.raises(ArchiveError, match=r"corrupt archive.*download it again"):
        extract(archive, sha256_of(archive), root)
    assert_nothing_written(root)


def test_duplicate_names_on_windows_are_refused(tmp_path: Path, root: Path) -> None:
    archive = write_zip(tmp_path / "dup.zip", {"bin/a.dll": b"a", "BIN/A.DLL": b"b"})

    with pytest.raises(ArchiveError, match=r"same file as 'bin/a\.dll' on Windows"):
        extract(archive, sha256_of(archive), root)
    assert_nothing_written(root)


@pytest.mark.parametrize("suffix", [".tar.gz", ".exe", ""])
def test_unsupported_format_is_refused(tmp_path: Path, root: Path, suffix: str) -> None:
    archive = tmp_path / f"cuda{suffix}"
    archive.write_bytes(b"whatever")

    with pytest.raises(ArchiveError, match=r"unsupported archive format.*\.zip, \.whl, \.7z") as e:
        extract(archive, sha256_of(archive), root)

    assert str(archive) in str(e.value)
    assert_nothing_written(root)


def test_is_extracted_tells_whether_extract_would_reuse_the_tree(tmp_path: Path) -> None:
    archive = write_zip(tmp_path / "a.zip", {"bin/a.dll": b"MZ1", "LICENSE": b"text"})
    digest = sha256_of(archive)
    root = tmp_path / "extracted"
    assert not is_extracted(root, digest)
    extract(archive, digest, root)
    assert is_extracted(root, digest)
    assert not is_extracted(root, digest, ["NOTES.txt"])  # more licence names: extract again


# --- the C/C++ SDK of a release zip (headers, import libraries) ------------------------------


@pytest.mark.parametrize(
    ("name", "wanted"),
    [
        (f"{ORT}/include/onnxruntime_c_api.h", True),
        (f"{ORT}/include/core/providers/cuda/cuda_context.h", True),
        ("Include\\Core\\resource.H", True),
        (f"{ORT}/lib/onnxruntime.lib", True),
        ("LIB\\onnxruntime_providers_cuda.LIB", True),
        (f"{ORT}/lib/onnxruntime.pdb", False),
        (f"{ORT}/lib/x64/cudart.lib", False),  # not directly in lib/
        (f"{ORT}/onnxruntime.lib", False),
        (f"{ORT}/src/onnxruntime_c_api.h", False),  # a header outside include/
        (f"{ORT}/include/README.md", False),
        (f"{ORT}/lib/onnxruntime.dll", False),  # a DLL, but not an SDK member
    ],
)
def test_sdk_member_is_headers_under_include_and_libs_in_lib(name: str, wanted: bool) -> None:
    assert extract_module.sdk_member(name) is wanted


ORT_SDK = [
    f"{ORT}/include/onnxruntime_c_api.h",
    f"{ORT}/include/onnxruntime_cxx_api.h",
    f"{ORT}/lib/onnxruntime.lib",
]


def test_sdk_extraction_adds_headers_and_import_libraries_not_pdbs(
    tmp_path: Path, root: Path
) -> None:
    archive = write_zip(tmp_path / f"{ORT}.zip", ORT_MEMBERS, dirs=True)
    sha = sha256_of(archive)

    result = extract(archive, sha, root, sdk=True)

    assert result.members == tuple(sorted([*ORT_WANTED, *ORT_SDK]))
    assert files_under(result.root) == sorted([*ORT_WANTED, *ORT_SDK, MARKER])
    assert (result.root / f"{ORT}/lib/onnxruntime.lib").read_bytes() == b"!<arch> import library"
    assert is_extracted(root, sha, sdk=True) and is_extracted(root, sha)
    assert extract(archive, sha, root).reused is True  # an SDK tree serves a plain request


def test_a_tree_without_the_sdk_grows_when_the_sdk_is_asked_for(tmp_path: Path, root: Path) -> None:
    sla = "docs/SLA.txt"
    archive = write_zip(tmp_path / f"{ORT}.zip", {**ORT_MEMBERS, sla: b"SLA"})
    sha = sha256_of(archive)

    plain = extract(archive, sha, root, ["SLA.txt"])
    assert not is_extracted(root, sha, sdk=True)
    grown = extract(archive, sha, root, sdk=True)

    assert plain.members == tuple(sorted([*ORT_WANTED, sla]))
    assert (grown.reused, grown.members) == (False, tuple(sorted([*ORT_WANTED, *ORT_SDK, sla])))
    assert extract(archive, sha, root, ["SLA.txt"], sdk=True).reused is True


def test_a_marker_written_before_the_sdk_existed_stays_valid(tmp_path: Path, root: Path) -> None:
    """Cache trees made by an older bundle have no "sdk" key: they hold no SDK members, serve
    every plain request as before, and are extracted again only when the SDK is asked for."""
    archive = write_zip(tmp_path / f"{ORT}.zip", ORT_MEMBERS)
    sha = sha256_of(archive)
    extract(archive, sha, root)
    marker = root / sha / MARKER
    document = json.loads(marker.read_text())
    assert document.pop("sdk") is False
    marker.write_text(json.dumps(document))

    assert extract(archive, sha, root) == Extracted(root / sha, tuple(ORT_WANTED), reused=True)
    assert not is_extracted(root, sha, sdk=True)
    assert extract(archive, sha, root, sdk=True).members == tuple(sorted([*ORT_WANTED, *ORT_SDK]))
    assert json.loads(marker.read_text())["sdk"] is True
