"""Decide layer: the names of the shipped profiles (ort-RELEASE-FLAVOUR): the release and
flavour a name means, what `latest` means, and, for a name or release that is not shipped, the
few that come closest. A typo is answered with a suggestion and the handful of names that
matter, never with all of them (`bundle profiles` lists those)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

LATEST = "latest"  # --ort latest, --profile latest: the newest shipped GPU profile
RELEASE = re.compile(r"\d+\.\d+\.\d+")
SHOWN = 4  # at most this many names or releases in a message
LIST_ALL = "bundle profiles lists all"
_NAME = re.compile(r"(?:ort-?)?(?P<release>\d+(?:\.\d+)*)?-?(?P<flavour>[a-z].*)?")
_GPU = re.compile(r"gpu-cuda\d+")


def version_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".") if part.isdigit())


@dataclass(frozen=True)
class Shipped:
    """The shipped profile names, as bundler.target.profiles.available_profiles() gives them."""

    names: tuple[str, ...]

    def releases(self, gpu: bool = False) -> list[str]:
        """The shipped releases (with a GPU profile only, with `gpu`), oldest first."""
        found = {
            release_of(name)
            for name in self.names
            if release_of(name) and (not gpu or _GPU.fullmatch(flavour_of(name)))
        }
        return sorted(found, key=version_key)

    def of_release(self, release: str) -> list[str]:
        return [name for name in self.names if release_of(name) == release]

    def gpu_profile(self, release: str) -> str | None:
        """The GPU profile of a release (ort-1.31.1-gpu-cuda13): what onnxruntime-gpu means."""
        found = [name for name in self.of_release(release) if _GPU.fullmatch(flavour_of(name))]
        return found[0] if len(found) == 1 else None

    def latest_gpu(self) -> str:
        """`latest`: the GPU profile of the newest release that has one."""
        for release in reversed(self.releases(gpu=True)):
            if (name := self.gpu_profile(release)) is not None:
                return name
        raise LookupError("no GPU profile is shipped")

    def closest_releases(self, release: str, gpu: bool = False) -> list[str]:
        """The shipped releases nearest to `release` by version number, nearest first."""
        wanted = _number(release)
        near = sorted(self.releases(gpu), key=lambda known: abs(_number(known) - wanted))
        return near[:SHOWN]

    def newest_of_flavour(self, flavour: str) -> list[str]:
        """The newest shipped profile of each flavour `flavour` means (a prefix, else close)."""
        flavours = sorted({flavour_of(name) for name in self.names} - {""})
        chosen = [known for known in flavours if known.startswith(flavour)]
        chosen = chosen or difflib.get_close_matches(flavour, flavours, 2, 0.6)
        newest = [
            max(
                (name for name in self.names if flavour_of(name) == known),
                key=lambda name: version_key(release_of(name)),
            )
            for known in chosen
        ]
        return sorted(newest, key=lambda name: version_key(release_of(name)), reverse=True)[:SHOWN]


def release_of(name: str) -> str:
    """The release a profile name names ("1.31.1" of ort-1.31.1-gpu-cuda13), else ""."""
    match = _NAME.fullmatch(name)
    return (match["release"] or "") if match else ""


def flavour_of(name: str) -> str:
    """The flavour a profile name names ("gpu-cuda13" of ort-1.31.1-gpu-cuda13), else ""."""
    match = _NAME.fullmatch(name)
    return (match["flavour"] or "") if match else ""


def _number(release: str) -> int:
    """A release as one number for distances: 1.31.1 -> 1_031_001."""
    parts = [*version_key(release), 0, 0, 0][:3]
    return parts[0] * 1_000_000 + parts[1] * 1_000 + parts[2]


def unknown_profile(name: str, shipped: Shipped) -> str:
    """The message for a profile name that is neither shipped nor a file: a guess, the names
    of the release it names (or of the closest releases), and where to find all."""
    guess, related = _guess(name, release_of(name), flavour_of(name), shipped)
    parts = [f"unknown profile '{name}'"]
    if guess:
        parts.append(f"; did you mean {guess}?")
    else:
        parts.append(".")
    parts.append(f" {related}" if related else "")
    parts.append(f" ({LIST_ALL}; a custom profile is given as the path of its .toml file.)")
    return "".join(parts)


def _guess(name: str, release: str, flavour: str, shipped: Shipped) -> tuple[str | None, str]:
    """(the closest shipped name, a sentence naming the few related ones)."""
    if release and shipped.of_release(release):
        names = shipped.of_release(release)
        return _within(name, release, flavour, shipped), (
            f"Shipped for ORT {release}: {', '.join(names[:SHOWN])}."
        )
    if release:
        near = shipped.closest_releases(release)
        guesses = (_within(name, known, flavour, shipped, strict=True) for known in near)
        guess = near[0] if name == release else next((g for g in guesses if g), None)
        return guess, (
            f"No profile is shipped for ORT {release}; the closest releases: {', '.join(near)}."
        )
    newest = shipped.newest_of_flavour(flavour) if flavour else []
    if newest:
        return newest[0], f"The newest of that flavour: {', '.join(newest)}."
    return _first(difflib.get_close_matches(name, shipped.names, 1, 0.6)), ""


def _within(
    name: str, release: str, flavour: str, shipped: Shipped, strict: bool = False
) -> str | None:
    """The profile of `release` that `flavour` means: one it starts (gpu: gpu-cuda13), else
    the closest by spelling (not with `strict`); no flavour: the release's GPU profile."""
    names = shipped.of_release(release)
    if not flavour:
        return shipped.gpu_profile(release) or (None if strict else names[0])
    starting = [known for known in names if flavour_of(known).startswith(flavour)]
    if starting or strict:
        return _first(starting)
    return _first(difflib.get_close_matches(name, names, 1, 0.0))


def _first(items: list[str]) -> str | None:
    return items[0] if items else None


def no_gpu_profile(release: str, shipped: Shipped) -> str:
    """The message for a release (--ort, --profile RELEASE) without a shipped GPU profile: the
    profiles shipped for it first, the closest releases with a GPU profile, and `profiles new`
    only as what it is: a derivation that works if the wheel exists on the index."""
    parts = [f"no shipped GPU profile for ORT {release}; "]
    same = shipped.of_release(release)
    if same:
        parts.append(f"shipped for {release}: {', '.join(same[:SHOWN])} (--profile {same[0]}); ")
    near = shipped.closest_releases(release, gpu=True)
    parts.append(f"the closest releases with a GPU profile: {', '.join(near)}.")
    oldest = shipped.releases()[0] if shipped.releases() else release
    if version_key(release) >= version_key(oldest):
        parts.append(
            f" If onnxruntime-gpu {release} is on PyPI (bundle profiles outdated asks), derive "
            f"a profile: bundle profiles new --ort {release} --out ort-{release}-gpu.toml."
        )
    else:
        parts.append(f" The shipped profiles start at ORT {oldest}.")
    parts.append(f" ({LIST_ALL}.)")
    return "".join(parts)
