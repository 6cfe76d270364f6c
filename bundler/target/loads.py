"""Read layer: what a profile records about loads that the DLLs' import tables do not show.

Three tables of a profile: [[runtime_rules]] (a DLL loads others with LoadLibrary at run time),
[[scan_exceptions]] (pairs `bundle profiles check` accepts from the string scan) and [[files]]
(a pinned DLL's import tables, recorded so that what it would load stays known when the DLL is
absent). Each is a frozen dataclass and the reader of its TOML table; bundler.target.profiles reads
a
whole profile with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from bundler.errors import ProfileError
from bundler.target.manifest import Table


@dataclass(frozen=True)
class RuntimeRule:
    """`trigger` loads `loads` with LoadLibrary at run time; entries may be glob patterns."""

    trigger: str
    loads: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class ScanException:
    """A pair `bundle profiles check` accepts (a string that is no load, or a rule the scan
    cannot see), with the reason kept in the profile: [[scan_exceptions]]."""

    file: str  # the DLL whose strings are scanned (a rule's trigger)
    name: str  # the DLL it names, or a rule says it loads
    why: str


@dataclass(frozen=True)
class RecordedFile:
    """What a pinned DLL imports, recorded in the profile ([[files]]) from the DLL itself, so
    that what it would load stays known when the DLL is absent from a folder (the audit of a
    bundle missing it). Measured on the artifact's pinned wheel; API sets are left out."""

    name: str  # the concrete file name, as spelled in the artifact
    artifact: str
    size: int
    imports: tuple[str, ...] = ()
    delay_imports: tuple[str, ...] = ()


def read_runtime_rule(table: Table) -> RuntimeRule:
    return table.finished(
        RuntimeRule(
            trigger=table.string("trigger"), loads=table.strings("loads"), why=table.string("why")
        )
    )


def read_scan_exception(table: Table) -> ScanException:
    return table.finished(
        ScanException(table.string("file"), table.string("name"), table.string("why"))
    )


def read_recorded_file(table: Table) -> RecordedFile:
    size: int = table.integer("size")
    if size <= 0:
        raise ProfileError(f"{table.where}: key 'size' must be the DLL's size in bytes (> 0).")
    recorded = RecordedFile(
        name=table.string("name"),
        artifact=table.string("artifact"),
        size=size,
        imports=table.strings("imports", ()),
        delay_imports=table.strings("delay_imports", ()),
    )
    table.done()
    return recorded
