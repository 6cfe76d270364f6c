"""Act layer: `bundle profiles new`: derive a target profile for an ORT release from its PyPI
wheels.

The steps, each done by the module that owns it:
1. the flavour (flavours.py) says which packages and component versions go together;
2. the index (index.py, PEP 691) gives every wheel's file name, SHA-256 and size;
3. the wheels are acquired like any profile's (bundler.acquire.artifacts: the cache, pip with
   --require-hashes, extraction), from a provisional profile that provides every DLL;
4. the DLLs' import tables (bundler.binary.pe) and runtime loads (bundler.rules.scan) give the
   roots, the
   rules, the DLLs each artifact provides and the VC++ floor (facts.py);
5. profile_toml.py writes the profile with a comment on every fact.

It uses the network, the cache and files; it prints nothing: the CLI shows the result.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from bundler.acquire.acquired import Acquired
from bundler.acquire.artifacts import AcquireOptions, acquire_profile
from bundler.acquire.cache import Cache
from bundler.acquire.download import DownloadPolicy
from bundler.binary.ort_build import cuda_ep
from bundler.binary.pe import PEInfo, read_pe
from bundler.closure.fit import require_resolved
from bundler.closure.resolve import resolve
from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.errors import BuildMismatchError, IntegrityError, ProfileError, VcRuntimeError
from bundler.reporter import Reporter
from bundler.rules.derive.build_info import BuildInfo, check_cuda_major, read_build_info
from bundler.rules.derive.facts import Facts, Windows, derive_facts, recorded_file, required_windows
from bundler.rules.derive.flavours import (
    ComponentSet,
    Flavour,
    Package,
    available_flavours,
    load_flavour,
)
from bundler.rules.derive.index import find_wheel
from bundler.rules.derive.pins import WheelPin
from bundler.rules.derive.profile_toml import DerivedArtifact, Rendering, render_profile
from bundler.rules.scan import scan_all
from bundler.target.loads import RecordedFile
from bundler.target.profiles import (
    Artifact,
    CudaEp,
    PipSource,
    Profile,
    dll_key,
    load_profile_file,
)
from bundler.target.system import SystemPolicy, load_system_policy

CUDA_PROVIDER = "onnxruntime_providers_cuda.dll"


@dataclass(frozen=True)
class NewProfile:
    """What to derive: `ort` of `flavour` with `components`, pinned from `index_url`."""

    ort: str
    flavour: Flavour
    components: str | None  # a component set's name; None: chosen for the build
    index_url: str
    policy: DownloadPolicy = field(default_factory=DownloadPolicy)
    command: str = "bundle profiles new"
    # --flavour gpu: the GPU flavour of the CUDA major the wheel states (gpu-cuda12/13)
    cuda_from_build: bool = False


@dataclass(frozen=True)
class Derived:
    name: str
    text: str  # the profile, TOML
    facts: Facts
    profile: Profile  # the text as the loader reads it (its path is gone: a temp file)


@dataclass(frozen=True)
class _Release:
    """What the derivation acquired: the flavour and component set the wheel's build chose,
    the packages with their pins, and the verified, extracted wheels."""

    request: NewProfile
    build: BuildInfo
    components: ComponentSet
    chosen: str
    packages: list[Package]
    pins: list[WheelPin]
    acquired: list[Acquired]


def derive_profile(
    request: NewProfile, cache: Cache, options: AcquireOptions, report: Reporter
) -> Derived:
    """The ORT wheel first (_acquire): what it says about its own build decides whether the
    flavour fits and which component set to pin, before any component is downloaded; then
    the facts from the DLLs, the rendered profile, and its closure resolved before it is
    handed back."""
    release = _acquire(request, cache, options, report)
    flavour = release.request.flavour
    files, owners, members = _release_dlls(release.acquired)
    infos = {key: read_pe(path) for key, path in files.items()}
    policy = load_system_policy()
    facts = derive_facts(
        flavour.ort.front,
        flavour.execution_providers,
        flavour.driver_dlls,
        flavour.driver_rules_from,
        flavour.gpu_driver.dll if flavour.gpu_driver else None,
        owners,
        infos,
        scan_all(files, flavour.driver_dlls, policy),
    )
    _check_vc_runtime(facts, release.packages, infos)
    name = flavour.profile_name.format(ort=flavour.release(request.ort))
    artifacts = _artifacts(release, facts, infos, members)
    windows = required_windows(facts, infos, policy, _windows(flavour))
    text = render_profile(
        _rendering(release, name, windows, _cuda_ep(facts, files, flavour.ort.front)),
        facts,
        artifacts,
        _recorded(facts, artifacts, infos, policy),
    )
    profile = _validated(text, name)
    folders = [folder for item in release.acquired for folder in item.dll_folders]
    require_resolved(resolve([], profile, policy, folders), profile, f"the derived profile {name}")
    return Derived(name, text, facts, profile)


def _acquire(
    request: NewProfile, cache: Cache, options: AcquireOptions, report: Reporter
) -> _Release:
    front = _front(request)
    ort_pin = _pin(request, front)
    first = acquire_profile(_provisional(request, [front], [ort_pin]), cache, options, report)
    build = read_build_info(cache.blob(_sha256(first[0])), ort_pin.wheel)
    if request.cuda_from_build:
        flavour = gpu_flavour_for(build)
        request = replace(request, flavour=flavour, command=f"{request.command}{flavour.name}")
    flavour = request.flavour
    check_cuda_major(
        build, flavour.name, flavour.gpu_driver.cuda_major if flavour.gpu_driver else None
    )
    components, chosen = flavour.choose_components(build, request.components)
    packages = [front, *components.packages]
    pins = [ort_pin, *(_pin(request, package) for package in components.packages)]
    acquired = acquire_profile(_provisional(request, packages, pins), cache, options, report)
    _check_sizes(pins, acquired)
    return _Release(request, build, components, chosen, packages, pins, list(acquired))


def _cuda_ep(facts: Facts, files: dict[str, Path], front: str) -> CudaEp | None:
    """What the closure's CUDA provider is (plugin-capable, default mode), read from the
    pinned DLLs; None for a release without one in the closure."""
    keys = {dll_key(name) for name in facts.closure}
    if CUDA_PROVIDER not in keys or dll_key(front) not in keys:
        return None
    return cuda_ep(files[dll_key(front)], files[CUDA_PROVIDER])


def _rendering(
    release: _Release, name: str, windows: Windows, found: CudaEp | None = None
) -> Rendering:
    request = release.request
    return Rendering(
        command=f"{request.command} --components {release.components.name}",
        name=name,
        ort=request.flavour.release(request.ort),
        version=request.ort,
        flavour=request.flavour,
        components=release.components,
        index_url=request.index_url,
        build=release.build,
        chosen=release.chosen,
        windows=windows,
        cuda_ep=found,
    )


def _artifacts(
    release: _Release, facts: Facts, infos: dict[str, PEInfo], members: dict[str, dict[str, str]]
) -> list[DerivedArtifact]:
    """The packages whose wheels hold a DLL of the closure, as the profile's artifacts; and
    the VC++ runtime where no DLL of the closure imports it (onnxruntime-windowsml links the
    CRT statically): it stays, for an app that imports it itself, and a build ships it only
    then (bundler.closure.vcruntime ships what the closure imports)."""
    found = []
    for package, pin in zip(release.packages, release.pins, strict=True):
        wheel = members[package.artifact]
        if package.artifact in facts.owners.values():
            signed = _signed(package.artifact, facts, infos)
            found.append(DerivedArtifact(package, pin, wheel, signed))
        elif package.vc_runtime and facts.floor is None:
            for_app = tuple(key for key in wheel if key in VC_RUNTIME_DLLS)
            signed = bool(for_app) and all(infos[key].signed for key in for_app)
            found.append(DerivedArtifact(package, pin, wheel, signed, for_app))
    return found


def gpu_flavour_for(build: BuildInfo) -> Flavour:
    """gpu-cuda<N> for a wheel built with CUDA N."""
    name = f"gpu-cuda{build.cuda_major}"
    if build.cuda_major is None or name not in available_flavours():
        raise BuildMismatchError(
            f"{build.wheel} states CUDA {build.cuda_version or '(none)'} ({build.source()}): no "
            f"shipped GPU flavour is for it; give --flavour FILE.toml."
        )
    return load_flavour(name)


def _signed(artifact: str, facts: Facts, infos: dict[str, PEInfo]) -> bool:
    """Whether every closure DLL the artifact provides carries a certificate table."""
    keys = [dll_key(name) for name in facts.closure if facts.owners[dll_key(name)] == artifact]
    return bool(keys) and all(infos[key].signed for key in keys)


def _front(request: NewProfile) -> Package:
    flavour = request.flavour
    ort, release = flavour.ort, flavour.release(request.ort)
    why = f"ORT {release} with the package's build stamp" if release != request.ort else ""
    return Package(
        ort.artifact, ort.package, request.ort, ort.supplier, ort.license, ort.licenses, why=why
    )


def _pin(request: NewProfile, package: Package) -> WheelPin:
    flavour = request.flavour
    return find_wheel(
        package.package,
        package.version,
        flavour.python,
        flavour.architecture,
        request.index_url,
        request.policy,
    )


def _sha256(item: Acquired) -> str:
    assert item.sha256 is not None  # a pip source is always pinned
    return item.sha256


def _recorded(
    facts: Facts,
    artifacts: Sequence[DerivedArtifact],
    infos: dict[str, PEInfo],
    policy: SystemPolicy,
) -> list[RecordedFile]:
    """The closure's DLLs with their import tables, in the order the closure found them, then
    the VC++ runtime kept for the app."""
    closure = [
        recorded_file(infos[dll_key(name)], facts.owners[dll_key(name)], policy)
        for name in facts.closure
    ]
    for_app = [
        recorded_file(infos[key], item.package.artifact, policy)
        for item in artifacts
        for key in item.for_app
    ]
    return closure + for_app


def _validated(text: str, name: str) -> Profile:
    """The rendered text read back by the profile loader: a derived profile that the loader
    refuses is a bug here, not something to hand the user."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        return load_profile_file(path)


def _provisional(
    request: NewProfile, packages: Sequence[Package], pins: Sequence[WheelPin]
) -> Profile:
    """A profile whose artifacts are the pinned wheels, each providing every DLL it holds: what
    the acquisition code needs to fetch, verify and extract them."""
    flavour = request.flavour
    artifacts = tuple(
        Artifact(
            name=package.artifact,
            version=package.version,
            provides=("*.dll",),
            licenses=package.licenses,
            sources=(PipSource(pin.package, pin.version, pin.wheel, pin.sha256),),
        )
        for package, pin in zip(packages, pins, strict=True)
    )
    return Profile(
        name=flavour.profile_name.format(ort=flavour.release(request.ort)),
        description="provisional: derivation in progress",
        architecture=flavour.architecture,
        min_windows=_windows(flavour),
        vc_runtime=flavour.vc_runtime,
        roots=(),
        driver_dlls=flavour.driver_dlls,
        runtime_rules=(),
        artifacts=artifacts,
        path=flavour.path,
    )


def _windows(flavour: Flavour) -> tuple[int, ...]:
    try:
        parts = tuple(int(part) for part in flavour.min_windows.split("."))
    except ValueError:
        parts = ()
    if len(parts) != 3:
        raise ProfileError(f"{flavour.path}: min_windows must look like 10.0.19041.")
    return parts


def _check_sizes(pins: Sequence[WheelPin], acquired: Sequence[Acquired]) -> None:
    for pin, item in zip(pins, acquired, strict=True):
        if pin.size is not None and item.size is not None and pin.size != item.size:
            raise IntegrityError(
                f"{pin.wheel}: the index says {pin.size} bytes, the verified file has "
                f"{item.size}; check the index ({pin.page})."
            )


def _release_dlls(
    acquired: Sequence[Acquired],
) -> tuple[dict[str, Path], dict[str, str], dict[str, dict[str, str]]]:
    """key -> file, key -> artifact, artifact -> key -> path in the wheel, for every DLL of
    the release; the first artifact (and its fullest folder) holding a name wins."""
    files: dict[str, Path] = {}
    owners: dict[str, str] = {}
    members: dict[str, dict[str, str]] = {}
    for item in acquired:
        members[item.artifact] = {}
        for folder in item.dll_folders:
            for path in sorted(folder.glob("*")):
                key = dll_key(path.name)
                if key.endswith(".dll") and path.is_file() and key not in files:
                    files[key] = path
                    owners[key] = item.artifact
                    members[item.artifact][key] = path.relative_to(item.folder).as_posix()
    return files, owners, members


def _check_vc_runtime(
    facts: Facts,
    packages: Sequence[Package],
    infos: dict[str, PEInfo],
) -> None:
    """The component set's VC++ runtime must reach the floor, or builds would refuse it."""
    if facts.floor is None:
        return
    runtimes = {package.artifact for package in packages if package.vc_runtime}
    for key, artifact in facts.owners.items():
        version = infos[key].file_version
        if artifact in runtimes and version is not None and version[:2] < facts.floor.version:
            raise VcRuntimeError(
                f"{infos[key].path.name} {'.'.join(map(str, version))} is older than "
                f"{facts.floor.binary}'s MSVC linker {'.'.join(map(str, facts.floor.version))}; "
                "pick a component set with a newer msvc-runtime (--components)."
            )


__all__ = ["Derived", "NewProfile", "derive_profile"]
