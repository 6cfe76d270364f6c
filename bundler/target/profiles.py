"""Read layer: target profiles: what an ORT app needs on a given target, loaded from
manifests/profiles/.

A profile is data (TOML with provenance comments), validated here into frozen dataclasses.
DLL names are kept as written for display; every comparison goes through `dll_key`.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from bundler.errors import ProfileError
from bundler.target import resources
from bundler.target.loads import (
    RecordedFile,
    RuntimeRule,
    ScanException,
    read_recorded_file,
    read_runtime_rule,
    read_scan_exception,
)
from bundler.target.manifest import Table, load_toml
from bundler.target.profile_names import (
    LATEST,
    RELEASE,
    Shipped,
    no_gpu_profile,
    release_of,
    unknown_profile,
)
from bundler.target.values import (
    VC_RUNTIME_MODES,
    archive_size,
    choice,
    driver_version,
    file_version,
    parse_windows_version,
)

DEFAULT_PROFILE = "ort-1.19.2-gpu-cuda12"
ARCHITECTURES = ("x86", "x64", "arm64")
SIGNATURE_MODES = ("off", "verify")
# NVIDIA's DLL names carry the version they belong to: cudart64_12, cudart64_110 (CUDA 11.0),
# cudnn_ops64_9, cudnn_ops_infer64_8, nvrtc64_120_0, nvrtc-builtins64_124. family = the name up
# to the first "_" or "64", version = the number after "64_".
_VERSIONED_NAME = re.compile(
    r"(?P<family>[a-z][a-z-]*?)(?:_[a-z_]+)?64_(?P<version>\d+)(?:_\d+)?\.dll"
)


def dll_key(name: str) -> str:
    """Windows file names compare case-insensitively: key every lookup by this."""
    return name.lower()


def versioned(name: str) -> tuple[str, str] | None:
    """(family, version) of an NVIDIA DLL name, e.g. ("cudart", "110") for cudart64_110.dll."""
    match = _VERSIONED_NAME.fullmatch(dll_key(name))
    return (match["family"], match["version"]) if match else None


def is_pattern(name: str) -> bool:
    return any(char in name for char in "*?[")


def matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(dll_key(name), dll_key(pattern))


@dataclass(frozen=True)
class UrlSource:
    """A pinned archive on the web. `sdk`: the archive also carries the C/C++ SDK (headers
    under include/, import libraries in lib/), as ORT's release zip does and its wheels don't."""

    url: str
    sha256: str
    sha512: str | None = None
    size: int | None = None
    sdk: bool = False
    kind: str = "url"


@dataclass(frozen=True)
class PipSource:
    package: str
    version: str
    wheel: str
    sha256: str
    kind: str = "pip"


@dataclass(frozen=True)
class DirSource:
    """A local install, located through an environment variable (e.g. CUDA_PATH). Accepted
    when it has every provided DLL, of the profile's machine type, with a file version in
    [min_file_version, max_file_version) where the DLL carries one."""

    env: str
    subdir: str
    min_file_version: tuple[int, ...] | None = None
    max_file_version: tuple[int, ...] | None = None
    kind: str = "dir"


Source = UrlSource | PipSource | DirSource


def has_sdk(source: Source) -> TypeGuard[UrlSource]:
    """True for a source whose archive carries the C/C++ SDK (headers, import libraries)."""
    return isinstance(source, UrlSource) and source.sdk


@dataclass(frozen=True)
class Artifact:
    name: str
    version: str
    provides: tuple[str, ...]
    licenses: tuple[str, ...]  # licence file names inside the archive, shipped in licenses/
    sources: tuple[Source, ...]
    supplier: str = ""  # for the SBOM
    license: str = ""  # SPDX expression (LicenseRef-... for vendor licences), for the SBOM
    signed: bool = False  # the vendor Authenticode-signs these DLLs (measured on the pins)


@dataclass(frozen=True)
class GpuDriver:
    """What the target's GPU driver must be: the installer's preflight checks it. The version
    is NVIDIA's driver numbering (527.41), read on the target from the driver DLL's
    FileVersion (31.0.15.2741: the last five digits of the last two parts)."""

    dll: str  # the driver DLL in System32 whose FileVersion tells the driver version
    cuda_major: int
    min_version: str  # e.g. "527.41"
    source: str  # where the minimum comes from
    require: bool = False  # a failed check stops a silent install (else it is only logged)


PLUGIN, LEGACY = "plugin", "legacy"
CUDA_EP_MODES = (LEGACY, PLUGIN)


@dataclass(frozen=True)
class CudaEp:
    """What the release's CUDA provider DLL is (docs/ep-packs.md, "The CUDA provider's two
    modes"): whether it can also run as a plugin EP (it exports CreateEpFactories besides the
    legacy GetProvider), and the mode ORT registers it in by default, where the release states
    one (the cuda-plugin-ep= flag of the "ORT Build Info:" string in onnxruntime.dll)."""

    plugin_capable: bool
    default_mode: str | None = None  # "legacy" or "plugin"; None: the release does not say

    def describe(self) -> str:
        capable = "plugin-capable" if self.plugin_capable else "legacy only"
        default = f", {self.default_mode} by default" if self.default_mode else ""
        return capable + default


@dataclass(frozen=True)
class Profile:
    """A target: the pinned artifacts, the roots, the rules for what no import table shows,
    and the Windows, driver and VC++ floors (manifests/profiles/*.toml)."""

    name: str
    description: str
    architecture: str
    min_windows: tuple[int, ...]
    vc_runtime: str
    roots: tuple[str, ...]
    driver_dlls: tuple[str, ...]
    runtime_rules: tuple[RuntimeRule, ...]
    artifacts: tuple[Artifact, ...]
    path: Path
    gpu_driver: GpuDriver | None = None
    scan_exceptions: tuple[ScanException, ...] = ()
    signatures: str = "off"  # "verify": build checks the signed artifacts' signatures
    files: tuple[RecordedFile, ...] = ()  # the pinned DLLs' recorded import tables
    gpus: tuple[str, ...] = ()  # target GPUs, e.g. ("sm_86", "sm_120"): audit checks the code
    cuda_ep: CudaEp | None = None  # [cuda_ep]: None where the profile has no CUDA provider

    def recorded(self, name: str) -> RecordedFile | None:
        key = dll_key(name)
        return next((item for item in self.files if dll_key(item.name) == key), None)

    def signed_by_vendor(self, name: str) -> bool:
        """True when an artifact that provides `name` is one its vendor signs."""
        return any(
            artifact.signed and any(matches(entry, name) for entry in artifact.provides)
            for artifact in self.artifacts
        )

    def rules_for(self, name: str) -> tuple[RuntimeRule, ...]:
        key = dll_key(name)
        return tuple(rule for rule in self.runtime_rules if dll_key(rule.trigger) == key)

    def is_driver(self, name: str) -> bool:
        return dll_key(name) in {dll_key(driver) for driver in self.driver_dlls}


def profile_ort_release(profile: Profile) -> str | None:
    """The ORT release of the artifact that provides onnxruntime.dll: its version, less a
    build stamp (onnxruntime-windowsml 1.30.0.202609102321 is ORT 1.30.0, what
    GetVersionString() reports and bundle-doctor compares)."""
    for artifact in profile.artifacts:
        if any(dll_key(name) == "onnxruntime.dll" for name in artifact.provides):
            return ".".join(artifact.version.split(".")[:3])
    return None


def available_profiles() -> dict[str, Path]:
    """Profile name → manifest file, for every profile shipped with bundle."""
    return {path.stem: path for path in sorted(resources.profiles_dir().glob("*.toml"))}


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name, or a profile file by path (a custom profile), or an ORT
    release ("1.31.1"): that release's shipped GPU profile, or `latest`: the newest of those."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" and candidate.is_file():
        return load_profile_file(candidate)
    known = available_profiles()
    return load_profile_file(known[shipped_name(name_or_path, known)])


def shipped_name(name: str, known: dict[str, Path]) -> str:
    """The shipped profile `name` means: itself, a release's GPU profile, or `latest`'s; a
    ProfileError with a suggestion (not the whole list) when none fits."""
    shipped = Shipped(tuple(known))
    if name == LATEST:
        return shipped.latest_gpu()
    if RELEASE.fullmatch(name):
        return release_profile(name, known)
    if name not in known:
        raise ProfileError(unknown_profile(name, shipped))
    return name


def release_profile(release: str, known: dict[str, Path]) -> str:
    """The GPU profile of an ORT release (ort-1.31.1-gpu-cuda13), the one a user of
    onnxruntime-gpu means by the release."""
    shipped = Shipped(tuple(known))
    found = shipped.gpu_profile(release)
    if found is None:
        raise ProfileError(no_gpu_profile(release, shipped))
    return found


def latest_gpu_release() -> str:
    """`--ort latest` where a release is wanted (bundle measure): the newest release with a
    shipped GPU profile."""
    return release_of(Shipped(tuple(available_profiles())).latest_gpu())


def load_profile_file(path: Path) -> Profile:
    table = load_toml(path)
    profile = Profile(
        name=table.string("name"),
        description=table.string("description"),
        architecture=choice(table, "architecture", ARCHITECTURES),
        min_windows=parse_windows_version(table, "min_windows"),
        vc_runtime=choice(table, "vc_runtime", VC_RUNTIME_MODES),
        roots=table.strings("roots"),
        driver_dlls=table.strings("driver_dlls", ()),
        runtime_rules=tuple(read_runtime_rule(item) for item in table.tables("runtime_rules", [])),
        artifacts=tuple(_artifact(item) for item in table.tables("artifacts", [])),
        path=path,
        gpu_driver=_gpu_driver(table),
        signatures=choice(table, "signatures", SIGNATURE_MODES, "off"),
        scan_exceptions=tuple(
            read_scan_exception(item) for item in table.tables("scan_exceptions", [])
        ),
        files=tuple(read_recorded_file(item) for item in table.tables("files", [])),
        gpus=table.strings("gpus", ()),
        cuda_ep=_cuda_ep(table),
    )
    table.done()
    _check_recorded(profile, table.where)
    return profile


def _check_recorded(profile: Profile, where: str) -> None:
    """Every [[files]] entry names an artifact of the profile that provides it, once."""
    artifacts = {artifact.name: artifact for artifact in profile.artifacts}
    seen: set[str] = set()
    for item in profile.files:
        artifact = artifacts.get(item.artifact)
        if artifact is None or not any(matches(entry, item.name) for entry in artifact.provides):
            raise ProfileError(
                f"{where}: [[files]] {item.name!r} names artifact {item.artifact!r}, which "
                "does not provide it; regenerate the block "
                "(python -m tools.manifests.record_files --write)."
            )
        if dll_key(item.name) in seen:
            raise ProfileError(f"{where}: [[files]] lists {item.name!r} twice.")
        seen.add(dll_key(item.name))


def _gpu_driver(profile: Table) -> GpuDriver | None:
    table = profile.table("gpu_driver", None)
    if table is None:
        return None
    minimum = driver_version(table, "min_version")
    driver = GpuDriver(
        dll=table.string("dll"),
        cuda_major=table.integer("cuda_major"),
        min_version=minimum,
        source=table.string("source"),
        require=table.boolean("require", False),
    )
    table.done()
    return driver


def _cuda_ep(profile: Table) -> CudaEp | None:
    table = profile.table("cuda_ep", None)
    if table is None:
        return None
    mode = table.string("default_mode", None)
    if mode is not None and mode not in CUDA_EP_MODES:
        raise ProfileError(f"{table.where}: key 'default_mode' must be legacy or plugin.")
    found = CudaEp(plugin_capable=table.boolean("plugin_capable"), default_mode=mode)
    table.done()
    return found


def _artifact(table: Table) -> Artifact:
    sources = tuple(_source(item) for item in table.tables("sources"))
    if not sources:
        raise ProfileError(
            f"{table.where}: key 'sources' is empty; add a [[artifacts.sources]] table with "
            'its pin (sha256), or a local install (kind = "dir").'
        )
    artifact = Artifact(
        name=table.string("name"),
        version=table.string("version"),
        provides=table.strings("provides"),
        licenses=table.strings("licenses", ()),
        sources=sources,
        supplier=table.string("supplier", ""),
        license=table.string("license", ""),
        signed=table.boolean("signed", False),
    )
    table.done()
    return artifact


def _source(table: Table) -> Source:
    kind = table.string("kind")
    source: Source
    if kind == "url":
        url = table.string("url")
        if not url.startswith("https://"):
            raise ProfileError(f"{table.where}: key 'url' must be an https:// URL, not '{url}'.")
        source = UrlSource(
            url=url,
            sha256=table.hexdigest("sha256", 64),
            sha512=table.hexdigest("sha512", 128, None),
            size=archive_size(table),
            sdk=table.boolean("sdk", False),
        )
    elif kind == "pip":
        source = PipSource(
            package=table.string("package"),
            version=table.string("version"),
            wheel=table.string("wheel"),
            sha256=table.hexdigest("sha256", 64),
        )
    elif kind == "dir":
        source = DirSource(
            env=table.string("env"),
            subdir=table.string("subdir"),
            min_file_version=file_version(table, "min_file_version"),
            max_file_version=file_version(table, "max_file_version"),
        )
    else:
        raise ProfileError(f"{table.where}: key 'kind' must be url, pip or dir, not '{kind}'.")
    table.done()
    return source
