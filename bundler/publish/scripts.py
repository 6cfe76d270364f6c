"""Decide layer: a compiled Inno Setup script as a release sees it: the `Key=Value` directives
of its [Setup] section, and the setup it produced with its slices."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# setup.iss of a bundle with a runtime pack names the pack's compiled setup (its file name
# without .exe, bundler/render/pack_iss.py): `#define PackName "bundle-pack-<hash16>-<digest8>"`
_PACK_NAME = re.compile(r'^#define PackName "([^"]+)"\s*$', re.MULTILINE)


@dataclass(frozen=True)
class SetupScript:
    """A compiled script: its [Setup] directives (keys folded to lower case) and the setup it
    produced with its slices, where the setups folder holds them."""

    name: str
    directives: dict[str, str]
    setup: Path | None
    slices: tuple[Path, ...] = ()
    pack: str | None = None  # the runtime pack's setup it appends or downloads (no .exe)

    def directive(self, key: str) -> str | None:
        return self.directives.get(key.lower())


def setup_directives(text: str) -> dict[str, str]:
    """The `Key=Value` lines of a script's [Setup] section, keys in lower case (Inno's
    directive names are case-insensitive); comments and ISPP lines are skipped."""
    directives: dict[str, str] = {}
    section = ""
    for line in (raw.strip() for raw in text.splitlines()):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].lower()
        elif section == "setup" and "=" in line and not line.startswith((";", "#", "//")):
            key, _, value = line.partition("=")
            directives[key.strip().lower()] = value.strip()
    return directives


def pack_name(text: str) -> str | None:
    """The runtime pack's compiled setup a script names, without .exe; None: no pack."""
    found = _PACK_NAME.search(text)
    return found[1] if found else None
