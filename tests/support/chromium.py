"""A real browser for tests of generated pages: headless Chromium (Debian package `chromium`).

One launch per page both dumps the DOM after the scripts ran and takes a screenshot. The
browser gets a private profile, and its network is a recorder on 127.0.0.1: every request the
page makes reaches the recorder, which notes the host and hangs up, so the load fails as it
would offline and the test sees what was attempted. Console messages come from Chromium's
stderr log (`--enable-logging=stderr`), where it writes each one, of any level, as
`[...:INFO:CONSOLE:12] "text", source: file:///... (12)` (Chromium 156; older builds wrote
`CONSOLE(12)`); uncaught exceptions and Content-Security-Policy refusals appear there too.
"""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
import threading
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Tall enough for the whole graph of the GPU bundle: its last row (the Windows node) ends about
# 1370 px down here, and in one CI run it fell below a 1400 px screenshot (other fonts, or a
# longer temporary path in the heading, move everything under it down).
WINDOW = (1280, 2000)
# Chromium's own traffic, not the page's: network time, the extension/component updater and
# the account service, seen on Chromium 156 (Debian 12) despite --disable-background-networking.
# Exact host names, so a page that loads from another Google host (fonts.googleapis.com) is
# still caught.
CHROMIUM_OWN_HOSTS = frozenset(
    {"clients2.google.com", "update.googleapis.com", "accounts.google.com"}
)
_CONSOLE = re.compile(r':CONSOLE(?:\(\d+\)|:\d+)\] "(?P<text>.*)", source: ', re.MULTILINE)
_REQUEST = re.compile(rb"^[A-Z]+ (?:[a-z]+://)?(?P<host>[^/:\s]+)")


@dataclass(frozen=True)
class PageLoad:
    dom: str  # the document after its scripts ran (--dump-dom)
    console: list[str]  # every console message, exception and CSP refusal
    requests: list[str]  # hosts the page tried to reach (Chromium's own traffic left out)
    screenshot: bytes  # PNG of the top WINDOW of the page


class NetworkRecorder:
    """A fake proxy: accepts each connection, records the host of its request line (CONNECT
    host:443 or GET http://host/...), and closes it, so every request fails."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)  # closing a socket does not wake accept(): poll a flag
        self.port: int = self.server.getsockname()[1]
        self.hosts: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> NetworkRecorder:
        self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.server.close()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    match = _REQUEST.match(connection.recv(4096))
                except OSError:
                    match = None
                self.hosts.append(match["host"].decode("ascii", "replace") if match else "?")


def headless(profile: Path, port: int) -> list[str]:
    """Headless Chromium, offline: its own profile folder, every request through the
    NetworkRecorder on `port` (127.0.0.1 alone resolves), nothing of its own running."""
    assert CHROMIUM is not None
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--proxy-server=127.0.0.1:{port}",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ]


def load_page(page: Path, workdir: Path, fragment: str = "") -> PageLoad:
    """Open `page` (a file, with an optional #fragment) in headless Chromium, offline."""
    assert CHROMIUM is not None
    workdir.mkdir(parents=True, exist_ok=True)
    shot = workdir / "screenshot.png"
    with NetworkRecorder() as recorder:
        result = subprocess.run(
            [
                *headless(workdir / "profile", recorder.port),
                "--enable-logging=stderr",
                "--v=0",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                f"--screenshot={shot}",
                "--dump-dom",
                page.resolve().as_uri() + (f"#{fragment}" if fragment else ""),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    requests = [host for host in recorder.hosts if host not in CHROMIUM_OWN_HOSTS]
    console = [match["text"] for match in _CONSOLE.finditer(result.stderr)]
    return PageLoad(result.stdout, console, requests, shot.read_bytes())


# --- PNG, enough to count a screenshot's colours ------------------------------------------------


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    colours: Counter[tuple[int, int, int]]  # pixels of each RGB colour


def read_png(data: bytes) -> Image:
    """Decode an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes): chunks, zlib,
    then each row's filter undone (PNG spec, section 9)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    chunks = _chunks(data)
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", chunks["IHDR"])
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, (depth, colour_type)
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(chunks["IDAT"])
    stride = width * channels
    assert len(raw) == height * (stride + 1), "truncated image data"
    colours: Counter[tuple[int, int, int]] = Counter()
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        row = _unfilter(
            raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, channels
        )
        colours.update(zip(row[0::channels], row[1::channels], row[2::channels], strict=True))
        previous = row
    return Image(width, height, colours)


def _chunks(data: bytes) -> dict[str, bytes]:
    """Chunk type -> data; the IDAT chunks joined, as the spec says to read them."""
    chunks: dict[str, bytes] = {}
    position = 8
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        name = kind.decode("ascii")
        chunks[name] = chunks.get(name, b"") + body
        position += 12 + length
    return chunks


def _unfilter(kind: int, row: bytearray, previous: bytearray, step: int) -> bytearray:
    if kind == 1:  # Sub
        for i in range(step, len(row)):
            row[i] = (row[i] + row[i - step]) & 0xFF
    elif kind == 2:  # Up
        row = bytearray((a + b) & 0xFF for a, b in zip(row, previous, strict=True))
    elif kind == 3:  # Average
        for i in range(len(row)):
            left = row[i - step] if i >= step else 0
            row[i] = (row[i] + ((left + previous[i]) >> 1)) & 0xFF
    elif kind == 4:  # Paeth
        for i in range(len(row)):
            left = row[i - step] if i >= step else 0
            corner = previous[i - step] if i >= step else 0
            row[i] = (row[i] + _paeth(left, previous[i], corner)) & 0xFF
    else:
        assert kind == 0, f"unknown PNG filter {kind}"
    return row


def _paeth(left: int, up: int, corner: int) -> int:
    estimate = left + up - corner
    distances = (abs(estimate - left), abs(estimate - up), abs(estimate - corner))
    if distances[0] <= distances[1] and distances[0] <= distances[2]:
        return left
    return up if distances[1] <= distances[2] else corner


def rgb(colour: str) -> tuple[int, int, int]:
    """ "#a5d6a7" -> (165, 214, 167)."""
    value = bytes.fromhex(colour.removeprefix("#"))
    return value[0], value[1], value[2]
