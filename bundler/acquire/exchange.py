"""Act layer: one HTTP exchange of a download, in two parts. `Wire`: the request (a Range for
the bytes the `.part` file already holds), the body streamed into that file as chunks arrive,
and what a broken connection means (another attempt, or final). `Resumption`: what the answer's
status means for the bytes already there: continue them, start over, or give up.

The retry loop around them (bundler.acquire.download) sees two signals: `Retry` (a transient
failure, worth another attempt after a backoff) and `Restart` (the body was reset, ask again
from byte 0 at no cost)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import urlsplit

from bundler.acquire.part_file import PartFile
from bundler.acquire.transport import (
    _advice,
    _cause_text,
    _is_dns_failure,
    _is_read_timeout,
    _transport_errors,
)
from bundler.errors import FetchError, IntegrityError
from bundler.progress_meter import ProgressCallback

if TYPE_CHECKING:  # imported when a download starts: most commands never need the network
    import requests

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class Retry(Exception):
    """A transient failure: worth another attempt after a backoff. `reason` is for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Restart(Exception):
    """The partial body cannot be continued; it was reset and the next request starts at 0."""


@dataclass
class Wire:
    """One request of a download and the body of its answer, appended to the `.part` file."""

    http: requests.Session
    url: str
    body: PartFile
    timeout: tuple[float, float]  # (connect, read) seconds: DownloadPolicy's
    chunk_size: int
    size_pin: int | None  # the pinned size, when known
    progress: ProgressCallback | None

    def request(self) -> requests.Response:
        import requests

        # identity: hash and count the bytes as stored, never a transparently re-encoded body.
        headers = {"Accept-Encoding": "identity"}
        if self.body.done:
            headers["Range"] = f"bytes={self.body.done}-"
        try:
            return self.http.get(self.url, headers=headers, stream=True, timeout=self.timeout)
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

        connect_timeout, read_timeout = self.timeout
        if _is_read_timeout(exc):
            return Retry(f"the server stopped sending data for {read_timeout:g} s")
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            return Retry(f"no connection within {connect_timeout:g} s")
        return Retry(f"{what} ({_cause_text(exc)})")

    def stream(self, response: requests.Response, total: int | None) -> None:
        """Append and hash as bytes arrive. Raw bytes, undecoded: the pin is over the file."""
        chunks: Iterator[bytes] = response.raw.stream(self.chunk_size, decode_content=False)
        report_total = total if total is not None else self.size_pin
        while (chunk := self._next_chunk(chunks)) is not None:
            self.body.append(chunk)
            self._check_overflow()
            if self.progress is not None:
                self.progress(self.body.done, report_total)
        if total is not None and self.body.done < total:
            raise Retry(f"the connection closed after {self.body.done} of {total} bytes")

    def _next_chunk(self, chunks: Iterator[bytes]) -> bytes | None:
        """Only reading is wrapped: a disk error while writing must not count as a network one."""
        try:
            return next(chunks, None)
        except _transport_errors() as exc:
            lost = f"connection lost after {self.body.done} bytes"
            raise self._transport_failure(exc, lost) from exc

    def _check_overflow(self) -> None:
        size = self.size_pin
        if size is not None and self.body.done > size:
            raise IntegrityError(
                f"{self.url} sent more than the pinned {size} bytes; the download was "
                "discarded: check the URL and the pinned version"
            )


@dataclass
class Resumption:
    """What an answer's status means for the bytes the `.part` file already holds; `resumed`
    says whether they are being continued (a 206 from where the file ends)."""

    url: str
    body: PartFile
    size_pin: int | None  # the pinned size, when known
    resumed: bool = False

    def accept(self, response: requests.Response) -> int | None:
        """Decide from the status what the body is; return the full entity size if known."""
        status = response.status_code
        if status == 200:
            return self._accept_full(response)
        if status == 206:
            return self._accept_partial(response)
        if status == 416 and self.body.done:
            self._restart()  # the partial file is as long as the entity, or longer
        if status >= 500:
            raise Retry(f"HTTP {status} {response.reason}")
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
        raise Restart

    def _check_total(self, total: int | None) -> None:
        size = self.size_pin
        if size is not None and total is not None and total != size:
            raise IntegrityError(
                f"{self.url} is {total} bytes according to the server but the pin says {size}; "
                "nothing was kept: check the URL and the pinned version"
            )


def _int_header(response: requests.Response, name: str) -> int | None:
    value = response.headers.get(name, "").strip()
    return int(value) if value.isdigit() else None
