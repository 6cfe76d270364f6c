"""Decide layer: one options resolver. Every setting a command takes comes from the first of
the command-line flag, `bundle.toml`, the profile and the default that has a value, and the
resolver remembers which it was, so that `bundle build --dry-run --json` can say where each
value came from. Commands call `pick`; none writes the precedence out by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

FLAG, CONFIG, PROFILE, DEFAULT = "flag", "bundle.toml", "profile", "default"


@dataclass
class Options:
    """The values picked so far, by setting name, with their origin."""

    origins: dict[str, str] = field(default_factory=dict)
    values: dict[str, object] = field(default_factory=dict)

    def pick(
        self,
        name: str,
        flag: T | None,
        config: T | None = None,
        profile: T | None = None,
        default: T | None = None,
        default_factory: Callable[[], T] | None = None,
        env: tuple[str, T | None] | None = None,
    ) -> T | None:
        """The first of flag > environment variable > bundle.toml > profile > default that is
        not None; `env` is the variable's name and its value (read by the caller, converted);
        a default that costs something to find (an import, a lookup) comes from
        `default_factory`, called only when nothing else decided."""
        variable = (env[1], f"${env[0]}") if env is not None else (None, "")
        layers = ((flag, FLAG), variable, (config, CONFIG), (profile, PROFILE))
        for value, origin in layers:
            if value is not None:
                return self._chosen(name, value, origin)
        if default is None and default_factory is not None:
            default = default_factory()
        return self._chosen(name, default, DEFAULT)

    def _chosen(self, name: str, value: T | None, origin: str) -> T | None:
        self.origins[name] = origin
        self.values[name] = value
        return value

    def report(self) -> dict[str, dict[str, object]]:
        """{setting: {"value", "from"}} for --json (paths and tuples as text)."""
        return {
            name: {"value": _plain(self.values[name]), "from": self.origins[name]}
            for name in sorted(self.origins)
        }


def _plain(value: object) -> object:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return str(value)
