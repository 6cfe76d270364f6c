"""Property and fuzz tests of the PE reader: any bytes give a PE description or our one-line
PE error (InputFileError), never another exception and never a hang.

Inputs are mutations of healthy images (synthetic ones from tests/support/pefactory.py, real ones
built
by mingw, and the real ORT DLLs from the pinned wheels) aimed at the structures the reader
walks: headers, section table, data directories, descriptors, names. Plus plain random bytes.

Budget: every test has a fixed number of examples; under CI=true the run is derandomized and
keeps no example database, so it is reproducible and bounded (well under 2 minutes in all).
Locally, failing examples are remembered in the test cache (outside the repository).
"""

from __future__ import annotations

import signal
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from types import FrameType

import pefile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from bundler.binary.pe import read_pe
from bundler.errors import InputFileError
from tests.support.paths import test_cache_dir
from tests.support.pefactory import (
    DIR_COM_DESCRIPTOR,
    DIR_DELAY_IMPORT,
    DIR_IMPORT,
    DIR_RESOURCE,
    DIR_SECURITY,
    PEPatch,
    PESpec,
    build_pe,
)
from tests.support.real_dlls import RealDlls
from tests.support.skips import IN_CI

HANG_SECONDS = 10  # one read takes milliseconds; this long is a hang

FUZZ = settings(
    max_examples=300,
    deadline=timedelta(seconds=2),
    derandomize=IN_CI,
    database=None if IN_CI else DirectoryBasedExampleDatabase(test_cache_dir() / "hypothesis"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SYNTHETIC = [
    build_pe(
        PESpec(
            machine=machine,
            imports=("KERNEL32.dll", "onnxruntime.dll"),
            delay_imports=("DirectML.dll", "dxgi.dll"),
            file_version=(1, 19, 2, 0),
            product_name="fuzz",
            managed=machine == "x86",
            signed=True,
        )
    )
    for machine in ("x64", "x86", "arm64")
] + [build_pe(PESpec(dll=False, imports=("onnxruntime.dll",)))]

INTERESTING_U32 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x1000, 0x3000, 0xFFFF]


# --- the property --------------------------------------------------------------------------------


@contextmanager
def no_hang(seconds: int) -> Iterator[None]:
    """Fail (rather than wait forever) if the body runs longer than `seconds`."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"read_pe still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check(path: Path, data: bytes) -> None:
    """read_pe on `data` describes it or refuses it in one printable line naming the file."""
    path.write_bytes(data)
    try:
        with no_hang(HANG_SECONDS):
            info = read_pe(path)
    except InputFileError as error:
        message = str(error)
        assert message.startswith(f"{path}: "), message
        assert message.isprintable(), message  # one line, no control bytes from the file
        return
    assert info.size == len(data)
    for name in (*info.imports, *info.delay_imports):
        assert name and pefile.is_valid_dos_filename(name.encode()), name


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file rewritten per example (hypothesis does not mix with function-scoped tmp_path)."""
    return tmp_path_factory.mktemp("fuzz") / "image.dll"


# --- mutations aimed at what the reader walks ----------------------------------------------------


def u32_values(size: int) -> st.SearchStrategy[int]:
    """Values that make offsets and sizes interesting: edges, the file's end, anything."""
    near_end = st.integers(max(0, size - 64), size + 64)
    return st.one_of(st.sampled_from(INTERESTING_U32), near_end, st.integers(0, 0xFFFFFFFF))


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    seed = draw(st.sampled_from(seeds))
    image = PEPatch(seed)
    data = bytearray(seed)
    headers = min(len(data), 0x1000)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["byte", "u32", "directory", "section", "cut", "insert"]))
        if kind == "byte" and data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "u32" and len(data) >= 4:
            offset = draw(st.integers(0, max(0, min(headers, len(data)) - 4)))
            struct.pack_into("<I", data, offset, draw(u32_values(len(data))))
        elif kind == "directory":
            index = draw(
                st.sampled_from(
                    [DIR_IMPORT, DIR_DELAY_IMPORT, DIR_RESOURCE, DIR_SECURITY, DIR_COM_DESCRIPTOR]
                )
            )
            field = image.directories_offset + 8 * index + 4 * draw(st.integers(0, 1))
            if field + 4 <= len(data):
                struct.pack_into("<I", data, field, draw(u32_values(len(data))))
        elif kind == "section" and image.sections:
            section = draw(st.sampled_from(image.sections))
            field = section.header_offset + 4 * draw(st.integers(2, 5))  # sizes, RVA, offset
            if field + 4 <= len(data):
                struct.pack_into("<I", data, field, draw(u32_values(len(data))))
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "insert":
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
    return bytes(data)


@st.composite
def pe_shaped(draw: st.DrawFn) -> bytes:
    """A DOS header that points at "PE\\0\\0", then random bytes: past the first checks."""
    head = bytearray(draw(st.binary(min_size=0x40, max_size=0x40)))
    head[:2] = b"MZ"
    struct.pack_into("<I", head, 0x3C, 0x40)
    return bytes(head) + b"PE\0\0" + draw(st.binary(max_size=1024))


# --- the tests -----------------------------------------------------------------------------------


@FUZZ
@given(data=mutated(SYNTHETIC))
def test_mutated_synthetic_images(scratch: Path, data: bytes) -> None:
    check(scratch, data)


@FUZZ
@given(data=st.one_of(st.binary(max_size=2048), pe_shaped()))
def test_random_bytes(scratch: Path, data: bytes) -> None:
    check(scratch, data)


@pytest.fixture(scope="module")
def mingw_seeds(mingw_build: Path) -> list[bytes]:
    return [path.read_bytes() for path in sorted(mingw_build.glob("*/*.*"))]


@pytest.mark.mingw
@FUZZ
@given(data=st.data())
def test_mutated_mingw_images(scratch: Path, mingw_seeds: list[bytes], data: st.DataObject) -> None:
    check(scratch, data.draw(mutated(mingw_seeds)))


@pytest.fixture(scope="module")
def real_seeds(real_dlls: RealDlls) -> list[bytes]:
    """A whole real MSVC-built DLL (imports, resources, certificate) and the first MB of
    onnxruntime.dll (its real headers and section table; the rest is cut off)."""
    capi = real_dlls["onnxruntime-gpu"]
    with (capi / "onnxruntime.dll").open("rb") as handle:
        head = handle.read(1 << 20)
    return [(capi / "onnxruntime_providers_shared.dll").read_bytes(), head]


@pytest.mark.realdata
@FUZZ
@given(data=st.data())
def test_mutated_real_dlls(scratch: Path, real_seeds: list[bytes], data: st.DataObject) -> None:
    check(scratch, data.draw(mutated(real_seeds)))


def test_the_seeds_are_healthy(scratch: Path) -> None:
    """Without this, every mutation of a broken seed would be an error, and the property
    would hold for a reader that refuses everything."""
    for seed in SYNTHETIC:
        scratch.write_bytes(seed)
        assert read_pe(scratch).imports


def test_a_hang_would_be_caught(scratch: Path) -> None:
    """The watchdog itself works: the property cannot hold by waiting forever."""
    with pytest.raises(TimeoutError, match="a hang"), no_hang(1):
        signal.pause()
