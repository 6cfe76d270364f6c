"""The TOML of the small custom profiles tests write (the format of docs/profiles.md).

Every such profile has the same header (schema 1, x64, Windows 10, the VC++ runtime app-local)
and is made of the same tables; the builders below write them, so that a test spells out only
what is its own: the name, the roots, the artifacts and their sources. The text is what a user
would write, a line per key, so a test may still edit a line of it (`str.replace`) to make it
wrong. `without_rule` edits a written profile so: it drops one of its runtime rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

Value = str | int | bool | Iterable[str]


def toml(value: Value) -> str:
    """A TOML value: strings and lists of strings quoted, numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "[" + ", ".join(toml(item) for item in value) + "]"


def lines(**keys: Value) -> str:
    return "".join(f"{key} = {toml(value)}\n" for key, value in keys.items())


def profile(
    name: str, roots: Iterable[str], *tables: str, description: str = "test profile"
) -> str:
    """A whole profile: the header, `roots`, then `tables` (artifacts, rules) in order."""
    header = lines(
        schema_version=1,
        name=name,
        description=description,
        architecture="x64",
        min_windows="10.0.10240",
        vc_runtime="app-local",
        roots=roots,
    )
    return header + "".join(tables)


def artifact(name: str, version: str, provides: Iterable[str], *sources: str, **more: Value) -> str:
    """One [[artifacts]] table (`more`: licenses = [...], ...) and its `sources`."""
    table = lines(name=name, version=version, provides=provides, **more)
    return "\n[[artifacts]]\n" + table + "".join(sources)


def source(kind: str, **keys: Value) -> str:
    """One [[artifacts.sources]] table of `kind` ("url", "pip", "dir")."""
    return "\n[[artifacts.sources]]\n" + lines(kind=kind, **keys)


def without_rule(profile: Path, target: Path, trigger: str) -> Path:
    """A copy of the profile TOML without the [[runtime_rules]] table of `trigger`."""
    tables = profile.read_text().split("\n[[")
    kept = [t for t in tables if not t.startswith(f'runtime_rules]]\ntrigger = "{trigger}"')]
    assert len(kept) == len(tables) - 1
    target.write_text("\n[[".join(kept))
    return target
