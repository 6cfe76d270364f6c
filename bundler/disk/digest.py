"""Read layer: the SHA-256 of files, the one way every wing computes it (the cache checking a
blob, a build hashing what it placed, the audit checking a lock, a model's own hash).

One pass per file into one reused buffer; several files on several threads, because hashlib
and the reads release the GIL (benchmarks/README.md, P5)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HASH_BLOCK = 1 << 20


def file_sha256(path: Path) -> str:
    """One pass, into one reused buffer. hashlib and the reads release the GIL, so several
    threads hash several files at the speed of several cores."""
    digest = hashlib.sha256()
    buffer = bytearray(HASH_BLOCK)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        while count := handle.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


def files_sha256(paths: Sequence[Path]) -> list[str]:
    """file_sha256 of every path, each file on its own thread: with more files than cores the
    kernel shares the cores out, so the pass ends after max(largest file, total / cores) of
    hashing time instead of the sum (benchmarks/README.md, P5)."""
    if len(paths) <= 1:
        return [file_sha256(path) for path in paths]
    with ThreadPoolExecutor(max_workers=min(len(paths), 16)) as pool:
        return list(pool.map(file_sha256, paths))
