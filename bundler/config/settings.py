"""Read layer: the settings bundle takes from the environment ($BUNDLE_HTTP_TIMEOUT,
$BUNDLE_HTTP_RETRIES, $BUNDLE_HTTP_BACKOFF, $BUNDLE_LOCK_TIMEOUT). Like pip's PIP_TIMEOUT: a slow
proxy needs longer timeouts, a CI job that would rather fail fast shorter ones, without a flag on
every command. A value that is no number is a configuration error (exit 14), never a guess."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.config.environment import variable
from bundler.config.variables import SOURCE_DATE_EPOCH, Variable
from bundler.errors import ConfigError

if TYPE_CHECKING:
    from bundler.config.options import Options


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


def pick_environment(picked: Options, *variables: Variable) -> None:
    """The settings only a variable sets (no flag, no bundle.toml: $BUNDLE_HTTP_TIMEOUT and the
    like), each entered through the resolver's environment layer with its origin, so that a
    dry run says where it came from as it does for the cache folder."""
    for known in variables:
        if known.unit:
            given = env_number(known.name, known.unit, known.example)
            value: object = int(given) if known.whole and given is not None else given
        else:
            text = variable(known.name)
            value = Path(text) if text else None
        picked.pick(known.setting, None, env=(known.name, value), default=known.default)


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
