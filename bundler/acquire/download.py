"""Act layer: download one pinned artifact: stream it to a `.part` file beside the target, hash
while streaming, and rename it to the final name only after every pin matched.

Invariants a caller can rely on:
- nothing ever appears under the final name unless its SHA-256 (and SHA-512 and size, when
  pinned) matched: the rename is the last step;
- no byte this call downloaded is read twice: the hashers are fed as chunks arrive;
- an integrity failure deletes the `.part` file (those bytes are known to be wrong);
- a network failure (4xx, retries exhausted, unresolvable host) keeps a non-empty `.part` file:
  the next call hashes its bytes once and asks for the rest with `Range: bytes=N-`, so a 2 GB
  CUDA archive cut at 1.9 GB is not fetched again from zero. A server without range support
  answers 200 and the file starts over.

Two calls must not download to the same `dest` at the same time: they would share the `.part`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from bundler.acquire.exchange import Restart, Resumption, Retry, Wire
from bundler.acquire.part_file import PartFile
from bundler.config.variables import (
    CONNECT_TIMEOUT,
    HTTP_BACKOFF,
    HTTP_RETRIES,
    HTTP_TIMEOUT,
    Variable,
)
from bundler.disk import files
from bundler.errors import FetchError, IntegrityError, OutputError
from bundler.progress_meter import ProgressCallback

if TYPE_CHECKING:  # imported when a download starts: most commands never need the network
    import requests


_HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True)
class Pins:
    """What the bytes must be. The ORT zip has two independent pins (sha256 and sha512)."""

    sha256: str  # lower-case hex
    sha512: str | None = None  # verified too when given
    size: int | None = None  # exact size in bytes when known

    def __post_init__(self) -> None:
        # A malformed pin would fail only after the whole download: catch the typo up front.
        _check_hex("sha256", self.sha256, 64)
        if self.sha512 is not None:
            _check_hex("sha512", self.sha512, 128)


def _check_hex(name: str, value: str, length: int) -> None:
    if len(value) != length or not _HEX.fullmatch(value):
        raise ValueError(f"{name} pin must be {length} lower-case hex digits, got {value!r}")


def _table_default(known: Variable) -> float:
    """`known`'s default in the table of variables (each download variable has one)."""
    assert known.default is not None
    return known.default


@dataclass(frozen=True)
class DownloadPolicy:
    """How hard to try. Tests shrink the timeouts and the backoff; the CLI sets allow_http.

    The defaults are those of the table of variables (bundler.config.variables). A command that
    downloads builds its policy from $BUNDLE_HTTP_TIMEOUT, $BUNDLE_HTTP_RETRIES and
    $BUNDLE_HTTP_BACKOFF as it read them (bundler.config.settings.http_limits), so every one
    honours them; the policy itself reads nothing."""

    allow_http: bool = False  # plain http:// refused unless True (an explicitly allowed mirror)
    connect_timeout: float = CONNECT_TIMEOUT
    # seconds without a byte => stalled
    read_timeout: float = _table_default(HTTP_TIMEOUT)
    # extra attempts on connection errors, timeouts, 5xx, cut bodies; never 4xx
    retries: int = int(_table_default(HTTP_RETRIES))
    # sleep backoff * 2**n before the n-th retry (n from 0)
    backoff: float = _table_default(HTTP_BACKOFF)
    chunk_size: int = 1 << 20


@dataclass(frozen=True)
class DownloadResult:
    """A verified file under its final name; `sha256` is the hash actually computed."""

    path: Path
    sha256: str
    size: int
    attempts: int  # HTTP requests made by this call
    resumed: bool  # a Range request continued a partial body (this call's or an earlier one's)


def download(
    url: str,
    dest: Path,
    pins: Pins,
    policy: DownloadPolicy | None = None,
    progress: ProgressCallback | None = None,
    session: requests.Session | None = None,
) -> DownloadResult:
    """Fetch `url` to `dest`, verified against `pins`.

    Raises FetchError when the bytes cannot be obtained (refused URL, HTTP error, unreachable
    host, retries exhausted) and IntegrityError when they do not match a pin. See the module
    docstring for what happens to the `.part` file in each case.
    """
    import requests  # ~0.1 s to import: only when something is downloaded

    policy = policy if policy is not None else DownloadPolicy()  # the table's defaults
    check_scheme(url, policy)
    http = session if session is not None else requests.Session()
    try:
        return _download_to(http, url, dest, pins, policy, progress)
    finally:
        if session is None:
            http.close()


def check_scheme(url: str, policy: DownloadPolicy, redirected_from: str | None = None) -> None:
    """Refuse a transport before any byte is requested: the pins would catch substituted bytes,
    but plain HTTP also lets anyone on the path see and stall what is installed. A mirror on a
    trusted network may opt in."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https" or (scheme == "http" and policy.allow_http):
        return
    origin = f"{redirected_from} redirected to {url}" if redirected_from else url
    if scheme == "http":
        raise FetchError(
            f"refusing plain HTTP URL ({origin}): use https://, or pass --allow-http if it is "
            "a mirror you trust (the pinned hashes are still checked)"
        )
    raise FetchError(
        f"unsupported URL scheme {scheme or '(none)'!r} ({origin}): only https:// "
        "(and http:// with --allow-http) can be downloaded"
    )


def _download_to(
    http: requests.Session,
    url: str,
    dest: Path,
    pins: Pins,
    policy: DownloadPolicy,
    progress: ProgressCallback | None,
) -> DownloadResult:
    """Transfer, verify, rename; decide the fate of the `.part` file on failure."""
    part = dest.with_name(dest.name + ".part")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with PartFile(part, pins.sha512 is not None, pins.size) as body:
            transfer = _Transfer(http, url, body, pins, policy, progress)
            transfer.run()
            _verify(url, body, pins, transfer.resumed)
        files.replace(part, dest)
    except IntegrityError:
        part.unlink(missing_ok=True)
        raise
    except FetchError:
        _drop_if_empty(part)
        raise
    except OSError as exc:  # transport errors became FetchError already: this is the disk
        raise OutputError(
            f"{part}: cannot write the download ({exc.strerror or exc}); free space in "
            f"{dest.parent} or choose another folder, then run again (the bytes so far are "
            "kept and resumed)."
        ) from exc
    return DownloadResult(dest, body.sha256(), body.done, transfer.attempts, transfer.resumed)


def _drop_if_empty(part: Path) -> None:
    """An empty `.part` has nothing to resume: do not leave litter after a 404."""
    try:
        if part.stat().st_size == 0:
            part.unlink()
    except FileNotFoundError:
        pass


@dataclass
class _Transfer:
    """One download's request loop. Attempts continue where the previous one stopped: the
    request and its body are the `wire`'s, what a status means for the bytes already there
    is the `answer`'s."""

    http: requests.Session
    url: str
    body: PartFile
    pins: Pins
    policy: DownloadPolicy
    progress: ProgressCallback | None
    attempts: int = 0

    def __post_init__(self) -> None:
        timeout = (self.policy.connect_timeout, self.policy.read_timeout)
        self.wire = Wire(
            self.http, self.url, self.body, timeout, self.policy.chunk_size, self.pins.size,
            self.progress,
        )  # fmt: skip
        self.answer = Resumption(self.url, self.body, self.pins.size)

    @property
    def resumed(self) -> bool:
        """A Range request continued a partial body (this call's or an earlier one's)."""
        return self.answer.resumed

    def run(self) -> None:
        """Only transient failures cost a retry. A restart from 0 does not: it happens only
        after a Range request, and the body is empty afterwards, so it cannot loop."""
        failures = 0
        while True:
            try:
                self._attempt()
                return
            except Restart:
                continue
            except Retry as retry:
                if failures >= self.policy.retries:
                    raise FetchError(self._gave_up(retry.reason)) from retry
                time.sleep(self.policy.backoff * 2**failures)
                failures += 1

    def _gave_up(self, reason: str) -> str:
        kept = ""
        if self.body.done:
            kept = f"{self.body.done} bytes kept in {self.body.path} and resumed next time; "
        return (
            f"download of {self.url} failed after {self.attempts} attempts: {reason}; "
            f"{kept}try again later or use a mirror"
        )

    def _attempt(self) -> None:
        self.attempts += 1
        response = self.wire.request()
        with response:
            for hop in [*response.history[1:], response]:
                check_scheme(hop.url, self.policy, redirected_from=self.url)
            total = self.answer.accept(response)
            self.wire.stream(response, total)


def _verify(url: str, body: PartFile, pins: Pins, resumed: bool) -> None:
    """Compare every pin; the caller deletes the `.part` file when one does not match."""
    hint = " (it continued a partial download: run again to fetch it from scratch)"
    hint = hint if resumed else ""
    if pins.size is not None and body.done != pins.size:
        raise IntegrityError(
            f"{url}: expected {pins.size} bytes, received {body.done}; the file was discarded{hint}"
        )
    for name, expected, actual in (
        ("SHA-256", pins.sha256, body.sha256()),
        ("SHA-512", pins.sha512, body.sha512()),
    ):
        if expected is not None and actual != expected:
            raise IntegrityError(
                f"{url}: {name} mismatch, expected {expected}, got {actual}; "
                f"the file was discarded{hint}. Check the URL and mirror; change the pin only "
                "after verifying the new file from the publisher"
            )
