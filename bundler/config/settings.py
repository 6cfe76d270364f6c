"""Read layer: the settings bundle takes from the environment ($BUNDLE_HTTP_TIMEOUT,
$BUNDLE_HTTP_RETRIES, $BUNDLE_HTTP_BACKOFF, $BUNDLE_LOCK_TIMEOUT, $BUNDLE_EVIDENCE_DIR). Like pip's
PIP_TIMEOUT: a slow proxy needs longer timeouts, a CI job that would rather fail fast shorter ones,
without a flag on every command. A value that is no number is a configuration error (exit 14),
never a guess. The command reads each once (http_limits, lock_timeout, own_evidence_dir) and hands
the library the values: no library module calls these (tests/test_config_reads.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.config.environment import variable
from bundler.config.variables import (
    CONNECT_TIMEOUT,
    EVIDENCE_DIR,
    HTTP_BACKOFF,
    HTTP_RETRIES,
    HTTP_TIMEOUT,
    LOCK_TIMEOUT,
    SOURCE_DATE_EPOCH,
    Variable,
)
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


@dataclass(frozen=True)
class HttpLimits:
    """How hard a download tries, as the environment sets it: the fields of the same names of
    bundler.acquire.download.DownloadPolicy, which the command builds from them."""

    connect_timeout: float  # seconds
    read_timeout: float  # seconds without a byte
    retries: int  # extra attempts
    backoff: float  # seconds before the first retry


def http_limits() -> HttpLimits:
    """$BUNDLE_HTTP_TIMEOUT (seconds: both the connect and the read timeout), $BUNDLE_HTTP_RETRIES
    and $BUNDLE_HTTP_BACKOFF (seconds), each else its default in the table of variables (the
    connect timeout: CONNECT_TIMEOUT); read once by each command that downloads."""
    timeout = _number(HTTP_TIMEOUT)
    return HttpLimits(
        connect_timeout=CONNECT_TIMEOUT if timeout is None else timeout,
        read_timeout=_or_default(timeout, HTTP_TIMEOUT),
        retries=int(_or_default(_number(HTTP_RETRIES), HTTP_RETRIES)),
        backoff=_or_default(_number(HTTP_BACKOFF), HTTP_BACKOFF),
    )


def lock_timeout() -> float | None:
    """$BUNDLE_LOCK_TIMEOUT: seconds to wait for another bundle process's lock; unset, wait as
    long as it takes (that process is downloading or writing what this one needs)."""
    return _number(LOCK_TIMEOUT)


def own_evidence_dir() -> Path | None:
    """$BUNDLE_EVIDENCE_DIR: a folder of the user's own pruning evidence (a team's measurement
    with tools/evidence/gpu_matrix.py), read before the shipped tables; None when unset."""
    own = variable(EVIDENCE_DIR.name)
    return Path(own) if own else None


def _number(known: Variable) -> float | None:
    return env_number(known.name, known.unit, known.example)


def _or_default(value: float | None, known: Variable) -> float:
    """`value`, else `known`'s default in the table (each download variable has one)."""
    chosen = known.default if value is None else value
    assert chosen is not None
    return chosen


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
