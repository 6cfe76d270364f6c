"""The GPU code a DLL carries, read from its CUDA fat binaries (bundler/binary/fatbin.py).

Unit tests build fatbin blobs by hand and put them in a synthetic PE (the factory's `.data`
section, renamed). The real-data tests compare the reader with NVIDIA's `cuobjdump` on every
blob of real DLLs: the blobs are found independently of the reader, through the registration
records in `.nvFatBi` (one per blob, with its address), cut out to files, and listed with
`cuobjdump --dump-elf-symbols`, whose "Fatbin elf code: / arch = sm_100f" headers name every
entry with its variant (its --list-elf file names drop the "f"). See
docs/field-notes.md#fatbin.

cuobjdump: $BUNDLE_CUOBJDUMP, else the `nvidia-cuda-cuobjdump` wheel in the test cache's wheels/
folder (CI downloads it with `pip download`), else cuobjdump on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pefile
import pytest

from bundler.binary.fatbin import GpuCode, read_gpu_code, serves, sort_archs
from bundler.errors import InputFileError
from tests.support.paths import test_cache_dir
from tests.support.pefactory import PEPatch, PESpec, build_pe, write_pe
from tests.support.skips import require

MAGIC = 0xBA55ED50
ELF, PTX = 2, 1
BASE_FLAGS = 0x8041  # 64-bit, host Windows, compressed: as in ORT 1.31.1
A, F = 0x100000, 0x200000


def entry(
    kind: int, arch: int, flags: int = BASE_FLAGS, payload: int = 24, header: int = 64
) -> bytes:
    """One entry: its header as the real ones are laid out, then `payload` filler bytes."""
    fields = struct.pack(
        "<HHIQIIHHIIIQ", kind, 0x101, header, payload, payload, 0, 8, 1, arch, 0, 0, flags
    )
    return fields.ljust(header, b"\0") + b"\xcc" * payload


def blob(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body


def fatbin_dll(
    tmp_path: Path, data: bytes, section: str = ".nv_fatb", name: str = "gpu.dll"
) -> Path:
    """A synthetic DLL whose `.data` section, renamed to `section`, holds exactly `data`."""
    patch = PEPatch(build_pe(PESpec(padding=len(data))))
    header = patch.section(".data")
    patch.data[header.header_offset : header.header_offset + 8] = section.encode().ljust(8, b"\0")
    patch.data[header.raw_offset : header.raw_offset + len(data)] = data
    image = patch.to_bytes()
    path = tmp_path / name
    path.write_bytes(image)
    return path


def section_offset(path: Path, section: str = ".nv_fatb") -> int:
    return PEPatch(path.read_bytes()).section(section).raw_offset


# --- reading synthetic blobs --------------------------------------------------------------------


def test_one_blob_lists_its_sass_and_ptx(tmp_path: Path) -> None:
    data = blob(entry(ELF, 75), entry(ELF, 86), entry(PTX, 86), entry(ELF, 80))
    assert read_gpu_code(fatbin_dll(tmp_path, data)) == GpuCode(
        sass=("sm_75", "sm_80", "sm_86"), ptx=("sm_86",), blobs=1
    )


def test_variants_come_from_the_flags_not_the_number(tmp_path: Path) -> None:
    # 1.31.1 has sm_90a and sm_120a entries whose arch field says 90 and 120; a longer header
    # (112 bytes, as sm_120a's there) must not shift the next entry
    data = blob(
        entry(ELF, 90, BASE_FLAGS | A),
        entry(ELF, 120, BASE_FLAGS | A | 0x1000000, header=112),
        entry(ELF, 100, BASE_FLAGS | F | 0x1000000, header=112),
        entry(ELF, 90),
        entry(PTX, 90, BASE_FLAGS | A, header=80),
    )
    code = read_gpu_code(fatbin_dll(tmp_path, data))
    assert code == GpuCode(sass=("sm_90", "sm_90a", "sm_100f", "sm_120a"), ptx=("sm_90a",), blobs=1)


def test_blobs_after_alignment_padding_are_all_walked(tmp_path: Path) -> None:
    first = blob(entry(ELF, 52, payload=8))  # 16 + 72: ends 8 bytes short of a 16-byte boundary
    assert len(first) % 16 == 8
    second = blob(entry(ELF, 61), entry(PTX, 61))
    third = blob(entry(ELF, 120, payload=16))  # right after the second: no padding
    data = first + bytes(8) + second + third
    assert read_gpu_code(fatbin_dll(tmp_path, data)) == GpuCode(
        sass=("sm_52", "sm_61", "sm_120"), ptx=("sm_61",), blobs=3
    )


def test_unknown_entry_kinds_are_skipped_but_walked(tmp_path: Path) -> None:
    data = blob(entry(8, 90, payload=40), entry(ELF, 89))
    assert read_gpu_code(fatbin_dll(tmp_path, data)) == GpuCode(("sm_89",), (), 1)


def test_registration_records_in_nvfatbi_hold_no_code(tmp_path: Path) -> None:
    # what every real DLL has there: {0x466243B1, version 1, address of a blob, 0}
    records = struct.pack("<IIQQ", 0x466243B1, 1, 0x180AB000, 0) * 3
    assert read_gpu_code(fatbin_dll(tmp_path, records, ".nvFatBi")) == GpuCode((), (), 0)


def test_blobs_in_nvfatbi_are_walked_too(tmp_path: Path) -> None:
    path = fatbin_dll(tmp_path, blob(entry(ELF, 70)), ".nvFatBi")
    assert read_gpu_code(path) == GpuCode(("sm_70",), (), 1)


def test_a_dll_without_fatbin_sections_has_no_gpu_code(tmp_path: Path) -> None:
    assert read_gpu_code(write_pe(tmp_path / "plain.dll", imports=("KERNEL32.dll",))) is None


def test_a_file_that_is_not_pe_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.dll"
    path.write_bytes(b"MZ but nothing else")
    with pytest.raises(InputFileError, match=re.escape(str(path))):
        read_gpu_code(path)


# --- damage: one line naming the file and the offset, never IndexError or struct.error ----------

GOOD = blob(entry(ELF, 80), entry(PTX, 80))


@dataclass(frozen=True)
class Damage:
    data: bytes
    at: int  # offset of the damaged header inside the section
    says: str


DAMAGES = {
    "bad magic at the start": Damage(b"\x00\x11" + GOOD[2:], 0, "no fatbin magic"),
    "bad magic after padding": Damage(
        GOOD + bytes(8) + b"XXXX" + GOOD[4:], len(GOOD), "no fatbin magic"
    ),
    "garbage between blobs": Damage(GOOD + b"\x01" * 40 + GOOD, len(GOOD), "no fatbin magic"),
    "blob size past the section": Damage(
        struct.pack("<IHHQ", MAGIC, 1, 16, len(GOOD) * 50) + GOOD[16:], 0, "blob runs past"
    ),
    "entry payload past its blob": Damage(
        blob(entry(ELF, 80))[:24] + struct.pack("<Q", 10**6) + blob(entry(ELF, 80))[32:],
        16,
        "entry runs past",
    ),
    "entry header too small": Damage(
        blob(entry(ELF, 80))[:20] + struct.pack("<I", 8) + blob(entry(ELF, 80))[24:],
        16,
        "entry runs past",
    ),
    "blob cut in an entry header": Damage(
        struct.pack("<IHHQ", MAGIC, 1, 16, 40) + entry(ELF, 80)[:40], 16, "entry header runs past"
    ),
    "section ends inside a blob header": Damage(GOOD + GOOD[:10], len(GOOD), "runs past"),
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_damaged_blob_names_the_file_and_offset(tmp_path: Path, damage: Damage) -> None:
    path = fatbin_dll(tmp_path, damage.data)
    offset = section_offset(path) + damage.at
    with pytest.raises(InputFileError) as raised:
        read_gpu_code(path)
    message = str(raised.value)
    assert "\n" not in message
    assert str(path) in message and f"{offset:#x}" in message and damage.says in message


def test_a_section_past_the_end_of_the_file_is_an_input_error(tmp_path: Path) -> None:
    path = fatbin_dll(tmp_path, GOOD * 40)
    path.write_bytes(path.read_bytes()[: section_offset(path) + 100])
    with pytest.raises(InputFileError, match="past the end of the file"):
        read_gpu_code(path)


# --- order and compatibility --------------------------------------------------------------------


def test_architectures_sort_by_number_then_suffix() -> None:
    names = ["sm_120a", "sm_90a", "sm_100", "sm_52", "sm_120", "sm_90", "sm_80", "sm_100f", "sm_90"]
    assert sort_archs(names) == (
        "sm_52", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120", "sm_120a",
    )  # fmt: skip


def code(sass: str = "", ptx: str = "") -> GpuCode:
    return GpuCode(tuple(sass.split()), tuple(ptx.split()), 1)


# (code, device capability, expected); the id says which rule of the CUDA C++ Programming
# Guide ("Binary Compatibility", "PTX Compatibility") or of the arch-specific notes it checks
SERVES = {
    "sm_80 SASS runs on 8.6: same major, newer minor": (code("sm_80"), (8, 6), "native"),
    "sm_80 SASS runs on 8.0 itself": (code("sm_80"), (8, 0), "native"),
    "sm_86 SASS does not run on 8.0: older minor": (code("sm_86"), (8, 0), "none"),
    "sm_80 SASS does not run on 9.0: other major": (code("sm_80"), (9, 0), "none"),
    "sm_80 SASS on 9.0 with sm_80 PTX: JIT": (code("sm_80", "sm_80"), (9, 0), "jit"),
    "sm_80 PTX is JIT-compiled for 12.0": (code("", "sm_80"), (12, 0), "jit"),
    "sm_90 PTX is not for 8.9: older device": (code("sm_75", "sm_90"), (8, 9), "none"),
    "sm_90a SASS runs on 9.0": (code("sm_90a"), (9, 0), "native"),
    "sm_90a SASS runs on nothing else, not even 9.x newer": (code("sm_90a"), (9, 1), "none"),
    "sm_120a SASS does not run on 12.1": (code("sm_120a"), (12, 1), "none"),
    "sm_90a PTX only JIT-compiles for 9.0": (code("", "sm_90a"), (10, 0), "none"),
    "sm_90a PTX JIT-compiles for 9.0": (code("", "sm_90a"), (9, 0), "jit"),
    "sm_100f SASS runs on the family: 10.3": (code("sm_100f"), (10, 3), "native"),
    "sm_100f SASS not on another major: 12.0": (code("sm_100f"), (12, 0), "none"),
    "sm_103f SASS not on an older family member: 10.0": (code("sm_103f"), (10, 0), "none"),
    "native beats jit": (code("sm_86", "sm_52"), (8, 6), "native"),
    "1.31.1's provider on an RTX 50 (12.0): sm_120a": (
        code("sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a", "sm_120"),
        (12, 0),
        "native",
    ),
    "1.31.1's provider on an H100 (9.0): sm_90a": (
        code("sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a", "sm_120"),
        (9, 0),
        "native",
    ),
    "1.31.1's provider on a DGX Spark (12.1): only the sm_120 PTX": (
        code("sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a", "sm_120"),
        (12, 1),
        "jit",
    ),
    "1.19.2's provider on an H100 (9.0): sm_80 PTX": (
        code("sm_52 sm_60 sm_61 sm_70 sm_75 sm_80", "sm_52 sm_80"),
        (9, 0),
        "jit",
    ),
    "no code at all": (code(), (8, 0), "none"),
}


@pytest.mark.parametrize(("gpu_code", "capability", "expected"), SERVES.values(), ids=SERVES.keys())
def test_serves(gpu_code: GpuCode, capability: tuple[int, int], expected: str) -> None:
    assert serves(gpu_code, capability) == expected


# --- the real DLLs against cuobjdump ------------------------------------------------------------

CUOBJDUMP_PIN = "nvidia-cuda-cuobjdump==13.2.51"
EXTRACTED = "extracted"
PROVIDER = ("onnxruntime", "capi", "onnxruntime_providers_cuda.dll")
DLLS = {
    "ort-1.19.2": ("onnxruntime_gpu-1.19.2-cp311-cp311-win_amd64", *PROVIDER),
    "ort-1.22.0": ("onnxruntime_gpu-1.22.0-cp311-cp311-win_amd64", *PROVIDER),
    "ort-1.31.1": ("onnxruntime_gpu-1.31.1-cp311-cp311-win_amd64", *PROVIDER),
    "cudnn_cnn-9.1.0.70": (
        "nvidia_cudnn_cu12-9.1.0.70-py3-none-win_amd64",
        "nvidia",
        "cudnn",
        "bin",
        "cudnn_cnn64_9.dll",
    ),
    "cudnn_cnn-9.13.0.50": (
        "nvidia_cudnn_cu13-9.13.0.50-py3-none-win_amd64",
        "nvidia",
        "cudnn",
        "bin",
        "cudnn_cnn64_9.dll",
    ),
    "cublasLt-12.4.5.8": (
        "nvidia_cublas_cu12-12.4.5.8-py3-none-win_amd64",
        "nvidia",
        "cublas",
        "bin",
        "cublasLt64_12.dll",
    ),
}


def _version_key(wheel: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", wheel.name.split("-")[1]))


@pytest.fixture(scope="session")
def cuobjdump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """$BUNDLE_CUOBJDUMP, else cuobjdump from the newest nvidia-cuda-cuobjdump wheel in the test
    cache (extracted to a temp folder), else cuobjdump on PATH."""
    configured = os.environ.get("BUNDLE_CUOBJDUMP")
    if configured:
        require(Path(configured).is_file(), f"BUNDLE_CUOBJDUMP={configured} is not a file")
        return Path(configured)
    wheels = sorted(
        (test_cache_dir() / "wheels").glob("nvidia_cuda_cuobjdump-*.whl"), key=_version_key
    )
    if wheels:
        with zipfile.ZipFile(wheels[-1]) as archive:
            member = next(n for n in archive.namelist() if n.endswith("/bin/cuobjdump"))
            tool = Path(archive.extract(member, tmp_path_factory.mktemp("cuobjdump")))
        tool.chmod(0o755)
        return tool
    found = shutil.which("cuobjdump")
    require(
        found is not None,
        f"cuobjdump not found: pip download --no-deps {CUOBJDUMP_PIN}"
        f" -d {test_cache_dir() / 'wheels'} (or set BUNDLE_CUOBJDUMP, or put it on PATH)",
    )
    return Path(str(found))


def real_dll(key: str) -> Path:
    stem, *inside = DLLS[key]
    folder = test_cache_dir() / EXTRACTED / stem
    require(
        (folder / ".complete").is_file(),
        f"{stem} not in {folder.parent}: run python -m tools.testing.fetch_test_wheels",
    )
    return folder.joinpath(*inside)


def registered_blobs(dll: Path) -> list[tuple[int, int]]:
    """(file offset, length) of every blob, from the registration records in .nvFatBi (magic,
    version, blob address, 0) and each blob's own 16-byte header: not from bundler.binary.fatbin."""
    image = pefile.PE(str(dll), fast_load=True)
    try:
        records = next(s for s in image.sections if s.Name.rstrip(b"\0") == b".nvFatBi")
        table = records.get_data()[: records.Misc_VirtualSize]
        found = []
        for magic, _, address, _ in struct.iter_unpack("<IIQQ", table):
            assert magic == 0x466243B1
            offset = image.get_offset_from_rva(address - image.OPTIONAL_HEADER.ImageBase)
            blob_magic, _, header, size = struct.unpack(
                "<IHHQ", image.__data__[offset : offset + 16]
            )
            assert blob_magic == MAGIC
            found.append((offset, header + size))
        return found
    finally:
        image.close()


HEADER = re.compile(r"^Fatbin (elf|ptx) code:\n=+\narch = (\S+)$", re.M)


def listed(tool: Path, fatbin: Path) -> tuple[list[tuple[str, str]], bool]:
    """cuobjdump's (kind, arch) for every entry of a fatbin file, and whether it read them all."""
    run = subprocess.run(
        [str(tool), "--dump-elf-symbols", str(fatbin)], capture_output=True, text=True
    )
    return HEADER.findall(run.stdout), run.returncode == 0


def split_entries(data: bytes) -> Iterator[bytes]:
    """Each entry of a blob as a blob of its own (header size and payload size only)."""
    at = struct.unpack_from("<H", data, 6)[0]
    while at < len(data):
        header, payload = struct.unpack_from("<IQ", data, at + 4)
        yield blob(data[at : at + header + payload])
        at += header + payload


def blob_truth(tool: Path, data: bytes, scratch: Path) -> tuple[list[tuple[str, str]], int]:
    """cuobjdump's entries of one blob; when it rejects an ELF ("Invalid ELF", seen on some
    CUDA 12 cubins of ORT 1.22.0), entry by entry, each named by the header cuobjdump prints
    before it gives up. Returns the entries and how many cuobjdump rejected."""
    scratch.write_bytes(data)
    entries, complete = listed(tool, scratch)
    rejected = 0
    if not complete:
        entries = []
        for single in split_entries(data):
            scratch.write_bytes(single)
            found, complete = listed(tool, scratch)
            assert len(found) == 1, found
            entries += found
            rejected += not complete
    scratch.unlink()
    return entries, rejected


def cuobjdump_truth(tool: Path, dll: Path, scratch: Path) -> tuple[GpuCode, int, int]:
    """What cuobjdump lists in every registered blob; and how many entries it listed, and how
    many of those it rejected after printing their header."""
    blobs = registered_blobs(dll)

    def one(numbered: tuple[int, tuple[int, int]]) -> tuple[list[tuple[str, str]], int]:
        number, (offset, length) = numbered
        with open(dll, "rb") as handle:
            handle.seek(offset)
            data = handle.read(length)
        return blob_truth(tool, data, scratch / f"{number}.fatbin")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(one, enumerate(blobs)))
    entries = [entry for found, _ in results for entry in found]
    sass = sort_archs([arch for kind, arch in entries if kind == "elf"])
    ptx = sort_archs([arch for kind, arch in entries if kind == "ptx"])
    return GpuCode(sass, ptx, len(blobs)), len(entries), sum(rejected for _, rejected in results)


@pytest.mark.real_tools
@pytest.mark.parametrize("key", DLLS)
def test_every_blob_agrees_with_cuobjdump(key: str, cuobjdump: Path, tmp_path: Path) -> None:
    dll = real_dll(key)
    truth, entries, rejected = cuobjdump_truth(cuobjdump, dll, tmp_path)
    assert read_gpu_code(dll) == truth
    # cuobjdump 13.2 rejects some CUDA 12 cubins of ORT 1.19.2 and 1.22.0 ("Invalid ELF": 78
    # of 1824 and 44 of 948 entries) after naming them; more would mean the tool cannot read
    # these files and the comparison stands on the headers alone
    assert rejected * 10 < entries


# Stated independently of the reader: measured with cuobjdump on the whole DLL (every blob),
# docs/field-notes.md#gpu-code. The sample of 1.31.1 said "no PTX"; the whole DLL has
# sm_120 PTX in 38 of its 607 blobs (and its sm_90a-only blobs are counted in `sass`).
FACTS = {
    "cudnn_cnn-9.1.0.70": GpuCode(
        sass=("sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
        ptx=("sm_90",),
        blobs=12,
    ),
    "ort-1.19.2": GpuCode(
        sass=("sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80"),
        ptx=("sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80"),
        blobs=152,
    ),
    "ort-1.22.0": GpuCode(
        sass=("sm_52", "sm_61", "sm_75", "sm_86", "sm_89"), ptx=("sm_90",), blobs=158
    ),
    "ort-1.31.1": GpuCode(
        sass=("sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "sm_120a"), ptx=("sm_120",), blobs=607
    ),
}


@pytest.mark.real_tools
@pytest.mark.parametrize("key", FACTS)
def test_the_measured_facts(key: str) -> None:
    assert read_gpu_code(real_dll(key)) == FACTS[key]


@pytest.mark.real_tools
def test_the_gpu_bundle_reads_headers_only(tmp_path: Path) -> None:
    """Headers only: of the 1.19.2 bundle's 2.6 GB of DLLs the reader reads about an eighth
    (each section's table and every fat binary entry's header, in buffered reads: 322 MB
    measured), where one that loaded the files would read them all. Counted, not timed: the
    bytes this process read (rchar of /proc/self/io), so a loaded machine cannot fail it."""
    from tools.testing.fetch_test_wheels import dll_folder, pinned_wheels

    dlls = []
    for wheel in pinned_wheels("1.19.2"):
        folder = test_cache_dir() / EXTRACTED / wheel.removesuffix(".whl")
        require(
            (folder / ".complete").is_file(),
            f"{wheel} not extracted: run python -m tools.testing.fetch_test_wheels",
        )
        dlls += sorted(dll_folder(folder).glob("*.dll"))
    before = bytes_read()
    found = [code for code in map(read_gpu_code, dlls) if code is not None]
    read = bytes_read() - before
    assert len(found) >= 8  # the provider, cuBLAS, cuDNN, cuFFT
    assert 0 < read < sum(dll.stat().st_size for dll in dlls) / 4, read


def bytes_read() -> int:
    """What this process has read through read() calls so far (Linux's /proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no rchar line")
