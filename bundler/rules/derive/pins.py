"""Decide layer: a wheel a derived profile pins (`bundle profiles new`).

Which file of which release, its SHA-256 and size, and the index page that listed it, the pin's
provenance. bundler.rules.derive.index finds pins on a package index; the profile's TOML
records them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WheelPin:
    """One wheel of a release as a derived profile pins it: the file, its SHA-256 and size
    (None where the index does not say), and where it was listed."""

    package: str
    version: str
    wheel: str
    sha256: str
    size: int | None
    url: str  # where the file is
    page: str  # the index page that listed it: the pin's provenance
