"""Talk layer: the views of `bundle fetch` and `bundle cache`: what came from where, and what
the download cache holds. Pure: they return strings; the CLI prints."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.cli.sizes import human_size

if TYPE_CHECKING:  # type hints only: importing views must not import every command's modules
    from bundler.acquire.acquired import Acquired
    from bundler.acquire.cache import CacheEntry, PackEntry


def acquired_table(acquired: Sequence[Acquired]) -> str:
    rows = [("artifact", "source", "size", "sha256", "state")]
    for item in acquired:
        state = "cached" if item.cached else "fresh"
        digest = item.sha256 or "-"
        rows.append(
            (f"{item.artifact} {item.version}", item.source, human_size(item.size), digest, state)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    for item in acquired:
        lines.append(f"{item.artifact}: from {item.origin}")
        lines += [f"  skipped {reason}" for reason in item.skipped]
    return "\n".join(line.rstrip() for line in lines)


def acquired_json(acquired: Sequence[Acquired]) -> str:
    def plain(item: Acquired) -> dict[str, object]:
        data = dataclasses.asdict(item)
        data["folder"] = str(item.folder)
        data["dll_folders"] = [str(folder) for folder in item.dll_folders]
        return data

    return json.dumps({"schema_version": 1, "artifacts": [plain(a) for a in acquired]}, indent=2)


def cache_table(root: Path, entries: Sequence[CacheEntry], packs: Sequence[PackEntry]) -> str:
    lines = [f"cache: {root}"]
    for entry in entries:
        names = ", ".join(entry.names) or "?"
        lines.append(f"  {entry.sha256[:16]}  {human_size(entry.size):>10}  {names}")
    total = sum(entry.size for entry in entries)
    lines.append(f"{len(entries)} archive(s), {human_size(total)}")
    if packs:
        lines += [f"  {pack.name}  {human_size(pack.size):>10}" for pack in packs]
        size = human_size(sum(pack.size for pack in packs))
        lines.append(f"{len(packs)} compiled runtime pack(s), {size}")
    return "\n".join(lines)


def cache_json(root: Path, entries: Sequence[CacheEntry], packs: Sequence[PackEntry]) -> str:
    """`bundle cache list --json`: the verified archives (`size`: their total) and the compiled
    runtime packs, as cache_table lists them."""
    archives = [
        {
            "sha256": entry.sha256,
            "path": str(entry.path),
            "size": entry.size,
            "names": list(entry.names),
            "origins": list(entry.origins),
            "added": entry.added,
        }
        for entry in entries
    ]
    total = sum(entry.size for entry in entries)
    compiled = [{"name": pack.name, "path": str(pack.path), "size": pack.size} for pack in packs]
    document = {
        "schema_version": 1,
        "cache": str(root),
        "archives": archives,
        "size": total,
        "runtime_packs": compiled,
        "packs": compiled,  # the name before "runtime_packs" (issue 39), kept for readers
    }
    return json.dumps(document, indent=2)


def clean_step(root: Path, everything: bool, size: int) -> str:
    """`cache clean --dry-run`'s step: what it would remove, and how many bytes that is."""
    more = ", the verified archives and the compiled runtime packs" if everything else ""
    what = f"the partial downloads, extracted trees, kept templates{more}"
    return f"remove {what} in {root} ({human_size(size)})"


def cache_clean_report(root: Path, freed: int) -> str:
    return f"freed {human_size(freed)} in {root}"


def cache_clean_json(root: Path, freed: int) -> str:
    return json.dumps({"schema_version": 1, "cache": str(root), "freed_bytes": freed}, indent=2)
