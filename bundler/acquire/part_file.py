"""Act layer: a download's `.part` file and the running hashes of its bytes, always in step:
bytes an interrupted call left there are hashed once on open, every chunk is hashed as it is
appended, and a restart truncates the file and the hashes together."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import TracebackType

from bundler.disk.digest import HASH_BLOCK


class PartFile:
    """The `.part` file and the running hashes of its bytes, always in step.

    Bytes left by an earlier interrupted call are hashed once on open, so a resumed download
    needs no second pass over what this call receives."""

    def __init__(self, path: Path, want_sha512: bool, size_pin: int | None) -> None:
        self.path = path
        self._want_sha512 = want_sha512
        self._new_hashers()
        self.done = 0
        self._absorb_leftover(size_pin)
        self._file = path.open("ab")

    def _new_hashers(self) -> None:
        self._sha256 = hashlib.sha256()
        self._sha512 = hashlib.sha512() if self._want_sha512 else None

    def _absorb_leftover(self, size_pin: int | None) -> None:
        if not self.path.is_file():
            return
        with self.path.open("rb") as leftover:
            while chunk := leftover.read(HASH_BLOCK):
                self._hash(chunk)
        if size_pin is not None and self.done > size_pin:
            self.path.unlink()  # longer than the whole file can be: not a prefix of it
            self._new_hashers()
            self.done = 0

    def _hash(self, chunk: bytes) -> None:
        self._sha256.update(chunk)
        if self._sha512 is not None:
            self._sha512.update(chunk)
        self.done += len(chunk)

    def append(self, chunk: bytes) -> None:
        self._file.write(chunk)
        self._hash(chunk)

    def reset(self) -> None:
        """Start over from byte 0 (the server ignored or refused our Range request)."""
        self._file.truncate(0)  # append mode: the next write lands at the new end, 0
        self._new_hashers()
        self.done = 0

    def sha256(self) -> str:
        return self._sha256.hexdigest()

    def sha512(self) -> str | None:
        return self._sha512.hexdigest() if self._sha512 is not None else None

    def __enter__(self) -> PartFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._file.close()  # before any rename or unlink: Windows cannot do either on open files
