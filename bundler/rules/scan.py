"""Read layer: `bundle scan`: the DLLs a binary may load at run time, found in its own bytes.

No import table shows a LoadLibrary. What does show it is the name the binary passes: ORT's
provider names, cuDNN's sub-library names and `nvrtc64_%d_0.dll`, NVRTC's builtins name all
sit in the file as ASCII or UTF-16LE strings. The scan finds every `.dll` string, expands
printf-style patterns (`%d`, `%s`, ...) against the DLLs that exist (the pool: the scanned
files' folders, plus any folders given), and sorts each name into what it is:

- runtime: a DLL of the pool (or a GPU driver DLL) that the binary does not import: a runtime
  load, the thing the profiles' runtime rules describe;
- imported / self / system / absent: kept apart, because they are no runtime load to ship:
  the binary imports it already, it is its own name, Windows provides it, or no such DLL
  exists among the pool (another vendor's provider, an old release's name, an error message).

Each name carries its evidence (the string, its file offset and encoding) and a confidence:
high for a name that stands alone as a string in a binary that imports a loader function,
medium for a pattern match or a name inside a longer text, low without a loader import or
without a DLL of that name.

Read layer: it reads the files (memory-mapped: a 600 MB provider is never copied into memory)
and decides nothing about profiles; `bundle profiles check` compares the result with them.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pefile

from bundler.binary.pe import release_image
from bundler.errors import InputFileError
from bundler.target.profiles import dll_key, versioned
from bundler.target.system import SystemPolicy

# Where a name starts: bytes that may be part of a DLL file name (and of a printf conversion).
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.%")
_ASCII_SUFFIX = re.compile(rb"\.[dD][lL][lL]")
_UTF16_SUFFIX = re.compile(rb"\.\x00[dD]\x00[lL]\x00[lL]\x00")
MAX_NAME = 96  # longer runs are data, not a file name
# printf conversions a loader format string uses: %d %u %i %x %s %ls %S %hs %02d %I64u ...
_CONVERSION = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t|I64|I32|w)?([diuxXsS])")
_CONVERSION_REGEX = {"d": r"\d+", "i": r"\d+", "u": r"\d+", "x": "[0-9a-f]+", "X": "[0-9a-f]+"}
LOADER_FUNCTIONS = frozenset(
    {"LoadLibraryA", "LoadLibraryW", "LoadLibraryExA", "LoadLibraryExW", "LdrLoadDll"}
)


class Kind(StrEnum):
    RUNTIME = "runtime"  # a DLL that exists (or a driver DLL), not imported: a runtime load
    IMPORTED = "imported"  # already in the import or delay-import table
    # The binary imports the same library under another version (cublas64_13.dll beside a
    # 'cublas64_12.dll' string): a fallback name, not a load. Imports outrank strings.
    FALLBACK = "fallback"
    SELF = "self"  # the binary's own name (its file or export name)
    SYSTEM = "system"  # an API-set or system DLL: Windows provides it
    ABSENT = "absent"  # no such DLL in the pool: another release's or vendor's name, or text


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True)
class Evidence:
    text: str  # the string as found: a name, or a pattern such as nvrtc64_%d_0.dll
    offset: int  # file offset of its first byte
    encoding: str  # "ascii" | "utf-16le"
    standalone: bool  # the whole string is the name (not inside a message)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Candidate:
    name: str  # display spelling: the pool file's when it exists, else the string's
    kind: Kind
    confidence: Confidence
    evidence: tuple[Evidence, ...]
    pattern: str | None = None  # the printf pattern it matched, if it came from one

    @property
    def key(self) -> str:
        return dll_key(self.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "confidence": self.confidence.value,
            "pattern": self.pattern,
            "evidence": [item.to_dict() for item in self.evidence],
        }


@dataclass(frozen=True)
class ScanResult:
    path: Path
    loader_imports: tuple[str, ...]  # e.g. KERNEL32.dll!LoadLibraryExW
    candidates: tuple[Candidate, ...]  # sorted by kind, then name
    unmatched_patterns: tuple[Evidence, ...] = ()  # patterns no pool DLL matches

    def of_kind(self, *kinds: Kind) -> list[Candidate]:
        return [item for item in self.candidates if item.kind in kinds]

    @property
    def runtime_names(self) -> frozenset[str]:
        return frozenset(item.key for item in self.of_kind(Kind.RUNTIME))

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.path.name,
            "loader_imports": list(self.loader_imports),
            "candidates": [item.to_dict() for item in self.candidates],
            "unmatched_patterns": [item.to_dict() for item in self.unmatched_patterns],
        }


@dataclass(frozen=True)
class Pool:
    """The DLLs that exist: key -> display name. Drivers exist on the target, not in a folder."""

    names: dict[str, str]
    drivers: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, folders: Iterable[Path], drivers: Iterable[str] = ()) -> Pool:
        names: dict[str, str] = {}
        for folder in folders:
            for path in sorted(folder.iterdir()):
                if path.suffix.lower() == ".dll" and path.is_file():
                    names.setdefault(dll_key(path.name), path.name)
        return cls(names, frozenset(dll_key(name) for name in drivers))

    def matching(self, pattern: str) -> list[str]:
        regex = pattern_regex(pattern)
        return sorted(name for key, name in self.names.items() if regex.fullmatch(key))


# --- reading the strings -----------------------------------------------------------------------


def dll_strings(data: bytes | mmap.mmap) -> Iterator[Evidence]:
    """Every ASCII and UTF-16LE string ending in `.dll`, cut at the first byte that cannot be in
    a file name: `C:\\x\\foo.dll` gives foo.dll, "failed to open foo.dll." gives foo.dll."""
    for match in _ASCII_SUFFIX.finditer(data):
        yield from _ascii_name(data, match.start(), match.end())
    for match in _UTF16_SUFFIX.finditer(data):
        yield from _utf16_name(data, match.start(), match.end())


def _ascii_name(data: bytes | mmap.mmap, dot: int, end: int) -> Iterator[Evidence]:
    start = dot
    while start > 0 and dot - start < MAX_NAME and data[start - 1] in _NAME_BYTES:
        start -= 1
    if start == dot or (start > 0 and data[start - 1] in _NAME_BYTES):
        return  # no name before the suffix, or a run too long to be one
    before = data[start - 1] if start > 0 else 0
    after = data[end] if end < len(data) else 0
    text = bytes(data[start:end]).decode("ascii")
    dots = len(text) - len(text.lstrip("."))  # "..\\x.dll" or ".x.dll": no name starts with "."
    if dots < len(text) - len(".dll"):
        yield Evidence(text[dots:], start + dots, "ascii", before == 0 and after == 0 and not dots)


def _utf16_name(data: bytes | mmap.mmap, dot: int, end: int) -> Iterator[Evidence]:
    start = dot
    while (
        start >= 2
        and dot - start < 2 * MAX_NAME
        and data[start - 1] == 0
        and data[start - 2] in _NAME_BYTES
    ):
        start -= 2
    if start == dot:
        return
    before = bytes(data[start - 2 : start]) if start >= 2 else b"\0\0"
    after = bytes(data[end : end + 2])
    text = bytes(data[start:end]).decode("utf-16-le")
    dots = len(text) - len(text.lstrip("."))
    if dots < len(text) - len(".dll"):
        standalone = before == b"\0\0" and after in (b"\0\0", b"") and not dots
        yield Evidence(text[dots:], start + 2 * dots, "utf-16le", standalone)


def is_pattern(text: str) -> bool:
    return _CONVERSION.search(text) is not None


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """nvrtc64_%d_0.dll -> nvrtc64_\\d+_0\\.dll; %s matches a run of name characters."""
    parts: list[str] = []
    position = 0
    for match in _CONVERSION.finditer(pattern):
        parts.append(re.escape(pattern[position : match.start()].lower()))
        parts.append(_CONVERSION_REGEX.get(match.group(1), r"[a-z0-9_\-.]+?"))
        position = match.end()
    parts.append(re.escape(pattern[position:].lower()))
    return re.compile("".join(parts))


# --- one binary --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Header:
    imports: frozenset[str]  # keys of the import and delay-import tables
    loader_imports: tuple[str, ...]
    export_name: str | None


def _read_header(path: Path) -> _Header:
    """The import tables with function names (the loader functions) and the export name."""
    try:
        image = pefile.PE(str(path), fast_load=True)
    except (pefile.PEFormatError, OSError) as exc:
        raise InputFileError(f"{path}: not a readable PE file ({exc}).") from None
    try:
        image.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"],
            ]
        )
        tables = [
            *getattr(image, "DIRECTORY_ENTRY_IMPORT", []),
            *getattr(image, "DIRECTORY_ENTRY_DELAY_IMPORT", []),
        ]
        imports = frozenset(dll_key(entry.dll.decode("ascii", "replace")) for entry in tables)
        loaders = sorted(
            f"{entry.dll.decode('ascii', 'replace')}!{function}"
            for entry in tables
            for symbol in entry.imports
            if symbol.name
            and (function := symbol.name.decode("ascii", "replace")) in LOADER_FUNCTIONS
        )
        export = getattr(image, "DIRECTORY_ENTRY_EXPORT", None)
        name = export.name.decode("ascii", "replace") if export and export.name else None
        return _Header(imports, tuple(loaders), name)
    finally:
        release_image(image)


def scan(path: Path, pool: Pool, policy: SystemPolicy) -> ScanResult:
    """The names `path` may load at run time, each with its kind, confidence and evidence."""
    header = _read_header(path)
    try:
        with (
            path.open("rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            found = list(dll_strings(data))
    except (OSError, ValueError) as exc:  # ValueError: mmap of an empty file
        raise InputFileError(f"{path}: cannot be read ({exc}).") from None
    own = {dll_key(path.name)} | ({dll_key(header.export_name)} if header.export_name else set())
    by_name: dict[str, tuple[str, list[Evidence], str | None]] = {}
    unmatched: list[Evidence] = []
    for evidence in found:
        if is_pattern(evidence.text):
            names = pool.matching(evidence.text)
            unmatched += [] if names else [evidence]
            for name in names:
                by_name.setdefault(dll_key(name), (name, [], evidence.text))[1].append(evidence)
        else:
            key = dll_key(evidence.text)
            shown = pool.names.get(key, evidence.text)
            by_name.setdefault(key, (shown, [], None))[1].append(evidence)
    loaders = bool(header.loader_imports)
    candidates = [
        _candidate(key, name, tuple(evidence), pattern, header, own, pool, policy, loaders)
        for key, (name, evidence, pattern) in by_name.items()
    ]
    order = list(Kind)
    candidates.sort(key=lambda item: (order.index(item.kind), item.key))
    return ScanResult(path, header.loader_imports, tuple(candidates), tuple(unmatched))


def _candidate(
    key: str,
    name: str,
    evidence: tuple[Evidence, ...],
    pattern: str | None,
    header: _Header,
    own: set[str],
    pool: Pool,
    policy: SystemPolicy,
    loaders: bool,
) -> Candidate:
    kind = _kind(key, header, own, pool, policy)
    confidence = _confidence(evidence, pattern, loaders and kind is not Kind.ABSENT)
    return Candidate(name, kind, confidence, evidence, pattern)


def _kind(key: str, header: _Header, own: set[str], pool: Pool, policy: SystemPolicy) -> Kind:
    if key in own:
        return Kind.SELF
    if key in header.imports:
        return Kind.IMPORTED
    if policy.is_api_set(key) or policy.is_system(key, (99,)):
        return Kind.SYSTEM
    if _imported_in_another_version(key, header.imports):
        return Kind.FALLBACK
    if key in pool.names or key in pool.drivers:
        return Kind.RUNTIME
    return Kind.ABSENT


def _imported_in_another_version(key: str, imports: frozenset[str]) -> bool:
    parsed = versioned(key)
    if parsed is None:
        return False
    family, version = parsed
    return any(
        (other := versioned(name)) is not None and other[0] == family and other[1] != version
        for name in imports
    )


def _confidence(evidence: Sequence[Evidence], pattern: str | None, loaders: bool) -> Confidence:
    if not loaders:
        return Confidence.LOW
    if pattern is None and any(item.standalone for item in evidence):
        return Confidence.HIGH
    return Confidence.MEDIUM


# --- a profile's binaries ----------------------------------------------------------------------


def profile_binaries(provides: Iterable[str], folders: Iterable[Path]) -> dict[str, Path]:
    """key -> file for every DLL the folders hold that an artifact provides (names or glob
    patterns, as in the profile); the first folder holding a name wins, as in the search."""
    wanted = list(provides)
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.iterdir()):
            key = dll_key(path.name)
            provided = any(fnmatchcase(key, dll_key(name)) for name in wanted)
            if provided and key not in found and path.is_file():
                found[key] = path
    return found


def scan_all(
    files: dict[str, Path], drivers: Iterable[str], policy: SystemPolicy
) -> dict[str, ScanResult]:
    """Each file scanned against the pool of all of them (plus the driver DLLs)."""
    pool = Pool({key: path.name for key, path in files.items()}, frozenset(map(dll_key, drivers)))
    return {key: scan(path, pool, policy) for key, path in sorted(files.items())}
