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

import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import urlsplit

from bundler import files
from bundler.acquire.transport import (
    _advice,
    _cause_text,
    _is_dns_failure,
    _is_read_timeout,
    _transport_errors,
)
from bundler.errors import FetchError, IntegrityError, OutputError
from bundler.settings import env_number

if TYPE_CHECKING:  # imported when a download starts: most commands never need the network
    import requests

ProgressCallback = Callable[[int, int | None], None]
"""Called as bytes arrive with (bytes done, total size or None when the server does not say)."""


class ProgressMeter:
    """Bytes done by several threads (copies, inflating), told to one progress callback under a
    lock: the callback draws on a terminal."""

    def __init__(self, total: int, progress: ProgressCallback | None) -> None:
        self.total, self.progress = total, progress
        self.done = 0
        self._lock = threading.Lock()

    def add(self, count: int) -> None:
        if self.progress is None:
            return
        with self._lock:
            self.done += count
            self.progress(self.done, self.total)


_HEX = re.compile(r"[0-9a-f]+")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
TIMEOUT_ENV = "BUNDLE_HTTP_TIMEOUT"
RETRIES_ENV = "BUNDLE_HTTP_RETRIES"
BACKOFF_ENV = "BUNDLE_HTTP_BACKOFF"


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


def _env_number(name: str, default: float, unit: str = "seconds", example: str = "60") -> float:
    value = env_number(name, unit, example)
    return default if value is None else value


@dataclass(frozen=True)
class DownloadPolicy:
    """How hard to try. Tests shrink the timeouts and the backoff; the CLI sets allow_http.

    Defaults come from $BUNDLE_HTTP_TIMEOUT (seconds: both the connect and the read timeout),
    $BUNDLE_HTTP_RETRIES and $BUNDLE_HTTP_BACKOFF (seconds) when set, so every command that
    downloads honours them."""

    allow_http: bool = False  # plain http:// refused unless True (an explicitly allowed mirror)
    connect_timeout: float = field(default_factory=lambda: _env_number(TIMEOUT_ENV, 10.0))
    # seconds without a byte => stalled
    read_timeout: float = field(default_factory=lambda: _env_number(TIMEOUT_ENV, 30.0))
    # extra attempts on connection errors, timeouts, 5xx, cut bodies; never 4xx
    retries: int = field(default_factory=lambda: int(_env_number(RETRIES_ENV, 3, "attempts", "5")))
    # sleep backoff * 2**n before the n-th retry (n from 0)
    backoff: float = field(default_factory=lambda: _env_number(BACKOFF_ENV, 1.0))
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

    policy = policy if policy is not None else DownloadPolicy()  # the environment as of now
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
        with _PartFile(part, pins) as body:
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


class _PartFile:
    """The `.part` file and the running hashes of its bytes, always in step.

    Bytes left by an earlier interrupted call are hashed once on open, so a resumed download
    needs no second pass over what this call receives."""

    def __init__(self, path: Path, pins: Pins) -> None:
        self.path = path
        self._want_sha512 = pins.sha512 is not None
        self._new_hashers()
        self.done = 0
        self._absorb_leftover(pins.size)
        self._file = path.open("ab")

    def _new_hashers(self) -> None:
        self._sha256 = hashlib.sha256()
        self._sha512 = hashlib.sha512() if self._want_sha512 else None

    def _absorb_leftover(self, size_pin: int | None) -> None:
        if not self.path.is_file():
            return
        with self.path.open("rb") as leftover:
            while chunk := leftover.read(1 << 20):
                self._hash(chunk)
        if size_pin is not None and self.done > size_pin:
            self.path.unlink()  # longer than the whole file can be: not a prefix of it
            self._new_hashers()
            self.done = 0

    def _hash(self, chunk: bytes) -> None:
        self._sha256.update(chunk)
        if self._sha512 is not None:
            self._sha512.update(chunk)
        self.done += len(chunk)

    def append(self, chunk: bytes) -> None:
        self._file.write(chunk)
        self._hash(chunk)

    def reset(self) -> None:
        """Start over from byte 0 (the server ignored or refused our Range request)."""
        self._file.truncate(0)  # append mode: the next write lands at the new end, 0
        self._new_hashers()
        self.done = 0

    def sha256(self) -> str:
        return self._sha256.hexdigest()

    def sha512(self) -> str | None:
        return self._sha512.hexdigest() if self._sha512 is not None else None

    def __enter__(self) -> _PartFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._file.close()  # before any rename or unlink: Windows cannot do either on open files


class _Retry(Exception):
    """A transient failure: worth another attempt after a backoff. `reason` is for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Restart(Exception):
    """The partial body cannot be continued; it was reset and the next request starts at 0."""


@dataclass
class _Transfer:
    """One download's request loop. Attempts continue where the previous one stopped."""

    http: requests.Session
    url: str
    body: _PartFile
    pins: Pins
    policy: DownloadPolicy
    progress: ProgressCallback | None
    attempts: int = 0
    resumed: bool = False

    def run(self) -> None:
        """Only transient failures cost a retry. A restart from 0 does not: it happens only
        after a Range request, and the body is empty afterwards, so it cannot loop."""
        failures = 0
        while True:
            try:
                self._attempt()
                return
            except _Restart:
                continue
            except _Retry as retry:
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
        response = self._request()
        with response:
            for hop in [*response.history[1:], response]:
                check_scheme(hop.url, self.policy, redirected_from=self.url)
            total = self._accept(response)
            self._stream(response, total)

    def _request(self) -> requests.Response:
        import requests

        # identity: hash and count the bytes as stored, never a transparently re-encoded body.
        headers = {"Accept-Encoding": "identity"}
        if self.body.done:
            headers["Range"] = f"bytes={self.body.done}-"
        timeout = (self.policy.connect_timeout, self.policy.read_timeout)
        try:
            return self.http.get(self.url, headers=headers, stream=True, timeout=timeout)
        except _transport_errors() as exc:
            host = urlsplit(self.url).hostname
            raise self._transport_failure(exc, f"no response from {host}") from exc
        except requests.exceptions.RequestException as exc:
            raise FetchError(f"cannot request {self.url}: {_cause_text(exc)}") from exc

    def _transport_failure(self, exc: BaseException, what: str) -> Exception:
        """DNS failures are final (retrying will not make the name exist); the rest retry.
        `what` describes any other failure at this stage, the cause is appended."""
        if _is_dns_failure(exc):
            host = urlsplit(self.url).hostname
            return FetchError(
                f"cannot resolve host {host} of {self.url}: unreachable; "
                "check the URL, the network and DNS, or use a mirror"
            )
        import requests

        if _is_read_timeout(exc):
            return _Retry(f"the server stopped sending data for {self.policy.read_timeout:g} s")
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return _Retry(f"no connection within {self.policy.connect_timeout:g} s")
        return _Retry(f"{what} ({_cause_text(exc)})")

    def _accept(self, response: requests.Response) -> int | None:
        """Decide from the status what the body is; return the full entity size if known."""
        status = response.status_code
        if status == 200:
            return self._accept_full(response)
        if status == 206:
            return self._accept_partial(response)
        if status == 416 and self.body.done:
            self._restart()  # the partial file is as long as the entity, or longer
        if status >= 500:
            raise _Retry(f"HTTP {status} {response.reason}")
        raise FetchError(f"{self.url}: HTTP {status} {response.reason}; {_advice(status)}")

    def _accept_full(self, response: requests.Response) -> int | None:
        if self.body.done:  # the server ignored Range: start over, never append a second copy
            self.body.reset()
            self.resumed = False
        total = _int_header(response, "Content-Length")
        self._check_total(total)
        return total

    def _accept_partial(self, response: requests.Response) -> int | None:
        header = response.headers.get("Content-Range", "")
        match = _CONTENT_RANGE.fullmatch(header.strip())
        if match is None or int(match[1]) != self.body.done:
            if not self.body.done:
                raise FetchError(
                    f"{self.url}: the server answered 206 (Content-Range {header!r}) to a "
                    "request for the whole file; use another mirror"
                )
            self._restart()
        self.resumed = True
        total = None if match[3] == "*" else int(match[3])
        self._check_total(total)
        return total

    def _restart(self) -> NoReturn:
        self.body.reset()
        self.resumed = False
        raise _Restart

    def _check_total(self, total: int | None) -> None:
        size = self.pins.size
        if size is not None and total is not None and total != size:
            raise IntegrityError(
                f"{self.url} is {total} bytes according to the server but the pin says {size}; "
                "nothing was kept: check the URL and the pinned version"
            )

    def _stream(self, response: requests.Response, total: int | None) -> None:
        """Append and hash as bytes arrive. Raw bytes, undecoded: the pin is over the file."""
        chunks: Iterator[bytes] = response.raw.stream(self.policy.chunk_size, decode_content=False)
        report_total = total if total is not None else self.pins.size
        while (chunk := self._next_chunk(chunks)) is not None:
            self.body.append(chunk)
            self._check_overflow()
            if self.progress is not None:
                self.progress(self.body.done, report_total)
        if total is not None and self.body.done < total:
            raise _Retry(f"the connection closed after {self.body.done} of {total} bytes")

    def _next_chunk(self, chunks: Iterator[bytes]) -> bytes | None:
        """Only reading is wrapped: a disk error while writing must not count as a network one."""
        try:
            return next(chunks, None)
        except _transport_errors() as exc:
            lost = f"connection lost after {self.body.done} bytes"
            raise self._transport_failure(exc, lost) from exc

    def _check_overflow(self) -> None:
        size = self.pins.size
        if size is not None and self.body.done > size:
            raise IntegrityError(
                f"{self.url} sent more than the pinned {size} bytes; the download was "
                "discarded: check the URL and the pinned version"
            )


def _verify(url: str, body: _PartFile, pins: Pins, resumed: bool) -> None:
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


def _int_header(response: requests.Response, name: str) -> int | None:
    value = response.headers.get(name, "").strip()
    return int(value) if value.isdigit() else None
