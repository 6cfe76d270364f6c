"""Decide layer: what the loader said in a load proof (`bundle audit PATH --run`), as data.

One run of the proof (LoaderRun): an app started or a runtime root loaded, its exit code, and
the imports the loader could not resolve (LoaderLine), read from Wine's `import_dll` lines:
"Library X (which is needed by Y) not found" and "Loading library X (which is needed by Y)
failed (error S)". bundler.audit.loadrun makes the runs; bundler.audit.loadproof decides what
they prove. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bundler.target.profiles import dll_key

_IMPORT_LINE = re.compile(
    r":err:module:import_dll (?:Library (?P<dll>\S+) \(which is needed by L?\"(?P<by>.*?)\"\)"
    r" not found|Loading library (?P<dll2>\S+) \(which is needed by L?\"(?P<by2>.*?)\"\)"
    r" failed \(error (?P<status>[0-9a-fA-F]+)\))"
)


@dataclass(frozen=True)
class LoaderLine:
    """One import the loader could not resolve, as it reported it."""

    dll: str  # spelled as in the importer's import table
    importer: str  # file name of the module that imports it
    status: str | None  # None: "not found"; else the NTSTATUS it failed with, e.g. c000007b
    text: str  # the loader's line, verbatim


@dataclass(frozen=True)
class LoaderRun:
    """One program the proof ran: an app started, or a runtime root loaded."""

    target: str  # file name in the folder
    kind: str  # "app" (started) or "dll" (loaded)
    command: tuple[str, ...]
    exit_code: int | None  # None: still running at the time limit, stopped
    lines: tuple[LoaderLine, ...]
    names_known: bool  # the loader names what it could not load (Wine); Windows does not
    dependency_failed: bool  # a DLL it needs could not be loaded: Wine's lines, or Windows'
    # STATUS_DLL_NOT_FOUND (an exe) / ERROR_MOD_NOT_FOUND (a DLL), see bundler.audit.loadrun
    audit_missing: tuple[str, ...]  # what the audit says is missing in target's closure
    verdict: str

    @property
    def finished(self) -> bool:
        return self.exit_code is not None

    @property
    def app_failed(self) -> bool:
        """An app that started with every DLL and then exited with a failure code."""
        return self.kind == "app" and bool(self.exit_code) and not self.dependency_failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kind": self.kind,
            "command": list(self.command),
            "exit_code": self.exit_code,
            "timed_out": not self.finished,
            "verdict": self.verdict,
            "loader_lines": [line.text for line in self.lines],
            "dependency_failed": self.dependency_failed,
            "audit_missing": list(self.audit_missing),
        }


def parse_lines(stderr: str) -> tuple[LoaderLine, ...]:
    """The loader's unresolved imports, in the order reported (the first of duplicates)."""
    found: dict[tuple[str, str], LoaderLine] = {}
    for text in stderr.splitlines():
        match = _IMPORT_LINE.search(text)
        if not match:
            continue
        dll = match["dll"] or match["dll2"]
        importer = _file_name(match["by"] if match["dll"] else match["by2"])
        line = LoaderLine(dll, importer, match["status"], text.strip())
        found.setdefault((dll_key(dll), dll_key(importer)), line)
    return tuple(found.values())


def _file_name(path: str) -> str:
    """The last component of a path as Wine prints it (backslashes doubled)."""
    return re.split(r"[\\/]+", path)[-1]


def app_verdict(code: int) -> str:
    """What an app run that loaded every DLL ended with, said plainly."""
    if code == 0:
        return "started, no DLL missing (exit 0)"
    return f"started with every DLL, then FAILED with exit code {code} ({hex_code(code)})"


def hex_code(code: int | None) -> str:
    """An exit code as Windows shows it: 32 bits, unsigned, in hex (0xc0000135)."""
    return f"{(code or 0) & 0xFFFFFFFF:#x}"
