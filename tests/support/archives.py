"""A bundle's archive read back without bundle's own reader: `read_back` gives each member's
SHA-256 (`sha256` of bytes), in archive order, read with the stdlib's zipfile or py7zr's own
hasher."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import py7zr
from py7zr.io import HashIOFactory


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_back(archive: Path) -> dict[str, str]:
    """Members in archive order -> SHA-256, read with the stdlib or py7zr's own hasher."""
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as handle:
            return {name: sha256(handle.read(name)) for name in handle.namelist()}
    with py7zr.SevenZipFile(archive) as handle:
        names = handle.getnames()
        factory = HashIOFactory()
        handle.extractall(factory=factory)
    return {name: factory.get(name).read().hex() for name in names}
