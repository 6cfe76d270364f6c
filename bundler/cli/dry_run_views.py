"""Talk layer: the view of every command's --dry-run: what the command would do, and the
settings it would do it with, each with its origin (the flag, an environment variable, the
default), in `bundle build --dry-run --json`'s shape: {setting: {"value", "from"}}. Pure: they
return strings; the CLI prints."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type hints only: importing views must not import every command's modules
    from bundler.config.options import Options
    from bundler.target.profiles import Profile

Settings = Mapping[str, Mapping[str, object]]


def dry_run_report(command: str, steps: Sequence[str], settings: Settings) -> str:
    lines = [f"bundle {command} --dry-run: nothing done; it would"]
    lines += [f"  {step}" for step in steps]
    lines.append("with these settings:")
    width = max((len(name) for name in settings), default=0)
    for name, setting in settings.items():
        lines.append(f"  {name:<{width}}  {_shown(setting['value'])} (from {setting['from']})")
    return "\n".join(lines)


def dry_run_json(command: str, steps: Sequence[str], settings: Settings) -> str:
    document = {
        "schema_version": 1,
        "command": command,
        "dry_run": True,
        "would": list(steps),
        "settings": {name: dict(setting) for name, setting in settings.items()},
    }
    return json.dumps(document, indent=2)


def settings_part(picked: Options | None) -> dict[str, object]:
    """{"settings": ...} in the dry run's shape, for a command's own --json (render, audit
    --run/--html): the settings it resolved, each with its origin; nothing when it resolved
    none."""
    return {"settings": picked.report()} if picked is not None and picked.origins else {}


def _shown(value: object) -> str:
    """A setting's value as the command line spells it: a list blank-separated, none as -."""
    if value is None or value == []:
        return "-"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def acquire_step(profile: Profile, cache: Path) -> str:
    """The step of fetch, msbuild, profiles check and deps --fetch that downloads: which
    artifacts, into which cache folder."""
    pinned = ", ".join(f"{item.name} {item.version}" for item in profile.artifacts)
    count = len(profile.artifacts)
    return f"acquire and verify the {count} artifact(s) of {profile.name} ({pinned}) into {cache}"
