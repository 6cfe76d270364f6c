"""Read layer: every environment variable bundle reads, in one table: the variable, what it
sets, and the option it stands in for. docs/building.md shows this table (python -m
tools.docs.environment_table --write), and bundler.config.environment reads the variables by
these names, nowhere else.

bundle's own names are derived, never spelt: a variable that stands in for an option is named
from the option's flag (bundler.config.option_table: `--cache-dir` -> BUNDLE_CACHE_DIR, pip's
`--index-url` -> PIP_INDEX_URL), a setting without a flag from the setting's name
(`http-timeout` -> BUNDLE_HTTP_TIMEOUT). The variables of the system and of other tools
(WINEPREFIX, SYSTEMROOT, SOURCE_DATE_EPOCH) keep their own names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bundler.config.option_table import OPTIONS, variable_name


@dataclass(frozen=True)
class Variable:
    """One variable: its name, what it sets, the option it stands in for (`instead_of`, as the
    table shows it) and, where no one name fits (a profile's `dir` source), the table's label."""

    name: str
    sets: str
    instead_of: str = ""
    label: str = ""
    setting: str = ""  # the resolver's setting whose environment layer it is (config.options)
    unit: str = ""  # a number's: what a value that is none is refused for (exit 14)
    example: str = ""  # a number that would do, for that message
    default: float | None = None  # a number's value when the variable is unset
    whole: bool = False  # a whole number (attempts)

    def row(self) -> str:
        """Its row of the Markdown table."""
        shown = self.label or f"`{self.name}`"
        return f"| {shown} | {self.sets} | {self.instead_of} |".replace("|  |", "| |")


def _of_option(name: str, sets: str, note: str = "") -> Variable:
    """The variable of the table's option `name`: named from its flag."""
    flag = OPTIONS[name]
    if flag.variable is None:
        raise ValueError(f"{flag.flag} has no environment variable in the option table")
    instead_of = f"`{flag.flag.split('/')[0]}`{note}"
    return Variable(flag.variable, sets, instead_of, setting=name.replace("-", "_"))


def _of_setting(name: str, sets: str, **number: Any) -> Variable:
    """The variable of a setting that has no flag: named from the setting; `number`: its unit,
    an example and its default where it holds a number."""
    return Variable(variable_name(name), sets, setting=name.replace("-", "_"), **number)


CACHE_DIR = _of_option("cache-dir", "the download cache", " (the flag wins)")
SECONDS = {"unit": "seconds", "example": "60"}
CONNECT_TIMEOUT = 10.0  # seconds to connect while $BUNDLE_HTTP_TIMEOUT is unset
HTTP_TIMEOUT = _of_setting(
    "http-timeout",
    f"seconds without a byte before a download gives up (default 30; connect: {CONNECT_TIMEOUT:g})",
    **SECONDS,
    default=30.0,
)
HTTP_RETRIES = _of_setting(
    "http-retries",
    "attempts after a connection error or a 5xx (default 3)",
    unit="attempts",
    example="5",
    default=3,
    whole=True,
)
HTTP_BACKOFF = _of_setting(
    "http-backoff",
    "seconds before the first retry, doubled each time (default 1)",
    **SECONDS,
    default=1.0,
)
LOCK_TIMEOUT = _of_setting(
    "lock-timeout",
    "seconds to wait for another `bundle` process's lock on the cache or an output folder "
    "(exit 20 after)",
    unit="seconds",
    example="600",
)
EVIDENCE_DIR = _of_setting(
    "evidence-dir", "a folder of your own pruning evidence, read before the shipped tables"
)
DEBUG = _of_option("debug", "anything but `0`: a traceback instead of the one-line error")
INDEX_URL = _of_option(
    "index-url",
    "the package index of `profiles new` and `profiles outdated` (pip's own variable)",
)
DIR_SOURCE = Variable(
    "",
    "where a local install of an artifact is (`--source dir`)",
    "`--search`",
    label="a profile's `dir` source variable (`CUDA_PATH`, ...)",
)
WINEPREFIX = Variable(
    "WINEPREFIX", "the Wine prefix of `audit --run` off Windows (else a private one in the cache)"
)
SYSTEMROOT = Variable("SYSTEMROOT", "the Windows folder, for `audit --run` on Windows")
SOURCE_DATE_EPOCH = Variable(
    "SOURCE_DATE_EPOCH",
    "the release's date in seconds since 1970, for `publish`'s SPDX document (else a fixed date)",
)

VARIABLES = (
    CACHE_DIR,
    HTTP_TIMEOUT,
    HTTP_RETRIES,
    HTTP_BACKOFF,
    LOCK_TIMEOUT,
    EVIDENCE_DIR,
    DEBUG,
    INDEX_URL,
    DIR_SOURCE,
    WINEPREFIX,
    SYSTEMROOT,
    SOURCE_DATE_EPOCH,
)


# The variables of every command that downloads or waits for a lock: no flag sets them, and a
# dry run names each with its origin (bundler.config.settings.pick_environment).
DOWNLOADING = (HTTP_TIMEOUT, HTTP_RETRIES, HTTP_BACKOFF, LOCK_TIMEOUT)


def markdown() -> str:
    """The table docs/building.md shows, one row a variable."""
    rows = ["| variable | what it sets | instead of |", "|---|---|---|"]
    return "\n".join(rows + [variable.row() for variable in VARIABLES])
