"""A real HTTP server on 127.0.0.1 for network tests: no mocking of requests.

`HttpServer` is independent of pytest (a context manager); `http_server` is the fixture. Each
path gets a behaviour (serve bytes honouring Range, fail first, cut the body, stall, a fixed
status, a folder served by name), and every request is logged with its Range header and status
so tests can assert what the client actually did on the wire.

Everything is bounded: the server listens on loopback only, a stall lasts at most
MAX_STALL seconds and ends as soon as the server stops, an idle keep-alive connection is
dropped after IDLE_TIMEOUT seconds.
"""

from __future__ import annotations

import re
import socket
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

MAX_STALL = 5.0
IDLE_TIMEOUT = 5.0

Behaviour = Callable[["Handler", int], None]
"""Answers one request: (the handler, how many earlier requests this path received)."""


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str  # without the query string
    range: str | None  # the Range header as sent, or None
    status: int  # the status the server sent (200 also for a body that was then cut)


class HttpServer:
    """A ThreadingHTTPServer in a daemon thread on 127.0.0.1 and a free port."""

    def __init__(self) -> None:
        self._routes: dict[str, Behaviour] = {}
        self._prefixes: dict[str, Behaviour] = {}
        self._log: list[LoggedRequest] = []
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release stalled handlers first, then stop accepting and close the socket."""
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses and the log -------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._log)

    def requests_for(self, path: str) -> list[LoggedRequest]:
        return [entry for entry in self.requests if entry.path == path]

    # -- behaviours ------------------------------------------------------------------------

    def route(self, path: str, behaviour: Behaviour) -> None:
        """Any custom behaviour; the helpers below cover the usual ones. Their "first request"
        is the first after this call."""
        with self._lock:
            self._routes[path] = behaviour
            self._counts[path] = 0

    def serve_bytes(
        self, path: str, data: bytes, *, ranges: bool = True, content_length: bool = True
    ) -> None:
        """200 with the bytes; with `ranges`, a Range request gets 206 + Content-Range (or 416).
        Without `content_length` the body is delimited by closing the connection."""
        self.route(path, lambda h, _n: h.send_bytes(data, ranges=ranges, length=content_length))

    def fail_first(self, path: str, data: bytes, *, status: int = 500, times: int = 1) -> None:
        """`status` for the first `times` requests, then serve the bytes."""

        def behaviour(handler: Handler, n: int) -> None:
            if n < times:
                handler.send_status(status)
            else:
                handler.send_bytes(data)

        self.route(path, behaviour)

    def cut_first(self, path: str, data: bytes, *, after: int, ranges: bool = True) -> None:
        """The first request announces the full length but gets only `after` body bytes, then
        the connection is closed; later requests are served normally (Range honoured if
        `ranges`)."""

        def behaviour(handler: Handler, n: int) -> None:
            handler.send_bytes(data, ranges=ranges, cut_after=after if n == 0 else None)

        self.route(path, behaviour)

    def stall(self, path: str, data: bytes, *, after: int = 0, seconds: float = MAX_STALL) -> None:
        """Headers announcing `data`, `after` body bytes, then silence for `seconds` (bounded,
        and cut short when the server stops), then the connection is closed."""
        if after >= len(data):
            raise ValueError("a stall needs more announced bytes than it sends")
        if seconds > MAX_STALL:
            raise ValueError(f"a stall is bounded to {MAX_STALL} s, got {seconds}")

        def behaviour(handler: Handler, _n: int) -> None:
            handler.send_bytes(data, cut_after=after)
            handler.wfile.flush()
            self.stopping.wait(seconds)

        self.route(path, behaviour)

    def status(self, path: str, code: int) -> None:
        """Always answer `code` (404, 403, 503 ...) with a short text body."""
        self.route(path, lambda h, _n: h.send_status(code))

    def serve_directory(self, prefix: str, folder: Path) -> None:
        """A mirror: `{prefix}{name}` serves `folder/name` (Range honoured); 404 otherwise.
        Only plain file names, never sub-paths or `..`."""

        def behaviour(handler: Handler, _n: int) -> None:
            name = unquote(handler.plain_path[len(prefix) :])
            file = folder / name
            if "/" in name or "\\" in name or name in ("", ".", "..") or not file.is_file():
                handler.send_status(404)
            else:
                handler.send_bytes(file.read_bytes())

        with self._lock:
            self._prefixes[prefix] = behaviour

    # -- used by the handler ---------------------------------------------------------------

    def _lookup(self, path: str) -> tuple[Behaviour | None, int]:
        """The behaviour for `path` (exact first, then the longest prefix) and its count."""
        with self._lock:
            behaviour = self._routes.get(path)
            if behaviour is None:
                matches = [p for p in self._prefixes if path.startswith(p)]
                behaviour = self._prefixes[max(matches, key=len)] if matches else None
            n = self._counts[path]
            self._counts[path] += 1
            return behaviour, n

    def _record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: HttpServer

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        # A client that hangs up mid-body (a test aborting on purpose) is not a server bug.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and Content-Length, like real servers
    timeout = IDLE_TIMEOUT
    server: _Server

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    @property
    def plain_path(self) -> str:
        return urlsplit(self.path).path

    def _dispatch(self) -> None:
        behaviour, n = self.server.owner._lookup(self.plain_path)
        if behaviour is None:
            self.send_status(404)
        else:
            behaviour(self, n)

    def send_response(self, code: int, message: str | None = None) -> None:
        entry = LoggedRequest(self.command, self.plain_path, self.headers.get("Range"), code)
        self.server.owner._record(entry)
        super().send_response(code, message)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean; the request log is the record

    def send_status(self, code: int) -> None:
        body = f"{code} {self.responses.get(code, ('',))[0]}\n".encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self._write(body)

    def send_bytes(
        self,
        data: bytes,
        *,
        ranges: bool = True,
        length: bool = True,
        cut_after: int | None = None,
    ) -> None:
        """The bytes, or the requested range of them; `cut_after` body bytes then hang up."""
        span = _byte_range(self.headers.get("Range"), len(data)) if ranges else None
        if span == "unsatisfiable":
            self._send_unsatisfiable(len(data))
            return
        start, end = span if isinstance(span, tuple) else (0, len(data))
        self.send_response(206 if isinstance(span, tuple) else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes" if ranges else "none")
        if isinstance(span, tuple):
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        if length:
            self.send_header("Content-Length", str(end - start))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        body = data[start:end]
        if cut_after is not None:
            body = body[:cut_after]
            self.close_connection = True
        self._write(body)

    def _send_unsatisfiable(self, size: int) -> None:
        self.send_response(416)
        self.send_header("Content-Range", f"bytes */{size}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _write(self, body: bytes) -> None:
        if self.command != "HEAD":
            self.wfile.write(body)


_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def _byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(start, end) for one satisfiable range, "unsatisfiable", or None to serve everything
    (no Range, or one this server does not understand: RFC 9110 says ignore it)."""
    match = _RANGE.fullmatch(header.strip()) if header else None
    if match is None or (not match[1] and not match[2]):
        return None
    if not match[1]:  # suffix range: the last N bytes
        suffix = int(match[2])
        return (max(size - suffix, 0), size) if suffix else "unsatisfiable"
    start = int(match[1])
    end = min(int(match[2]) + 1, size) if match[2] else size
    return (start, end) if start < size and start < end else "unsatisfiable"


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    """A running HttpServer, stopped after the test."""
    with HttpServer() as server:
        yield server
