"""Read layer of downloads: what a failed HTTP transfer means (DNS, timeout, refused, a cut
connection), and the one-line advice a user gets for it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a download starts: most commands never need the network
    pass


_DNS_FAILURES = ("name or service not known", "nodename nor servname", "getaddrinfo failed")


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a broken, refused or silent connection raises: requests wraps urllib3, which wraps
    the socket error. Malformed URLs and redirect loops are RequestExceptions too, but not these."""
    import requests
    import urllib3

    return (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        requests.exceptions.ChunkedEncodingError,
        urllib3.exceptions.HTTPError,
        OSError,
    )


def _advice(status: int) -> str:
    """What to do about a status that retrying will not fix."""
    if status in (404, 410):
        return "the file is not at this URL: check the URL, the pinned version and the mirror"
    if status in (401, 403):
        return "access denied: check the URL and the mirror's permissions"
    return "the server refused the request (not retried): check the URL or use a mirror"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """Every exception nested in `exc`: requests wraps urllib3 wraps the socket error, through
    args, `.reason` and `__cause__`/`__context__`, and classification needs the innermost."""
    todo, seen = [exc], set()
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        nested = [*current.args, getattr(current, "reason", None)]
        nested += [current.__cause__, current.__context__]
        todo.extend(item for item in nested if isinstance(item, BaseException))


def _is_dns_failure(exc: BaseException) -> bool:
    for item in _chain(exc):
        if isinstance(item, socket.gaierror):  # urllib3 2: inside NameResolutionError
            return True
        if any(text in str(item).lower() for text in _DNS_FAILURES):
            return True
    return False


def _is_read_timeout(exc: BaseException) -> bool:
    import requests
    import urllib3

    timeouts = (requests.exceptions.ReadTimeout, urllib3.exceptions.ReadTimeoutError)
    return any(isinstance(item, timeouts) for item in _chain(exc))


def _cause_text(exc: BaseException) -> str:
    """A short one-line cause: the socket's own words when there are some."""
    for item in _chain(exc):
        if isinstance(item, OSError) and item.strerror:
            return item.strerror
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
