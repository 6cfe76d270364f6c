"""Decide layer: SHA256SUMS in the format of GNU coreutils' `sha256sum`: one line a file, the
hex digest, two spaces (text mode; ` *` for binary mode on reading), the name. Names are the
release folder's, flat; the file is what `sha256sum -c`, `actions/attest-build-provenance`'s
`subject-checksums` and `bundle verify` read."""

from __future__ import annotations

import re
from collections.abc import Mapping

from bundler.errors import InputFileError

SUMS_NAME = "SHA256SUMS"
_LINE = re.compile(r"(?P<digest>[0-9a-fA-F]{64}) [ *](?P<name>.+)")


def render_sums(digests: Mapping[str, str]) -> str:
    """The file's text, sorted by name, LF line ends (the same bytes on every system)."""
    return "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))


def parse_sums(text: str, where: str) -> dict[str, str]:
    """name -> lower-case digest; a line that is no checksum line is refused, naming it."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line.rstrip("\r"))
        if match is None:
            raise InputFileError(
                f"{where}: line {number} is not a sha256sum line (64 hex digits, two spaces, "
                "a name); give the SHA256SUMS file `bundle publish` wrote."
            )
        found[match["name"]] = match["digest"].lower()
    return found
