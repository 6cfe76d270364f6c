"""Act layer: get every artifact of a profile as verified bytes, from the best allowed source.

Order for one artifact:
1. the cache, for any of the artifact's pins (no network at all);
2. every mirror (`--mirror`, a folder or a URL) for every allowed archive source: files are
   looked up by name and still verified against the pins;
3. the profile's sources in the order written (url, pip, dir), each as allowed by `--source`;
4. the `--search` folders, as a local install.
A hash or size mismatch stops everything: the pins are the contract, never "try the next".
`--offline` allows only the cache, mirror folders and local installs. Every skipped source is
reported with its reason. A command that needs ORT's C/C++ SDK (`AcquireOptions.sdk`) takes an
artifact that has SDK sources (the release zip) from those only: its DLLs, headers and import
libraries then come from one build, and a wheel without headers is never silently used.

Which sources are allowed and what a failure says: bundler.acquire.source_choice; the transfers
into the cache: bundler.acquire.fetch; the trees: bundler.acquire.trees.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bundler.acquire.acquired import Acquired
from bundler.acquire.cache import Cache
from bundler.acquire.download import DownloadPolicy
from bundler.acquire.fetch import Fetcher
from bundler.acquire.source_choice import (
    SourceChoice,
    SourceSkipped,
    archive_filename,
    offline_failure,
    pinned_size,
)
from bundler.acquire.sources import local_install
from bundler.acquire.trees import PendingArchive, unpack_archives
from bundler.config.environment import variable
from bundler.config.validate import SOURCE_MODES
from bundler.disk import files
from bundler.errors import FetchError
from bundler.progress_meter import ProgressFactory
from bundler.reporter import Reporter
from bundler.target.profiles import Artifact, DirSource, PipSource, Profile, Source, UrlSource


@dataclass(frozen=True)
class AcquireOptions:
    mode: str = "auto"
    mirrors: tuple[str, ...] = ()
    offline: bool = False
    verify: bool = False  # re-hash cache hits
    search: tuple[Path, ...] = ()  # extra local folders, tried as dir sources
    policy: DownloadPolicy = field(default_factory=DownloadPolicy)
    sdk: bool = False  # the C/C++ SDK is needed: an artifact with SDK sources uses only those


def acquire_profile(
    profile: Profile, cache: Cache, options: AcquireOptions, report: Reporter
) -> list[Acquired]:
    if options.mode not in SOURCE_MODES:
        raise FetchError(f"--source {options.mode}: use one of {', '.join(SOURCE_MODES)}.")
    cache.prepare()
    acquirer = Acquirer(profile, cache, options, report.progress)
    if options.verify:
        acquirer.verify_cached()
    return unpack_archives(acquirer.get_all(profile.artifacts), cache, report.progress)


Outcome = Acquired | PendingArchive  # a local install is ready; an archive is still to unpack


class Acquirer:
    """The source of each artifact, tried in the module docstring's order."""

    def __init__(
        self, profile: Profile, cache: Cache, options: AcquireOptions, progress: ProgressFactory
    ) -> None:
        self.profile = profile
        self.cache = cache
        self.options = options
        self.choice = SourceChoice(options.mode, options.sdk)
        self.fetcher = Fetcher(cache, options.mirrors, options.offline, options.policy, progress)
        self.verified: set[str] = set()  # blobs re-hashed by this run (--verify)
        self.damaged: dict[str, str] = {}  # blobs --verify found damaged and removed: why

    def verify_cached(self) -> None:
        """--verify: re-hash the blobs this run would take from the cache (cached_blobs), all
        files at once on their own threads (hashlib releases the GIL), so the pass costs about
        the largest file or the total over the cores, whichever is more, not the sum. A damaged
        blob is removed and fetched anew like a missing one (`get`); the report says so."""
        blobs = cached_blobs(self.profile, self.cache, self.choice)
        self.damaged = self.cache.verify(blobs)
        self.verified.update(sha256 for sha256, _ in blobs)

    def get_all(self, artifacts: Sequence[Artifact]) -> list[Outcome]:
        """Every artifact (`get`); with --offline, every one the cache, the mirror folders and
        the local installs lack is named in one error, not only the first."""
        if not self.options.offline:
            return [self.get(artifact) for artifact in artifacts]
        outcomes: list[Outcome] = []
        missing: list[Artifact] = []
        for artifact in artifacts:
            try:
                outcomes.append(self.get(artifact))
            except FetchError:
                missing.append(artifact)
        if missing:
            raise offline_failure(self.profile, self.cache.root, missing)
        return outcomes

    def get(self, artifact: Artifact) -> Outcome:
        """Cache, then every mirror for every allowed archive source, then the sources
        themselves in profile order (network or local install), then --search folders."""
        allowed = self.choice.allowed(artifact)
        hit = self._from_cache(artifact, allowed)
        if hit is not None:
            return hit
        skipped = self._skipped(artifact, allowed)
        for source in allowed if self.options.mirrors else []:
            if not isinstance(source, DirSource):
                try:
                    return self._fetch(artifact, source, self.fetcher.from_mirrors, skipped)
                except SourceSkipped as reason:
                    skipped.append(f"{source.kind} via --mirror: {reason}")
        for source in allowed:
            try:
                return self._from_source(artifact, source, skipped)
            except SourceSkipped as reason:
                skipped.append(f"{source.kind}: {reason}")
        if (
            self.options.search
            and self.options.mode in ("auto", "dir")
            and not self.choice.sdk_only(artifact)
        ):
            try:
                machine = self.profile.architecture
                return local_install(artifact, self.options.search, machine, tuple(skipped))
            except SourceSkipped as reason:
                skipped.append(f"--search: {reason}")
        raise self.choice.failure(artifact, skipped)

    def _skipped(self, artifact: Artifact, allowed: Sequence[Source]) -> list[str]:
        """Why the sources not tried were not: --source, the SDK rule, --verify's removals."""
        skipped = [
            self.choice.not_allowed(source) for source in artifact.sources if source not in allowed
        ]
        skipped += [
            f"cache: {self.damaged[source.sha256]}"
            for source in allowed
            if isinstance(source, UrlSource | PipSource) and source.sha256 in self.damaged
        ]
        return skipped

    def _from_cache(self, artifact: Artifact, allowed: Sequence[Source]) -> PendingArchive | None:
        for source in allowed:
            if isinstance(source, UrlSource | PipSource):
                verify = self.options.verify and source.sha256 not in self.verified
                blob = self.cache.lookup(source.sha256, pinned_size(source), verify)
                if blob is not None:
                    return PendingArchive(artifact, source, blob, "cache", True, ())
        return None

    def _from_source(self, artifact: Artifact, source: Source, skipped: list[str]) -> Outcome:
        if isinstance(source, DirSource):
            base = variable(source.env)
            if not base:
                raise SourceSkipped(f"${source.env} is not set")
            folder = Path(base) / source.subdir
            machine = self.profile.architecture
            return local_install(artifact, (folder,), machine, tuple(skipped), source)
        if self.options.offline:
            raise SourceSkipped("network disabled by --offline")
        return self._fetch(artifact, source, self.fetcher.from_network, skipped)

    def _fetch(
        self,
        artifact: Artifact,
        source: UrlSource | PipSource,
        transfer: Callable[[UrlSource | PipSource], tuple[Path, str]],
        skipped: list[str],
    ) -> PendingArchive:
        """One writer per archive across processes; a waiter finds the winner's copy."""
        with self.cache.lock(source.sha256, f"the download of {archive_filename(source)}"):
            blob = self.cache.lookup(source.sha256, pinned_size(source))
            if blob is not None:
                return PendingArchive(artifact, source, blob, "cache", True, tuple(skipped))
            blob, origin = transfer(source)
        return PendingArchive(artifact, source, blob, origin, False, tuple(skipped))


def cached_blobs(
    profile: Profile, cache: Cache, choice: SourceChoice
) -> list[tuple[str, int | None]]:
    """The blob (SHA-256, pinned size) each artifact would take from the cache: that of its
    first allowed archive source the cache holds."""
    blobs: list[tuple[str, int | None]] = []
    for artifact in profile.artifacts:
        for source in choice.allowed(artifact):
            if isinstance(source, UrlSource | PipSource) and cache.blob(source.sha256).is_file():
                blobs.append((source.sha256, pinned_size(source)))
                break
    return blobs


def export_archives(acquired: Sequence[Acquired], cache: Cache, target: Path) -> list[Path]:
    """Put every acquired archive into `target` under its own file name (a mirror folder for
    air-gapped agents). Hard links where possible; a same-named file is replaced atomically."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for item in acquired:
        if item.sha256 is None or item.filename is None:
            continue
        destination = target / item.filename
        temp = target / f".{item.filename}.tmp"
        temp.unlink(missing_ok=True)
        try:
            os.link(cache.blob(item.sha256), temp)
        except OSError:
            shutil.copyfile(cache.blob(item.sha256), temp)
        files.replace(temp, destination)
        written.append(destination)
    return written
