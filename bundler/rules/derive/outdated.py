"""Act layer: `bundle profiles outdated`: the drift radar. Which ORT releases, and which CUDA /
cuDNN component releases, does the package index have that the shipped catalogue does not cover?

Act layer (reads the index's PEP 691 pages, nothing else). For every package of the catalogue
(onnxruntime-gpu, onnxruntime, onnxruntime-directml, onnxruntime-windowsml) the newest patch
of each minor release since 1.19 (onnxruntime-windowsml: since 1.25, its newest build) must have
its shipped profile (bundler.rules.derive.catalogue). A package that makes no more releases
(onnxruntime-directml, after 1.24.4) is said to be frozen, with the package that follows it.
For every GPU flavour, each component package is compared with the newest version its
component sets pin, within the same major (a cuDNN 10 or a CUDA 14 is another flavour's
business, not drift).

The EP packs (ORT's plugin execution providers, shipped as packages of their own) are listed with
their newest release for Windows, for information: no profile ships one yet, so they never make
the catalogue behind; an index that does not have one (a private mirror) lists it as absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bundler.acquire.download import DownloadPolicy
from bundler.eps.plugins import EpPack as PinnedPack
from bundler.eps.plugins import available_packs, load_pack
from bundler.rules.derive.catalogue import PACKAGES, since
from bundler.rules.derive.flavours import Flavour, available_flavours, load_flavour
from bundler.rules.derive.index import (
    newest_per_minor,
    platform_releases,
    released_versions,
    version_key,
)
from bundler.target.profiles import available_profiles, load_profile

# The plugin execution providers on PyPI (pypi.org/project/<name>/, read 2026-12): packages
# that load into onnxruntime >= 1.23 through the Plugin EP ABI. manifests/eps/ pins the ones
# `bundle build --ep` ships (bundler.eps.plugins); the others are listed for information.
EP_PACKS = (
    "onnxruntime-ep-nv-tensorrt-rtx-cu13",
    "onnxruntime-ep-nv-tensorrt-rtx-cu12",
    "onnxruntime-ep-openvino",
    "onnxruntime-ep-webgpu",
)


@dataclass(frozen=True)
class MissingRelease:
    package: str
    release: str
    kind: str  # "gpu" | "cpu" | "directml"
    command: str  # how to derive it


@dataclass(frozen=True)
class NewerComponent:
    flavour: str
    package: str
    pinned: str  # the newest version the flavour's component sets pin
    newest: str  # the newest release of the same major on the index


@dataclass(frozen=True)
class EpPack:
    package: str
    newest: str | None  # the newest release with a Windows wheel; None: not on the index
    listed: bool  # False: the index has no such project
    pinned: str | None = None  # the version manifests/eps/ pins; None: no pack ships it
    pack: str | None = None  # the pack's name (`--ep NAME`)

    @property
    def behind(self) -> bool:
        """A pinned pack with a newer Windows release on the index."""
        newer = self.newest and self.pinned and version_key(self.newest) > version_key(self.pinned)
        return bool(newer)


@dataclass(frozen=True)
class FrozenPackage:
    """A package of the catalogue that makes no more releases (a flavour's [frozen])."""

    package: str
    last: str
    why: str
    successor: str  # the package that carries the line on


@dataclass(frozen=True)
class Outdated:
    index_url: str
    missing: tuple[MissingRelease, ...] = ()
    components: tuple[NewerComponent, ...] = ()
    checked: dict[str, list[str]] = field(default_factory=dict)  # package -> releases seen
    ep_packs: tuple[EpPack, ...] = ()  # a pinned pack with a newer release counts as behind
    frozen: tuple[FrozenPackage, ...] = ()  # said, never behind

    @property
    def current(self) -> bool:
        return not self.behind

    @property
    def behind(self) -> int:
        """How many releases the catalogue misses: ORT releases, component releases and newer
        releases of the EP packs it pins."""
        return len(self.missing) + len(self.components) + len(self.newer_packs)

    @property
    def newer_packs(self) -> tuple[EpPack, ...]:
        return tuple(pack for pack in self.ep_packs if pack.behind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "index_url": self.index_url,
            "current": self.current,
            "behind": self.behind,
            "missing_releases": [vars(item) for item in self.missing],
            "newer_components": [vars(item) for item in self.components],
            "releases_checked": self.checked,
            "ep_packs": [{**vars(item), "behind": item.behind} for item in self.ep_packs],
            "frozen": [vars(item) for item in self.frozen],
        }


def outdated(index_url: str, policy: DownloadPolicy) -> Outdated:
    shipped = set(available_profiles())
    carrier = load_flavour("cpu")  # the Python and architecture every package is pinned for
    missing: list[MissingRelease] = []
    checked: dict[str, list[str]] = {}
    flavours = {name: load_flavour(name) for name in sorted(available_flavours())}
    for kind, package in PACKAGES.items():
        versions = released_versions(
            package, carrier.python, carrier.architecture, index_url, policy
        )
        releases = newest_per_minor(versions, since(kind))
        checked[package] = releases
        for release in releases:
            if not _has_profile(kind, release, shipped, flavours.get(kind)):
                flavour = "" if kind == "gpu" else f" --flavour {kind}"
                command = f"bundle profiles new --ort {release}{flavour}"
                missing.append(MissingRelease(package, release, kind, command))
    components = [
        newer
        for flavour in flavours.values()
        for newer in _newer_components(flavour, index_url, policy)
    ]
    pinned = {pack.source.pip.package: pack for pack in map(load_pack, available_packs())}
    packs = tuple(
        _ep_pack(name, carrier.architecture, index_url, policy, pinned.get(name))
        for name in EP_PACKS
    )
    frozen = tuple(_frozen(flavour, flavours) for flavour in flavours.values() if flavour.frozen)
    return Outdated(index_url, tuple(missing), tuple(components), checked, packs, frozen)


def _frozen(flavour: Flavour, flavours: dict[str, Flavour]) -> FrozenPackage:
    assert flavour.frozen is not None
    successor = flavours.get(flavour.frozen.successor)
    package = successor.ort.package if successor else flavour.frozen.successor
    return FrozenPackage(flavour.ort.package, flavour.frozen.last, flavour.frozen.why, package)


def _ep_pack(
    package: str,
    architecture: str,
    index_url: str,
    policy: DownloadPolicy,
    pinned: PinnedPack | None,
) -> EpPack:
    releases = platform_releases(package, architecture, index_url, policy)
    newest = releases[-1] if releases else None
    if pinned is None:
        return EpPack(package, newest, releases is not None)
    return EpPack(package, newest, releases is not None, pinned.source.pip.version, pinned.name)


def _has_profile(kind: str, release: str, shipped: set[str], flavour: Flavour | None) -> bool:
    """Whether the catalogue covers `release`; a build-stamped package's profile must pin that
    very build (a newer build of the same ORT release is a release the catalogue misses)."""
    if kind == "gpu":
        prefix = f"ort-{release}-gpu-cuda"
        return any(name.startswith(prefix) and name[len(prefix) :].isdigit() for name in shipped)
    if flavour is None or not flavour.build_stamped:
        return f"ort-{release}-{kind}" in shipped
    name = f"ort-{flavour.release(release)}-{kind}"
    if name not in shipped:
        return False
    versions = {artifact.name: artifact.version for artifact in load_profile(name).artifacts}
    return versions.get(flavour.ort.artifact) == release


def _newer_components(
    flavour: Flavour, index_url: str, policy: DownloadPolicy
) -> list[NewerComponent]:
    if flavour.gpu_driver is None:
        return []  # CPU and DirectML pin only the VC++ runtime: no CUDA drift
    pinned: dict[str, str] = {}
    for components in flavour.component_sets:
        for item in components.packages:
            if item.vc_runtime:
                continue
            old = pinned.get(item.package)
            if old is None or version_key(item.version) > version_key(old):
                pinned[item.package] = item.version
    found = []
    for package, version in sorted(pinned.items()):
        major = version_key(version)[0]
        same_major = [
            release
            for release in released_versions(
                package, flavour.python, flavour.architecture, index_url, policy
            )
            if version_key(release)[0] == major
        ]
        if same_major and version_key(same_major[-1]) > version_key(version):
            found.append(NewerComponent(flavour.name, package, version, same_major[-1]))
    return found
