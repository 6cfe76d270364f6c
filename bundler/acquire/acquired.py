"""Decide layer: what the acquire wing hands to the rest of bundle, as data: an artifact made
ready (`Acquired`: its DLL folders and where its bytes came from) and the cache's memo of
extracted members' hashes as a build sees it (`MemberHashes`). Decide modules (provenance, the
ship wing's placements) import these, never the act modules that fetch and extract."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Acquired:
    """One artifact, ready: its DLL folders and where the bytes came from."""

    artifact: str
    version: str
    source: str  # "url" | "pip" | "dir"
    origin: str  # what this run used: the URL, a mirror file, "pip:pkg==ver", "cache", a folder
    pinned: str  # the pinned source the bytes are: its URL or "pip:pkg==ver" (or the folder)
    filename: str | None  # the archive's file name (None for a local folder)
    sha256: str | None
    size: int | None
    cached: bool  # True when nothing was transferred by this run
    folder: Path  # extracted tree or local folder
    dll_folders: tuple[Path, ...]
    skipped: tuple[str, ...] = ()  # why earlier sources were not used
    sdk: bool = False  # the tree holds the C/C++ SDK members its archive has (headers, .lib)


def dll_search_path(acquired: Sequence[Acquired]) -> list[Path]:
    """The acquired artifacts' DLL folders, in profile order: what the resolver searches."""
    return [folder for item in acquired for folder in item.dll_folders]


class MemberHashes(Protocol):
    """The SHA-256 of extracted archive members, remembered by the cache per file size and
    time, so that a build does not re-read a member an earlier build hashed (bundler.acquire.
    cache.Cache is one)."""

    def known_hash(self, archive_sha256: str, member: str, path: Path) -> str | None:
        """The member's SHA-256, if an earlier build hashed this very file."""
        ...

    def remember_hash(self, archive_sha256: str, member: str, path: Path, sha256: str) -> None:
        """Keep `sha256` as the hash of the member's file as it is now."""
        ...
