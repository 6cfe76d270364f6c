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
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bundler import files
from bundler.acquire.cache import Cache
from bundler.acquire.download import DownloadPolicy, Pins, ProgressCallback, download
from bundler.acquire.extract import Extracted, Request, extract_all, is_extracted
from bundler.acquire.sources import _DISK_FULL, check_local_folder, pip_download
from bundler.errors import BundleError, FetchError, IntegrityError, SdkMissingError
from bundler.profiles import (
    Artifact,
    DirSource,
    PipSource,
    Profile,
    Source,
    UrlSource,
    has_sdk,
    matches,
)
from bundler.validate import SOURCE_MODES

ProgressFactory = Callable[[str, int | None], ProgressCallback | None]


@dataclass(frozen=True)
class AcquireOptions:
    mode: str = "auto"
    mirrors: tuple[str, ...] = ()
    offline: bool = False
    verify: bool = False  # re-hash cache hits
    search: tuple[Path, ...] = ()  # extra local folders, tried as dir sources
    policy: DownloadPolicy = field(default_factory=DownloadPolicy)
    sdk: bool = False  # the C/C++ SDK is needed: an artifact with SDK sources uses only those


@dataclass(frozen=True)
class Acquired:
    """One artifact, ready: its DLL folders and where the bytes came from."""

    artifact: str
    version: str
    source: str  # "url" | "pip" | "dir"
    origin: str  # what this run used: the URL, a mirror file, "pip:pkg==ver", "cache", a folder
    pinned: str  # the pinned source the bytes are: its URL or "pip:pkg==ver" (or the folder)
    filename: str | None  # the archive's file name (None for a local folder)
    sha256: str | None
    size: int | None
    cached: bool  # True when nothing was transferred by this run
    folder: Path  # extracted tree or local folder
    dll_folders: tuple[Path, ...]
    skipped: tuple[str, ...] = ()  # why earlier sources were not used
    sdk: bool = False  # the tree holds the C/C++ SDK members its archive has (headers, .lib)


class SourceSkipped(Exception):
    """A source that cannot be used here; the reason goes into the report, then the next."""


def acquire_profile(
    profile: Profile, cache: Cache, options: AcquireOptions, progress: ProgressFactory
) -> list[Acquired]:
    if options.mode not in SOURCE_MODES:
        raise FetchError(f"--source {options.mode}: use one of {', '.join(SOURCE_MODES)}.")
    cache.prepare()
    acquirer = Acquirer(profile, cache, options, progress)
    if options.verify:
        acquirer.verify_cached()
    return acquirer.unpack(acquirer.get_all(profile.artifacts))


@dataclass(frozen=True)
class _Archive:
    """A verified archive in the cache whose tree is still to be extracted (or reused)."""

    artifact: Artifact
    source: UrlSource | PipSource
    blob: Path
    origin: str
    cached: bool
    skipped: tuple[str, ...]


class Acquirer:
    def __init__(
        self, profile: Profile, cache: Cache, options: AcquireOptions, progress: ProgressFactory
    ) -> None:
        self.profile = profile
        self.cache = cache
        self.options = options
        self.progress = progress
        self.verified: set[str] = set()  # blobs re-hashed by this run (--verify)
        self.damaged: dict[str, str] = {}  # blobs --verify found damaged and removed: why

    def verify_cached(self) -> None:
        """--verify: re-hash the blob each artifact would take from the cache, all files at
        once on their own threads (hashlib releases the GIL), so the pass costs about the
        largest file or the total over the cores, whichever is more, not the sum. A damaged
        blob is removed and fetched anew like a missing one (`get`); the report says so."""
        blobs: list[tuple[str, int | None]] = []
        for artifact in self.profile.artifacts:
            for source in self._allowed(artifact):
                if (
                    isinstance(source, UrlSource | PipSource)
                    and self.cache.blob(source.sha256).is_file()
                ):
                    blobs.append((source.sha256, _size(source)))
                    break
        self.damaged = self.cache.verify(blobs)
        self.verified.update(sha256 for sha256, _ in blobs)

    def unpack(self, outcomes: Sequence[Acquired | _Archive]) -> list[Acquired]:
        """Extract (or reuse) the trees of all archives at once: one pool of threads inflates
        the members of every archive, largest first."""
        archives = [item for item in outcomes if isinstance(item, _Archive)]
        requests = [
            Request(item.blob, item.source.sha256, item.artifact.licenses, has_sdk(item.source))
            for item in archives
        ]
        root = self.cache.extract_root
        fresh = [
            _filename(item.source)
            for item, request in zip(archives, requests, strict=True)
            if not is_extracted(root, request.sha256, request.licence_names, sdk=request.sdk)
        ]
        what = fresh[0] if len(fresh) == 1 else f"{len(fresh)} archives"
        report = self.progress(f"extracting {what}", None) if fresh else None
        with ExitStack() as held:
            # One extraction per archive across processes: several builds on one cache would
            # otherwise each inflate the same archive, the losers' trees thrown away. Locks
            # in sorted order (no deadlock); extract_all looks again for a complete tree
            # once they are held, so a waiter reuses the winner's.
            if fresh:
                names = {item.source.sha256: _filename(item.source) for item in archives}
                for sha256, name in sorted(names.items()):
                    held.enter_context(self.cache.lock(sha256, f"the extraction of {name}"))
            try:
                trees = iter(extract_all(requests, root, progress=report))
            except OSError as exc:  # the partial trees are gone already (extract.py)
                if exc.errno not in _CANNOT_WRITE:
                    raise
                raise self.cache.write_error(exc) from exc
        return [
            self._acquired(item, next(trees)) if isinstance(item, _Archive) else item
            for item in outcomes
        ]

    def get_all(self, artifacts: Sequence[Artifact]) -> list[Acquired | _Archive]:
        """Every artifact (`get`); with --offline, every one the cache, the mirror folders and
        the local installs lack is named in one error, not only the first."""
        if not self.options.offline:
            return [self.get(artifact) for artifact in artifacts]
        outcomes: list[Acquired | _Archive] = []
        missing: list[Artifact] = []
        for artifact in artifacts:
            try:
                outcomes.append(self.get(artifact))
            except FetchError:
                missing.append(artifact)
        if missing:
            raise self._offline_failure(missing)
        return outcomes

    def _offline_failure(self, missing: Sequence[Artifact]) -> FetchError:
        names = ", ".join(
            f"{artifact.name} {artifact.version} ({' or '.join(_archive_names(artifact))})"
            for artifact in missing
        )
        return FetchError(
            f"--offline: {len(missing)} of the {len(self.profile.artifacts)} artifacts of "
            f"{self.profile.name} are not in the cache {self.cache.root}, and no mirror folder "
            f"or local install has them: {names}; fetch them once with the network (bundle "
            f"fetch --profile {self.profile.name}, with the same --cache-dir), or pass --mirror "
            "DIR with these files in DIR."
        )

    def get(self, artifact: Artifact) -> Acquired | _Archive:
        """Cache, then every mirror for every allowed archive source, then the sources
        themselves in profile order (network or local install), then --search folders."""
        allowed = self._allowed(artifact)
        hit = self._from_cache(artifact, allowed)
        if hit is not None:
            return hit
        skipped = [
            self._not_allowed(source) for source in artifact.sources if source not in allowed
        ]
        skipped += [
            f"cache: {self.damaged[source.sha256]}"
            for source in allowed
            if isinstance(source, UrlSource | PipSource) and source.sha256 in self.damaged
        ]
        for source in allowed if self.options.mirrors else []:
            if not isinstance(source, DirSource):
                try:
                    return self._fetch(artifact, source, self._from_mirrors, skipped)
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
            and not self._sdk_only(artifact)
        ):
            try:
                return self._from_folders(artifact, self.options.search, tuple(skipped))
            except SourceSkipped as reason:
                skipped.append(f"--search: {reason}")
        raise self._failure(artifact, skipped)

    def _sdk_only(self, artifact: Artifact) -> bool:
        return self.options.sdk and any(has_sdk(source) for source in artifact.sources)

    def _allowed(self, artifact: Artifact) -> list[Source]:
        """The sources --source allows; for an SDK-needing command, only SDK sources of an
        artifact that has any (the DLLs must come from the same build as the headers)."""
        sdk_only = self._sdk_only(artifact)
        return [
            source
            for source in artifact.sources
            if self.options.mode in ("auto", source.kind) and (has_sdk(source) or not sdk_only)
        ]

    def _not_allowed(self, source: Source) -> str:
        if self.options.mode not in ("auto", source.kind):
            return f"{source.kind}: not allowed by --source {self.options.mode}"
        return f"{source.kind}: has no C/C++ headers or import libraries"

    def _failure(self, artifact: Artifact, skipped: list[str]) -> BundleError:
        reasons = "; ".join(skipped) or "no source allowed"
        if any(reason.startswith("cache: ") for reason in skipped):
            # --verify removed a damaged copy and nothing could replace it: an integrity
            # failure (exit 9) that still says why no fresh copy came
            return IntegrityError(
                f"artifact {artifact.name} {artifact.version}: the cached copy was damaged "
                f"and no source could replace it ({reasons}). Check the disk, then run again "
                "with the network or a mirror to fetch it anew."
            )
        if not self._sdk_only(artifact):
            return FetchError(
                f"artifact {artifact.name} {artifact.version}: no source could provide it "
                f"({reasons}). Check the network or mirror, or pass --mirror DIR / --search DIR."
            )
        zips = [source for source in artifact.sources if has_sdk(source)]
        names = " or ".join(dict.fromkeys(_filename(source) for source in zips))
        hosts = " or ".join(dict.fromkeys(urlsplit(source.url).hostname or "" for source in zips))
        return SdkMissingError(
            f"artifact {artifact.name} {artifact.version}: the C/C++ headers and import "
            f"libraries are only in {names}, which no source provided ({reasons}). Pass "
            f"--mirror DIR with {names} in DIR, or allow a connection to {hosts}."
        )

    def _from_cache(self, artifact: Artifact, allowed: Sequence[Source]) -> _Archive | None:
        for source in allowed:
            if isinstance(source, UrlSource | PipSource):
                verify = self.options.verify and source.sha256 not in self.verified
                blob = self.cache.lookup(source.sha256, _size(source), verify)
                if blob is not None:
                    return _Archive(artifact, source, blob, "cache", True, ())
        return None

    def _from_source(
        self, artifact: Artifact, source: Source, skipped: list[str]
    ) -> Acquired | _Archive:
        if isinstance(source, DirSource):
            base = os.environ.get(source.env)
            if not base:
                raise SourceSkipped(f"${source.env} is not set")
            folder = Path(base) / source.subdir
            return self._from_folders(artifact, (folder,), tuple(skipped), source)
        if self.options.offline:
            raise SourceSkipped("network disabled by --offline")
        return self._fetch(artifact, source, self._from_network, skipped)

    def _fetch(
        self,
        artifact: Artifact,
        source: UrlSource | PipSource,
        transfer: Callable[[UrlSource | PipSource], tuple[Path, str]],
        skipped: list[str],
    ) -> _Archive:
        """One writer per archive across processes; a waiter finds the winner's copy."""
        with self.cache.lock(source.sha256, f"the download of {_filename(source)}"):
            blob = self.cache.lookup(source.sha256, _size(source))
            if blob is not None:
                return _Archive(artifact, source, blob, "cache", True, tuple(skipped))
            blob, origin = transfer(source)
        return _Archive(artifact, source, blob, origin, False, tuple(skipped))

    def _from_mirrors(self, source: UrlSource | PipSource) -> tuple[Path, str]:
        reasons = []
        for mirror in self.options.mirrors:
            try:
                return self._from_mirror(mirror, source)
            except SourceSkipped as reason:
                reasons.append(f"{mirror}: {reason}")
        raise SourceSkipped("; ".join(reasons))

    def _from_network(self, source: UrlSource | PipSource) -> tuple[Path, str]:
        try:
            if isinstance(source, UrlSource):
                return self._download(source.url, source, _filename(source)), source.url
            return self._pip_download(source), pinned_location(source)
        except FetchError as error:
            raise SourceSkipped(str(error)) from None

    def _from_mirror(self, mirror: str, source: UrlSource | PipSource) -> tuple[Path, str]:
        """The archive from a mirror folder or URL, looked up by its file name."""
        name = _filename(source)
        if "://" not in mirror:
            candidate = Path(mirror) / name
            if not candidate.is_file():
                raise SourceSkipped(f"no {name} there")
            stored = self.cache.import_copy(candidate, source.sha256, name, str(candidate))
            return stored, str(candidate)
        if self.options.offline:
            raise SourceSkipped("a URL mirror is network, disabled by --offline")
        url = f"{mirror.rstrip('/')}/{name}"
        try:
            return self._download(url, source, name), url
        except FetchError as error:
            raise SourceSkipped(str(error)) from None

    def _download(self, url: str, source: UrlSource | PipSource, name: str) -> Path:
        sha512 = source.sha512 if isinstance(source, UrlSource) else None
        pins = Pins(sha256=source.sha256, sha512=sha512, size=_size(source))
        dest = self.cache.tmp / source.sha256
        result = download(url, dest, pins, self.options.policy, self.progress(name, pins.size))
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
                return self.cache.import_copy(wheel, source.sha256, source.wheel, origin)
        except OSError as exc:  # the cache's disk: another source would not help
            raise self.cache.write_error(exc) from exc

    def _from_folders(
        self,
        artifact: Artifact,
        folders: Sequence[Path],
        skipped: tuple[str, ...],
        source: DirSource | None = None,
    ) -> Acquired:
        """A local install: accepted by name, machine type and file-version range."""
        ranges = source or next((s for s in artifact.sources if isinstance(s, DirSource)), None)
        reasons = []
        for folder in folders:
            problem = check_local_folder(folder, artifact, ranges, self.profile.architecture)
            if problem is None:
                return Acquired(
                    artifact.name, artifact.version, "dir", str(folder), str(folder), None, None,
                    None, True, folder, (folder,), skipped,
                )  # fmt: skip
            reasons.append(problem)
        raise SourceSkipped("; ".join(reasons))

    def _acquired(self, item: _Archive, tree: Extracted) -> Acquired:
        source, artifact = item.source, item.artifact
        return Acquired(
            artifact=artifact.name,
            version=artifact.version,
            source=source.kind,
            origin=item.origin,
            pinned=pinned_location(source),
            filename=_filename(source),
            sha256=source.sha256,
            size=item.blob.stat().st_size,
            cached=item.cached,
            folder=tree.root,
            dll_folders=dll_folders(tree.root, artifact),
            skipped=item.skipped,
            sdk=has_sdk(source),
        )


# An extraction failing with one of these could not write into the cache
_CANNOT_WRITE = {*_DISK_FULL, errno.EROFS, errno.EACCES, errno.EPERM}


def dll_folders(root: Path, artifact: Artifact) -> tuple[Path, ...]:
    """Folders of the extracted tree holding the artifact's DLLs (archives differ: lib/, bin/,
    onnxruntime/capi/, a wheel's .data/data/Scripts/), found by scanning, never hard-coded.
    os.walk, not Path.rglob: this runs on every build, and a Path per file costs more."""
    folders: dict[Path, int] = {}
    for folder, _, names in os.walk(root):
        found = sum(1 for name in names if any(matches(want, name) for want in artifact.provides))
        if found:
            folders[Path(folder)] = found
    return tuple(sorted(folders, key=lambda folder: (-folders[folder], str(folder))))


def dll_search_path(acquired: Sequence[Acquired]) -> list[Path]:
    """The acquired artifacts' DLL folders, in profile order: what the resolver searches."""
    return [folder for item in acquired for folder in item.dll_folders]


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


def pinned_location(source: UrlSource | PipSource) -> str:
    if isinstance(source, PipSource):
        return f"pip:{source.package}=={source.version}"
    return source.url


def _archive_names(artifact: Artifact) -> list[str]:
    """The file names the artifact's archives have (a mirror folder holds them by name)."""
    names = [
        _filename(source)
        for source in artifact.sources
        if isinstance(source, UrlSource | PipSource)
    ]
    return list(dict.fromkeys(names)) or ["a local install"]


def _filename(source: UrlSource | PipSource) -> str:
    if isinstance(source, PipSource):
        return source.wheel
    return Path(urlsplit(source.url).path).name


def _size(source: UrlSource | PipSource) -> int | None:
    return source.size if isinstance(source, UrlSource) else None
