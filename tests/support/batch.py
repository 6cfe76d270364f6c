"""Batch files run by Wine's cmd.exe as a post-build event runs them (`Cmd`, `CmdRun`): `windows`
writes a path as Windows programs under Wine see it, `target_arg` the script's arguments as
"$(OutDir)" gives them, and `files_under` is what a folder holds (relative name -> SHA-256), to
compare what a script copied."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from tests.support.wine import Wine


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def windows(path: Path) -> str:
    """`path` as Windows programs under Wine see it (Wine maps / to drive Z:)."""
    return "Z:" + os.path.abspath(path).replace("/", "\\")


def files_under(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256(p) for p in root.rglob("*") if p.is_file()}


@dataclass(frozen=True)
class CmdRun:
    returncode: int
    stdout: str
    stderr: str


class Cmd:
    """Wine's cmd.exe in the session's prefix, running a batch file as a post-build event
    would: `"SCRIPT" ARGS`, with ARGS written exactly as given (quotes, trailing backslash)."""

    def __init__(self, wine: Wine, folder: Path, locale: dict[str, str] | None = None) -> None:
        self.wine = wine
        self.caller = folder / "caller.cmd"
        self.caller.write_bytes(b'@"%PB_SCRIPT%" %PB_ARGS%\r\n')
        self.locale = locale or {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

    def run(self, script: Path, args: str = "", caller: Path | None = None) -> CmdRun:
        told: dict[str, str | None] = {"PB_SCRIPT": windows(script), "PB_ARGS": args}
        done = self.wine.program(
            "cmd", "/c", windows(caller or self.caller), env={**told, **self.locale}
        )
        return CmdRun(done.returncode, done.stdout, done.stderr)  # CRLF read as LF


def target_arg(folder: Path, *switches: str) -> str:
    """The script's arguments as "$(OutDir)" would give them: quoted, with a trailing \\."""
    return " ".join([f'"{windows(folder)}\\"', *switches])
