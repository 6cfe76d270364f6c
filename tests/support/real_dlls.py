"""The real DLLs of the pinned wheels, by package (the `real_dlls` fixture hands one out)."""

from __future__ import annotations

from pathlib import Path


class RealDlls:
    """Maps a pinned wheel's package name to the folder holding its DLLs."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def __getitem__(self, package: str) -> Path:
        return self.folders[package]

    def search_args(self, *packages: str) -> list[str]:
        args: list[str] = []
        for package in packages:
            args += ["--search", str(self.folders[package])]
        return args
