"""bundler.acquire.download against a real HTTP server on 127.0.0.1
(tests/support/httpserver.py)."""

from __future__ import annotations

import hashlib
import random
import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from bundler.acquire.download import DownloadPolicy, DownloadResult, Pins, check_scheme, download
from bundler.errors import ConfigError, FetchError, IntegrityError
from tests.support.httpserver import HttpServer

DATA = random.Random(1902).randbytes(300_000)
SHA256 = hashlib.sha256(DATA).hexdigest()
SHA512 = hashlib.sha512(DATA).hexdigest()
PINS = Pins(SHA256)
WRONG_SHA256 = hashlib.sha256(b"something else").hexdigest()
WRONG_SHA512 = hashlib.sha512(b"something else").hexdigest()
# Loopback only: short timeouts, a tiny backoff, small chunks so a body spans many reads.
FAST = DownloadPolicy(
    allow_http=True, connect_timeout=2.0, read_timeout=2.0, backoff=0.01, chunk_size=16_384
)


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as http:
        http.trust_env = False  # no proxy from the environment between us and 127.0.0.1
        yield http


class CountingSession(requests.Session):
    """Counts requests that never reach our server (DNS failure, refused connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.trust_env = False
        self.sent = 0

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self.sent += 1
        return super().send(request, **kwargs)


def fetch(
    server: HttpServer,
    session: requests.Session,
    dest: Path,
    pins: Pins = PINS,
    policy: DownloadPolicy = FAST,
    path: str = "/ort.zip",
) -> DownloadResult:
    return download(server.url(path), dest, pins, policy, session=session)


def part_of(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def ranges(server: HttpServer) -> list[tuple[str | None, int]]:
    return [(entry.range, entry.status) for entry in server.requests]


def assert_nothing_left(dest: Path) -> None:
    assert not dest.exists()
    assert not part_of(dest).exists()


# -- success and pins ------------------------------------------------------------------------


def test_correct_file_is_verified_and_renamed(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    dest = tmp_path / "cache" / "ort.zip"
    result = fetch(http_server, session, dest)
    assert result == DownloadResult(dest, SHA256, len(DATA), attempts=1, resumed=False)
    assert dest.read_bytes() == DATA
    assert not part_of(dest).exists()
    assert ranges(http_server) == [(None, 200)]


def test_all_three_pins_matching(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    result = fetch(http_server, session, tmp_path / "ort.zip", Pins(SHA256, SHA512, len(DATA)))
    assert (result.sha256, result.size) == (SHA256, len(DATA))


def test_wrong_sha256_is_discarded(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    dest = tmp_path / "ort.zip"
    with pytest.raises(IntegrityError) as caught:
        fetch(http_server, session, dest, Pins(WRONG_SHA256))
    message = str(caught.value)
    assert http_server.url("/ort.zip") in message
    assert f"expected {WRONG_SHA256}, got {SHA256}" in message
    assert "discarded" in message
    assert "\n" not in message
    assert_nothing_left(dest)


def test_size_pin_disagreeing_with_content_length_fails_before_downloading(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    dest = tmp_path / "ort.zip"
    seen: list[int] = []
    with pytest.raises(IntegrityError) as caught:
        download(
            http_server.url("/ort.zip"),
            dest,
            Pins(SHA256, size=1000),
            FAST,
            progress=lambda done, _total: seen.append(done),
            session=session,
        )
    assert f"is {len(DATA)} bytes according to the server but the pin says 1000" in str(
        caught.value
    )
    assert seen == []
    assert_nothing_left(dest)


@pytest.mark.parametrize(
    ("content_length", "pins", "words"),
    [
        (
            True,
            Pins(SHA256, sha512=WRONG_SHA512),
            ("SHA-512 mismatch", f"expected {WRONG_SHA512}, got {SHA512}"),
        ),
        (False, Pins(SHA256, size=100_000), ("sent more than the pinned 100000 bytes",)),
        (
            False,
            Pins(SHA256, size=len(DATA) + 1),
            (f"expected {len(DATA) + 1} bytes, received {len(DATA)}",),
        ),
    ],
    ids=["wrong-sha512-with-the-right-sha256", "longer-than-the-size-pin", "shorter"],
)
def test_a_body_that_breaks_a_pin_is_discarded(
    http_server: HttpServer,
    session: requests.Session,
    tmp_path: Path,
    content_length: bool,
    pins: Pins,
    words: tuple[str, ...],
) -> None:
    """Without a Content-Length the size pin is checked while the body arrives."""
    http_server.serve_bytes("/ort.zip", DATA, content_length=content_length)
    dest = tmp_path / "ort.zip"
    with pytest.raises(IntegrityError) as caught:
        fetch(http_server, session, dest, pins)
    for word in words:
        assert word in str(caught.value)
    assert_nothing_left(dest)


def test_malformed_pin_is_rejected_up_front() -> None:
    with pytest.raises(ValueError, match="64 lower-case hex digits"):
        Pins(SHA256.upper())


# -- HTTP errors and retries -----------------------------------------------------------------


@pytest.mark.parametrize("status", [403, 404, 410])
def test_client_error_fails_at_once(
    http_server: HttpServer, session: requests.Session, tmp_path: Path, status: int
) -> None:
    http_server.status("/ort.zip", status)
    dest = tmp_path / "ort.zip"
    with pytest.raises(FetchError) as caught:
        fetch(http_server, session, dest)
    assert f"{http_server.url('/ort.zip')}: HTTP {status}" in str(caught.value)
    assert ranges(http_server) == [(None, status)]
    assert_nothing_left(dest)


def test_server_error_then_success(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.fail_first("/ort.zip", DATA, status=500)
    dest = tmp_path / "ort.zip"
    result = fetch(http_server, session, dest)
    assert (result.attempts, result.resumed) == (2, False)
    assert ranges(http_server) == [(None, 500), (None, 200)]
    assert dest.read_bytes() == DATA


def test_server_errors_exhaust_the_retries(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.status("/ort.zip", 503)
    dest = tmp_path / "ort.zip"
    with pytest.raises(FetchError) as caught:
        fetch(http_server, session, dest, policy=replace(FAST, retries=2))
    message = str(caught.value)
    assert "failed after 3 attempts: HTTP 503" in message
    assert "try again later or use a mirror" in message
    assert ranges(http_server) == [(None, 503)] * 3
    assert_nothing_left(dest)  # an empty .part is not worth keeping


def test_refused_connection_is_retried(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = DownloadPolicy(allow_http=True, retries=2, backoff=0.01, connect_timeout=2.0)
    with CountingSession() as counting, pytest.raises(FetchError) as caught:
        download(
            f"http://127.0.0.1:{port}/x.zip", tmp_path / "x.zip", PINS, policy, session=counting
        )
    assert counting.sent == 3
    assert "failed after 3 attempts: no response from 127.0.0.1 (Connection refused)" in str(
        caught.value
    )
    assert_nothing_left(tmp_path / "x.zip")


def test_unresolvable_host_fails_at_once(tmp_path: Path) -> None:
    policy = DownloadPolicy(retries=3, backoff=0.01)
    with CountingSession() as counting, pytest.raises(FetchError) as caught:
        download("https://nonexistent.invalid/x", tmp_path / "x", PINS, policy, session=counting)
    assert "cannot resolve host nonexistent.invalid" in str(caught.value)
    assert "unreachable" in str(caught.value)
    assert counting.sent == 1  # .invalid never resolves (RFC 6761): no retry
    assert_nothing_left(tmp_path / "x")


# -- resuming --------------------------------------------------------------------------------


# A server that honours Range answers 206 from where the download stopped; one that ignores it
# sends the whole file again (200), and the download starts over.
RANGE_SERVERS = pytest.mark.parametrize(
    ("honours_range", "status"), [(True, 206), (False, 200)], ids=["range", "no-range"]
)


@RANGE_SERVERS
def test_cut_body_is_resumed_where_the_server_takes_a_range(
    http_server: HttpServer,
    session: requests.Session,
    tmp_path: Path,
    honours_range: bool,
    status: int,
) -> None:
    http_server.cut_first("/ort.zip", DATA, after=100_000, ranges=honours_range)
    dest = tmp_path / "ort.zip"
    result = fetch(http_server, session, dest)
    assert (result.sha256, result.attempts, result.resumed) == (SHA256, 2, honours_range)
    assert ranges(http_server) == [(None, 200), ("bytes=100000-", status)]
    assert dest.read_bytes() == DATA


@RANGE_SERVERS
def test_leftover_part_is_resumed_where_the_server_takes_a_range(
    http_server: HttpServer,
    session: requests.Session,
    tmp_path: Path,
    honours_range: bool,
    status: int,
) -> None:
    http_server.serve_bytes("/ort.zip", DATA, ranges=honours_range)
    dest = tmp_path / "ort.zip"
    # The true first bytes to resume from; wrong ones where it starts over: they must not
    # survive the restart (all three pins checked).
    leftover = DATA[:123_456] if honours_range else b"x" * 50_000
    part_of(dest).write_bytes(leftover)
    result = fetch(http_server, session, dest, Pins(SHA256, SHA512, len(DATA)))
    assert (result.sha256, result.attempts, result.resumed) == (SHA256, 1, honours_range)
    assert ranges(http_server) == [(f"bytes={len(leftover)}-", status)]
    assert dest.read_bytes() == DATA
    assert not part_of(dest).exists()


def test_complete_leftover_part_gets_416_and_starts_over(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    dest = tmp_path / "ort.zip"
    part_of(dest).write_bytes(DATA)
    result = fetch(http_server, session, dest)
    assert (result.sha256, result.attempts, result.resumed) == (SHA256, 2, False)
    assert ranges(http_server) == [(f"bytes={len(DATA)}-", 416), (None, 200)]
    assert dest.read_bytes() == DATA


def test_corrupt_leftover_part_is_discarded_then_next_call_succeeds(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    dest = tmp_path / "ort.zip"
    part_of(dest).write_bytes(b"\0" * 1000)
    with pytest.raises(IntegrityError, match="run again to fetch it from scratch"):
        fetch(http_server, session, dest)
    assert_nothing_left(dest)
    assert fetch(http_server, session, dest).resumed is False
    assert dest.read_bytes() == DATA
    assert ranges(http_server) == [("bytes=1000-", 206), (None, 200)]


# -- stalls ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sent_before_stall", [0, 1000])
def test_stalled_server_fails_with_timeout(
    http_server: HttpServer, session: requests.Session, tmp_path: Path, sent_before_stall: int
) -> None:
    http_server.stall("/ort.zip", DATA, after=sent_before_stall, seconds=5.0)
    dest = tmp_path / "ort.zip"
    # Bytes read into an unfinished chunk are lost when the read times out: small chunks.
    policy = DownloadPolicy(
        allow_http=True, read_timeout=0.5, retries=1, backoff=0.01, chunk_size=500
    )
    started = time.monotonic()
    with pytest.raises(FetchError) as caught:
        fetch(http_server, session, dest, policy=policy)
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert "failed after 2 attempts: the server stopped sending data for 0.5 s" in message
    # two attempts of a 0.5 s read timeout; under 5 s, the stall's length: the timeout cut
    # it (not a time limit on the machine: a loaded one takes longer, never 5 s more)
    assert 0.9 < elapsed < 5.0
    resume = f"bytes={sent_before_stall}-" if sent_before_stall else None
    assert ranges(http_server) == [(None, 200), (resume, 206 if resume else 200)]
    assert not dest.exists()
    if sent_before_stall:  # a network failure keeps the partial file for the next call
        kept = 2 * sent_before_stall  # each attempt got `sent_before_stall` more bytes
        assert part_of(dest).read_bytes() == DATA[:kept]
        assert f"{kept} bytes kept in {part_of(dest)} and resumed next time" in message
    else:
        assert not part_of(dest).exists()


# -- URL policy ------------------------------------------------------------------------------


def test_plain_http_is_refused_unless_allowed(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    dest = tmp_path / "ort.zip"
    with pytest.raises(FetchError) as caught:
        fetch(http_server, session, dest, policy=DownloadPolicy())
    assert f"refusing plain HTTP URL ({http_server.url('/ort.zip')})" in str(caught.value)
    assert "--allow-http" in str(caught.value)
    assert http_server.requests == []
    assert_nothing_left(dest)


@pytest.mark.parametrize("url", ["ftp://example.org/x.zip", "file:///etc/passwd", "x.zip"])
def test_other_schemes_are_refused(url: str, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match="unsupported URL scheme"):
        download(url, tmp_path / "x.zip", PINS, FAST)
    assert_nothing_left(tmp_path / "x.zip")


def test_redirect_to_plain_http_is_refused() -> None:
    with pytest.raises(FetchError) as caught:
        check_scheme("http://evil/x", DownloadPolicy(), redirected_from="https://good/x")
    assert "https://good/x redirected to http://evil/x" in str(caught.value)
    check_scheme("http://mirror/x", FAST, redirected_from="https://good/x")  # allowed mirror


# -- progress and defaults -------------------------------------------------------------------


def test_progress_sees_increasing_counts_ending_at_the_size(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    http_server.serve_bytes("/ort.zip", DATA)
    calls: list[tuple[int, int | None]] = []
    download(
        http_server.url("/ort.zip"),
        tmp_path / "ort.zip",
        PINS,
        FAST,
        progress=lambda done, total: calls.append((done, total)),
        session=session,
    )
    counts = [done for done, _ in calls]
    assert len(calls) >= len(DATA) // FAST.chunk_size
    assert counts == sorted(set(counts))  # strictly increasing
    assert calls[-1] == (len(DATA), len(DATA))
    assert {total for _, total in calls} == {len(DATA)}


def test_without_a_session_argument(
    http_server: HttpServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    http_server.serve_bytes("/ort.zip", DATA)
    result = download(http_server.url("/ort.zip"), tmp_path / "ort.zip", PINS, FAST)
    assert (result.sha256, result.attempts) == (SHA256, 1)


def test_mirror_folder_serves_files_by_name(
    http_server: HttpServer, session: requests.Session, tmp_path: Path
) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "ort.zip").write_bytes(DATA)
    (tmp_path / "secret.txt").write_text("outside the mirror")
    http_server.serve_directory("/mirror/", mirror)
    dest = tmp_path / "out" / "ort.zip"
    result = download(http_server.url("/mirror/ort.zip"), dest, PINS, FAST, session=session)
    assert (result.sha256, dest.read_bytes()) == (SHA256, DATA)
    for missing in ("/mirror/absent.zip", "/mirror/..%2Fsecret.txt"):
        with pytest.raises(FetchError, match="HTTP 404"):
            download(http_server.url(missing), tmp_path / "x", PINS, FAST, session=session)
    assert [entry.status for entry in http_server.requests] == [200, 404, 404]


def test_a_commands_policy_takes_its_limits_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The policy reads nothing itself (issue 39): the command builds it from the variables,
    read once (bundler.cli.groups.download_policy, bundler.config.settings.http_limits)."""
    from bundler.cli.groups import download_policy

    for name in ("BUNDLE_HTTP_TIMEOUT", "BUNDLE_HTTP_RETRIES", "BUNDLE_HTTP_BACKOFF"):
        monkeypatch.delenv(name, raising=False)
    unset = download_policy(False)
    assert unset == DownloadPolicy()
    # docs/building.md's defaults: 30 s without a byte (connect: 10), 3 retries, 1 s backoff
    assert (unset.connect_timeout, unset.read_timeout, unset.retries, unset.backoff) == (
        10.0, 30.0, 3, 1.0
    )  # fmt: skip
    monkeypatch.setenv("BUNDLE_HTTP_TIMEOUT", "7")
    monkeypatch.setenv("BUNDLE_HTTP_RETRIES", "0")
    monkeypatch.setenv("BUNDLE_HTTP_BACKOFF", "0.5")
    policy = download_policy(True)
    assert policy.allow_http
    assert (policy.connect_timeout, policy.read_timeout, policy.retries, policy.backoff) == (
        7.0, 7.0, 0, 0.5
    )  # fmt: skip
    monkeypatch.setenv("BUNDLE_HTTP_BACKOFF", "soon")
    with pytest.raises(ConfigError) as refused:
        download_policy(False)
    assert refused.value.message == (
        "$BUNDLE_HTTP_BACKOFF='soon' is not a number of seconds; set it to e.g. 60, or unset it "
        "for the default."
    )
