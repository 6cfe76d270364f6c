"""Read layer: the settings bundle takes from the environment ($BUNDLE_HTTP_TIMEOUT,
$BUNDLE_HTTP_RETRIES, $BUNDLE_HTTP_BACKOFF, $BUNDLE_LOCK_TIMEOUT). Like pip's PIP_TIMEOUT: a slow
proxy needs longer timeouts, a CI job that would rather fail fast shorter ones, without a flag on
every command. A value that is no number is a configuration error (exit 14), never a guess."""

from __future__ import annotations

import math

from bundler.config.environment import variable
from bundler.config.variables import SOURCE_DATE_EPOCH
from bundler.errors import ConfigError


def env_number(name: str, unit: str, example: str) -> float | None:
    """$name as a finite number >= 0, or None when it is unset or blank."""
    text = (variable(name) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(
            f"${name}={text!r} is not a number of {unit}; set it to e.g. {example}, or unset "
            "it for the default."
        )
    return value


SOURCE_DATE_ENV = SOURCE_DATE_EPOCH.name


def source_date() -> int | None:
    """$SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/): the
    release's date in seconds since 1970, for what must record one (an SPDX document's creation
    time) without reading the clock; None when unset."""
    text = (variable(SOURCE_DATE_ENV) or "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise ConfigError(
            f"${SOURCE_DATE_ENV}={text!r} is not a number of seconds since 1970; set it to e.g. "
            "$(git log -1 --format=%ct), or unset it."
        )
    return int(text)
