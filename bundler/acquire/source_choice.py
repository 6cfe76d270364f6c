"""Decide layer: which of an artifact's sources a command may use, what their pins name (the
archive's file name, its size, its pinned location), and what to say when none of them gave
the artifact. Pure: the act modules that fetch (bundler.acquire.artifacts, .fetch) ask these.

`--source` allows every kind (auto) or one; a command that needs ORT's C/C++ SDK takes an
artifact that has SDK sources (the release zip) from those only, so its DLLs, headers and
import libraries come from one build."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bundler.errors import BundleError, FetchError, IntegrityError, SdkMissingError
from bundler.target.profiles import Artifact, PipSource, Profile, Source, UrlSource, has_sdk


class SourceSkipped(Exception):
    """A source that cannot be used here; the reason goes into the report, then the next."""


@dataclass(frozen=True)
class SourceChoice:
    """The sources `--source` (`mode`) allows, the SDK rule applied when `sdk` is asked for."""

    mode: str = "auto"
    sdk: bool = False

    def sdk_only(self, artifact: Artifact) -> bool:
        return self.sdk and any(has_sdk(source) for source in artifact.sources)

    def allowed(self, artifact: Artifact) -> list[Source]:
        """The sources --source allows; for an SDK-needing command, only SDK sources of an
        artifact that has any (the DLLs must come from the same build as the headers)."""
        sdk_only = self.sdk_only(artifact)
        return [
            source
            for source in artifact.sources
            if self.mode in ("auto", source.kind) and (has_sdk(source) or not sdk_only)
        ]

    def not_allowed(self, source: Source) -> str:
        if self.mode not in ("auto", source.kind):
            return f"{source.kind}: not allowed by --source {self.mode}"
        return f"{source.kind}: has no C/C++ headers or import libraries"

    def failure(self, artifact: Artifact, skipped: Sequence[str]) -> BundleError:
        reasons = "; ".join(skipped) or "no source allowed"
        if any(reason.startswith("cache: ") for reason in skipped):
            # --verify removed a damaged copy and nothing could replace it: an integrity
            # failure (exit 9) that still says why no fresh copy came
            return IntegrityError(
                f"artifact {artifact.name} {artifact.version}: the cached copy was damaged "
                f"and no source could replace it ({reasons}). Check the disk, then run again "
                "with the network or a mirror to fetch it anew."
            )
        if not self.sdk_only(artifact):
            return FetchError(
                f"artifact {artifact.name} {artifact.version}: no source could provide it "
                f"({reasons}). Check the network or mirror, or pass --mirror DIR / --search DIR."
            )
        zips = [source for source in artifact.sources if has_sdk(source)]
        names = " or ".join(dict.fromkeys(archive_filename(source) for source in zips))
        hosts = " or ".join(dict.fromkeys(urlsplit(source.url).hostname or "" for source in zips))
        return SdkMissingError(
            f"artifact {artifact.name} {artifact.version}: the C/C++ headers and import "
            f"libraries are only in {names}, which no source provided ({reasons}). Pass "
            f"--mirror DIR with {names} in DIR, or allow a connection to {hosts}."
        )


def offline_failure(profile: Profile, cache_root: Path, missing: Sequence[Artifact]) -> FetchError:
    """--offline: every artifact the cache, the mirror folders and the local installs lack,
    named in one error."""
    names = ", ".join(
        f"{artifact.name} {artifact.version} ({' or '.join(archive_names(artifact))})"
        for artifact in missing
    )
    return FetchError(
        f"--offline: {len(missing)} of the {len(profile.artifacts)} artifacts of "
        f"{profile.name} are not in the cache {cache_root}, and no mirror folder "
        f"or local install has them: {names}; fetch them once with the network (bundle "
        f"fetch --profile {profile.name}, with the same --cache-dir), or pass --mirror "
        "DIR with these files in DIR."
    )


def pinned_location(source: UrlSource | PipSource) -> str:
    if isinstance(source, PipSource):
        return f"pip:{source.package}=={source.version}"
    return source.url


def archive_names(artifact: Artifact) -> list[str]:
    """The file names the artifact's archives have (a mirror folder holds them by name)."""
    names = [
        archive_filename(source)
        for source in artifact.sources
        if isinstance(source, UrlSource | PipSource)
    ]
    return list(dict.fromkeys(names)) or ["a local install"]


def archive_filename(source: UrlSource | PipSource) -> str:
    if isinstance(source, PipSource):
        return source.wheel
    return Path(urlsplit(source.url).path).name


def pinned_size(source: UrlSource | PipSource) -> int | None:
    return source.size if isinstance(source, UrlSource) else None
