"""Act layer: one pinned archive's bytes into the cache, from a mirror (a folder, looked up by
the archive's file name, or a URL) or from the network (its URL, or `pip download` of its
wheel), verified against the pins on the way. A source that cannot give them raises
SourceSkipped with the reason; a cache that cannot take them is an OutputError (another source
would not help)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bundler.acquire.cache import Cache
from bundler.acquire.download import DownloadPolicy, Pins, download
from bundler.acquire.source_choice import (
    SourceSkipped,
    archive_filename,
    pinned_location,
    pinned_size,
)
from bundler.acquire.sources import pip_download
from bundler.errors import FetchError
from bundler.progress_meter import ProgressFactory
from bundler.target.profiles import PipSource, UrlSource


@dataclass(frozen=True)
class Fetcher:
    """Transfers into `cache`: each returns the stored blob and the origin it came from."""

    cache: Cache
    mirrors: tuple[str, ...]
    offline: bool
    policy: DownloadPolicy
    progress: ProgressFactory

    def from_mirrors(self, source: UrlSource | PipSource) -> tuple[Path, str]:
        reasons = []
        for mirror in self.mirrors:
            try:
                return self._from_mirror(mirror, source)
            except SourceSkipped as reason:
                reasons.append(f"{mirror}: {reason}")
        raise SourceSkipped("; ".join(reasons))

    def from_network(self, source: UrlSource | PipSource) -> tuple[Path, str]:
        try:
            if isinstance(source, UrlSource):
                return self._download(source.url, source, archive_filename(source)), source.url
            return self._pip_download(source), pinned_location(source)
        except FetchError as error:
            raise SourceSkipped(str(error)) from None

    def _from_mirror(self, mirror: str, source: UrlSource | PipSource) -> tuple[Path, str]:
        """The archive from a mirror folder or URL, looked up by its file name."""
        name = archive_filename(source)
        if "://" not in mirror:
            candidate = Path(mirror) / name
            if not candidate.is_file():
                raise SourceSkipped(f"no {name} there")
            stored = self.cache.import_copy(candidate, source.sha256, name, str(candidate))
            return stored, str(candidate)
        if self.offline:
            raise SourceSkipped("a URL mirror is network, disabled by --offline")
        url = f"{mirror.rstrip('/')}/{name}"
        try:
            return self._download(url, source, name), url
        except FetchError as error:
            raise SourceSkipped(str(error)) from None

    def _download(self, url: str, source: UrlSource | PipSource, name: str) -> Path:
        sha512 = source.sha512 if isinstance(source, UrlSource) else None
        pins = Pins(sha256=source.sha256, sha512=sha512, size=pinned_size(source))
        dest = self.cache.tmp / source.sha256
        result = download(url, dest, pins, self.policy, self.progress(name, pins.size))
        return self.cache.add(result.path, source.sha256, name, url)

    def _pip_download(self, source: PipSource) -> Path:
        origin = pinned_location(source)
        report = self.progress(f"pip download {source.package}=={source.version}", None)
        if report:
            report(0, None)
        try:
            with tempfile.TemporaryDirectory(dir=self.cache.tmp) as folder:
                wheel = pip_download(source, Path(folder))
                size = wheel.stat().st_size
                if report:
                    report(size, size)
                return self.cache.import_own(wheel, source.sha256, source.wheel, origin)
        except OSError as exc:  # the cache's disk: another source would not help
            raise self.cache.write_error(exc) from exc
