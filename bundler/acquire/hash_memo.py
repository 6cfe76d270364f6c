"""Act layer: the cache's memo of extracted members' hashes, `extracted/<archive>/.hashes.json`:
each member's SHA-256 with the size and modification time it had when it was hashed, so that a
build takes the hash of an unchanged member from the memo instead of reading the file again."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from bundler.disk import files
from bundler.errors import OutputError

MEMO_NAME = ".hashes.json"


class HashMemo:
    """The memos of the trees under `extract_root`, each read once per HashMemo (a build asks
    for every member); `write_error` turns a failed write into the cache's OutputError."""

    def __init__(self, extract_root: Path, write_error: Callable[[OSError], OutputError]) -> None:
        self.extract_root = extract_root
        self.write_error = write_error
        self._memos: dict[str, dict[str, list[str | int]]] = {}  # .hashes.json, read once

    def known_hash(self, archive_sha256: str, member: str, path: Path) -> str | None:
        """The SHA-256 of an extracted member, if an earlier build hashed this very file."""
        record = self._hashes(archive_sha256).get(member)
        stat = path.stat()
        if record and record[1:] == [stat.st_size, stat.st_mtime_ns]:
            return str(record[0])
        return None

    def remember_hash(self, archive_sha256: str, member: str, path: Path, sha256: str) -> None:
        self._memos.pop(archive_sha256, None)  # re-read: keep what other processes added
        hashes = self._hashes(archive_sha256)
        stat = path.stat()
        hashes[member] = [sha256, stat.st_size, stat.st_mtime_ns]
        memo = self.extract_root / archive_sha256 / MEMO_NAME
        temp = memo.with_name(f".hashes.{os.getpid()}.tmp")
        try:
            temp.write_text(json.dumps(hashes, indent=1, sort_keys=True))
            files.replace(temp, memo)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise self.write_error(exc) from exc

    def _hashes(self, archive_sha256: str) -> dict[str, list[str | int]]:
        """The memo of one tree, read once per HashMemo object (a build asks for every member)."""
        if archive_sha256 not in self._memos:
            memo = self.extract_root / archive_sha256 / MEMO_NAME
            try:
                data = json.loads(memo.read_text())
            except (OSError, ValueError):
                data = {}
            self._memos[archive_sha256] = data if isinstance(data, dict) else {}
        return self._memos[archive_sha256]
