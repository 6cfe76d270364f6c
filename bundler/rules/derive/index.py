"""Act layer: the pins of a release, read from a package index's PEP 691 JSON API.

`GET <index>/<project>/` with `Accept: application/vnd.pypi.simple.v1+json` lists every file
of a project with its SHA-256 (and, from API version 1.1, its size). The index is the caller's:
the command resolves --index-url, else $PIP_INDEX_URL, else https://pypi.org/simple. The same
transport policy as downloads applies: https only (http only when allowed, for a trusted mirror
or a test server on 127.0.0.1), connect and read timeouts, retries on transient failures, never
on 4xx.

Which wheel: the one for the flavour's CPython and platform, preferring the most specific tag
(cp311-cp311, then cp311-abi3, then cp311-none, then py3-none). Yanked files are skipped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from bundler.acquire.download import DownloadPolicy, check_scheme
from bundler.errors import FetchError
from bundler.rules.derive.pins import WheelPin

if TYPE_CHECKING:
    from bundler.rules.derive.flavours import Flavour

PYPI_SIMPLE = "https://pypi.org/simple/"
PEP691 = "application/vnd.pypi.simple.v1+json"
PLATFORMS = {"x64": "win_amd64", "x86": "win32", "arm64": "win_arm64"}


def normalize(name: str) -> str:
    """PEP 503 project name normalisation (the index's URL path)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_wheel(
    package: str,
    version: str,
    python: str,
    architecture: str,
    index_url: str,
    policy: DownloadPolicy,
) -> WheelPin:
    """The pin of `package==version`'s wheel for CPython `python` ("3.11") on `architecture`."""
    page = f"{index_url.rstrip('/')}/{normalize(package)}/"
    files = _files(_get_json(page, policy), page)
    platform = PLATFORMS[architecture]
    ranked = []
    for item in files:
        name = str(item.get("filename", ""))
        rank = wheel_rank(name, package, version, python, platform)
        if rank is not None and not item.get("yanked"):
            ranked.append((rank, item))
    if not ranked:
        raise FetchError(
            f"{page}: no {platform} wheel of {package} {version} for CPython {python}; "
            "check the version (is it released? yanked?) and the index."
        )
    item = min(ranked, key=lambda pair: pair[0])[1]
    return _pin(package, version, item, page)


def released_versions(
    package: str, python: str, architecture: str, index_url: str, policy: DownloadPolicy
) -> list[str]:
    """Every final release of `package` (no pre-release, dev or local version) with a wheel
    for CPython `python` on `architecture` that is not yanked, oldest first."""
    page = f"{index_url.rstrip('/')}/{normalize(package)}/"
    platform = PLATFORMS[architecture]
    files = _files(_get_json(page, policy), page)
    return _final_releases(
        files, lambda name, version: wheel_rank(name, package, version, python, platform)
    )


def platform_releases(
    package: str, architecture: str, index_url: str, policy: DownloadPolicy
) -> list[str] | None:
    """Every final release of `package` with a wheel for `architecture`, for any Python, not
    yanked, oldest first; None when the index has no such project (HTTP 404): a package the
    catalogue only watches (an EP pack) need not be on a private mirror."""
    page = f"{index_url.rstrip('/')}/{normalize(package)}/"
    document = _get_json(page, policy, absent_ok=True)
    if document is None:
        return None
    platform = PLATFORMS[architecture]

    def fits(name: str, version: str) -> int | None:
        parts = name.removesuffix(".whl").split("-")
        right = name.endswith(".whl") and normalize(parts[0]) == normalize(package)
        return 0 if right and platform in parts[-1].split(".") else None

    return _final_releases(_files(document, page), fits)


def _final_releases(
    files: list[dict[str, Any]], rank: Callable[[str, str], int | None]
) -> list[str]:
    """The final releases (no pre-release, dev or local version) of the files that are not
    yanked and that `rank` (file name, version) accepts, oldest first."""
    found: set[str] = set()
    for item in files:
        name = str(item.get("filename", ""))
        parts = name.split("-")
        if len(parts) < 5 or item.get("yanked") or not re.fullmatch(r"\d+(\.\d+)*", parts[1]):
            continue
        if rank(name, parts[1]) is not None:
            found.add(parts[1])
    return sorted(found, key=version_key)


def latest_release(flavour: Flavour, index_url: str, policy: DownloadPolicy) -> str:
    """`--ort latest`: the newest final release of the flavour's ORT package."""
    versions = released_versions(
        flavour.ort.package, flavour.python, flavour.architecture, index_url, policy
    )
    if not versions:
        page = f"{index_url.rstrip('/')}/{normalize(flavour.ort.package)}/"
        raise FetchError(f"{page}: no release of {flavour.ort.package} has a fitting wheel.")
    return versions[-1]


def newest_build(flavour: Flavour, release: str, index_url: str, policy: DownloadPolicy) -> str:
    """`--ort 1.30.0` of a flavour whose versions carry a build stamp: the newest build of that
    release (1.30.0.202609102321); `==1.30.0` itself matches nothing on the index."""
    versions = released_versions(
        flavour.ort.package, flavour.python, flavour.architecture, index_url, policy
    )
    builds = [version for version in versions if flavour.release(version) == release]
    if not builds:
        page = f"{index_url.rstrip('/')}/{normalize(flavour.ort.package)}/"
        known = ", ".join(versions[-3:]) or "none"
        raise FetchError(
            f"{page}: {flavour.ort.package} has no build of ORT {release} with a fitting wheel "
            f"(newest: {known}); give --ort with a release it has."
        )
    return builds[-1]


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def newest_per_minor(versions: list[str], since: tuple[int, int] = (1, 19)) -> list[str]:
    """The newest patch of every minor release from `since` on, oldest minor first."""
    newest: dict[tuple[int, ...], str] = {}
    for version in sorted(versions, key=version_key):
        minor = version_key(version)[:2]
        if minor >= since:
            newest[minor] = version
    return [newest[minor] for minor in sorted(newest)]


def wheel_rank(name: str, package: str, version: str, python: str, platform: str) -> int | None:
    """0 for the best tag, larger for worse ones, None for a file that does not fit (PEP 427
    file name: name-version(-build)?-python-abi-platform.whl, tags may be dotted sets)."""
    if not name.endswith(".whl"):
        return None
    parts = name[: -len(".whl")].split("-")
    if len(parts) not in (5, 6) or normalize(parts[0]) != normalize(package):
        return None
    if parts[1] != version or platform not in parts[-1].split("."):
        return None
    cp = "cp" + python.replace(".", "")
    wanted = [(cp, cp), (cp, "abi3"), (cp, "none"), ("py" + python.replace(".", ""), "none")]
    wanted += [("py3", "none")]
    pythons, abis = parts[-3].split("."), parts[-2].split(".")
    for rank, (tag, abi) in enumerate(wanted):
        if tag in pythons and abi in abis:
            return rank
    return None


def _pin(package: str, version: str, item: dict[str, Any], page: str) -> WheelPin:
    hashes = item.get("hashes")
    sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
    if not isinstance(sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise FetchError(f"{page}: {item.get('filename')} has no SHA-256 in the index.")
    size = item.get("size")
    return WheelPin(
        package=package,
        version=version,
        wheel=str(item["filename"]),
        sha256=sha256,
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        url=urljoin(page, str(item.get("url", ""))),
        page=page,
    )


def _files(document: Any, page: str) -> list[dict[str, Any]]:
    meta = document.get("meta") if isinstance(document, dict) else None
    api = meta.get("api-version", "") if isinstance(meta, dict) else ""
    files = document.get("files") if isinstance(document, dict) else None
    if not str(api).startswith("1.") or not isinstance(files, list):
        raise FetchError(
            f"{page}: not a PEP 691 project page (api-version {api or 'missing'}); use an "
            "index that serves application/vnd.pypi.simple.v1+json."
        )
    return [item for item in files if isinstance(item, dict)]


def _get_json(url: str, policy: DownloadPolicy, absent_ok: bool = False) -> Any:
    """One JSON document, retried on connection errors and 5xx like a download; None for a
    404 when `absent_ok`."""
    import requests

    check_scheme(url, policy)
    timeout = (policy.connect_timeout, policy.read_timeout)
    reason = ""
    for attempt in range(policy.retries + 1):
        if attempt:
            time.sleep(policy.backoff * 2 ** (attempt - 1))
        try:
            response = requests.get(url, headers={"Accept": PEP691}, timeout=timeout)
        except requests.exceptions.RequestException as exc:
            reason = f"no response ({type(exc).__name__})"
            continue
        with response:
            for hop in [*response.history, response]:
                check_scheme(hop.url, policy, redirected_from=url)
            if response.status_code >= 500:
                reason = f"HTTP {response.status_code}"
                continue
            if response.status_code == 404 and absent_ok:
                return None
            if response.status_code != 200:
                raise FetchError(
                    f"{url}: HTTP {response.status_code}; check the package name and the index "
                    "(--index-url or PIP_INDEX_URL)."
                )
            try:
                return response.json()
            except ValueError:
                raise FetchError(f"{url}: the index did not answer with JSON.") from None
    raise FetchError(f"{url}: {reason} after {policy.retries + 1} attempts; try again later.")
