"""Read layer: flavours: which packages an ORT build needs, and which component versions go
together.

A flavour (manifests/flavours/<name>.toml) is the data `bundle profiles new` starts from: the
ORT package of that build (onnxruntime-gpu, onnxruntime, onnxruntime-directml), the execution
providers it ships, the GPU driver DLLs, and one or more component sets: named lists of pinned
package versions that are known to work together (the CUDA 12.4.1 redistributables + cuDNN
9.1.0.70 + an MSVC runtime). A new CUDA or cuDNN is a new component set, chosen with
`--components`; the default is the flavour's `default_components`.

Read/decide layer: the loader validates into frozen dataclasses; raw dicts never leave it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from bundler.errors import BuildMismatchError, ProfileError
from bundler.rules.derive.build_info import BuildInfo, major_minor
from bundler.target import resources
from bundler.target.manifest import Table, load_toml
from bundler.target.profiles import ARCHITECTURES, GpuDriver
from bundler.target.values import VC_RUNTIME_MODES

_CU_SUFFIX = re.compile(r"-cu(\d+)$")


@dataclass(frozen=True)
class LocalInstall:
    """A `dir` source copied into the derived profile as written (a local CUDA install)."""

    env: str
    subdir: str
    min_file_version: str | None
    max_file_version: str | None
    why: str  # written as the source's comment


@dataclass(frozen=True)
class Package:
    """One pinned package of a component set, and how its artifact is described."""

    artifact: str
    package: str
    version: str
    supplier: str
    license: str
    licenses: tuple[str, ...]
    local: tuple[LocalInstall, ...] = ()
    vc_runtime: bool = False  # the MSVC runtime: its local install's floor is the linker floor
    why: str = ""  # where the version comes from


@dataclass(frozen=True)
class ComponentSet:
    name: str
    summary: str  # e.g. "CUDA 12.4 + cuDNN 9.1", used in the profile's description
    source: str  # where the versions come from
    packages: tuple[Package, ...]
    cuda: str = ""  # the CUDA release the set belongs to ("12.4.1"); "" for no CUDA

    @property
    def cuda_minor(self) -> tuple[int, int] | None:
        return major_minor(self.cuda)

    def cuda_suffix_majors(self) -> set[int]:
        """The CUDA majors named by `-cuNN` package names (nvidia-cudnn-cu13: 13)."""
        found = (_CU_SUFFIX.search(package.package) for package in self.packages)
        return {int(match[1]) for match in found if match}


@dataclass(frozen=True)
class OrtPackage:
    artifact: str
    package: str
    front: str  # the DLL an app links: onnxruntime.dll
    supplier: str
    license: str
    licenses: tuple[str, ...]


@dataclass(frozen=True)
class Frozen:
    """A package that makes no more releases: its last, why, and the flavour that follows it."""

    last: str
    why: str
    successor: str


@dataclass(frozen=True)
class Flavour:
    name: str
    profile_name: str  # a template with {ort}
    description: str  # a template with {ort} and {components}
    architecture: str
    python: str  # the CPython whose wheels are pinned, e.g. "3.11"
    min_windows: str
    min_windows_why: str
    vc_runtime: str
    execution_providers: tuple[str, ...]  # "cuda" -> onnxruntime_providers_cuda.dll
    driver_dlls: tuple[str, ...]
    driver_rules_from: tuple[str, ...]  # artifacts whose driver evidence becomes a rule
    name_patterns: tuple[str, ...]  # names written as these patterns (they carry a version)
    ort: OrtPackage
    component_sets: tuple[ComponentSet, ...]
    default_components: str
    gpu_driver: GpuDriver | None
    path: Path
    # the package's versions are RELEASE.BUILD (onnxruntime-windowsml 1.30.0.202609102321)
    build_stamped: bool = False
    frozen: Frozen | None = None  # the package makes no more releases

    def release(self, version: str) -> str:
        """The ORT release of a package version: its first three parts where the flavour's
        versions carry a build stamp (1.30.0.202609102321: 1.30.0), else the version."""
        return ".".join(version.split(".")[:3]) if self.build_stamped else version

    def choose_components(self, build: BuildInfo, name: str | None) -> tuple[ComponentSet, str]:
        """The component set for `build` and why: `name` when given (it must fit), else the
        default when it fits, else the first set that does. A set fits a CUDA build when its
        CUDA release has the build's major and the same or a newer minor, and every `-cuNN`
        package (cuDNN) is for that major."""
        wanted = build.cuda_minor
        cudnn = (
            int(build.cudnn_version.split(".")[0]) if build.cudnn_version[:1].isdigit() else None
        )
        if wanted is None:
            chosen = self.components(name)
            return chosen, f"component set {chosen.name} ({chosen.source})"
        if name is not None:
            chosen = self.components(name)
            problem = _misfit(chosen, wanted, cudnn)
            if problem:
                raise BuildMismatchError(
                    f"component set {chosen.name} of flavour {self.name} does not fit "
                    f"{build.wheel} (CUDA {build.cuda_version}): {problem}."
                )
        else:
            ordered = sorted(self.component_sets, key=lambda s: s.name != self.default_components)
            fitting = [item for item in ordered if not _misfit(item, wanted, cudnn)]
            if not fitting:
                raise BuildMismatchError(
                    f"flavour {self.name} has no component set for {build.wheel}, built with "
                    f"CUDA {build.cuda_version} ({build.source()}): add one with CUDA "
                    f"{wanted[0]}.{wanted[1]} or a newer {wanted[0]}.x to {self.path.name}."
                )
            chosen = fitting[0]
        why = (
            f"component set {chosen.name} (CUDA {chosen.cuda}: same major as the build's CUDA "
            f"{build.cuda_version}, minor the same or newer; from {build.source()}); "
            f"{chosen.source}"
        )
        return chosen, why

    def components(self, name: str | None) -> ComponentSet:
        wanted = name or self.default_components
        for item in self.component_sets:
            if item.name == wanted:
                return item
        known = ", ".join(item.name for item in self.component_sets)
        raise ProfileError(
            f"{self.path}: flavour {self.name} has no component set '{wanted}'; known: {known}."
        )


def flavours_dir() -> Path:
    return resources.manifests_dir() / "flavours"


def available_flavours() -> dict[str, Path]:
    return {path.stem: path for path in sorted(flavours_dir().glob("*.toml"))}


def load_flavour(name_or_path: str) -> Flavour:
    """A shipped flavour by name, or a flavour file by path."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" and candidate.is_file():
        return load_flavour_file(candidate)
    known = available_flavours()
    if name_or_path not in known:
        raise ProfileError(
            f"unknown flavour '{name_or_path}'; available: {', '.join(known) or '(none)'} "
            "(or give the path of a flavour .toml file)."
        )
    return load_flavour_file(known[name_or_path])


def load_flavour_file(path: Path) -> Flavour:
    table = load_toml(path)
    architecture = table.string("architecture")
    vc_runtime = table.string("vc_runtime")
    if architecture not in ARCHITECTURES or vc_runtime not in VC_RUNTIME_MODES:
        raise ProfileError(f"{path}: architecture or vc_runtime has an unknown value.")
    flavour = Flavour(
        name=table.string("name"),
        profile_name=table.string("profile_name"),
        description=table.string("description"),
        architecture=architecture,
        python=table.string("python"),
        min_windows=table.string("min_windows"),
        min_windows_why=table.string("min_windows_why"),
        vc_runtime=vc_runtime,
        execution_providers=table.strings("execution_providers"),
        driver_dlls=table.strings("driver_dlls", ()),
        driver_rules_from=table.strings("driver_rules_from", ()),
        name_patterns=table.strings("name_patterns", ()),
        ort=_ort(table.table("ort")),
        component_sets=tuple(_components(item) for item in table.tables("component_sets")),
        default_components=table.string("default_components"),
        gpu_driver=_gpu_driver(table.table("gpu_driver", None)),
        path=path,
        build_stamped=table.boolean("build_stamped", False),
        frozen=_frozen(table.table("frozen", None)),
    )
    table.done()
    flavour.components(None)  # the default must exist
    return flavour


class _Supply(TypedDict):
    """The keys an ORT package and a pinned package both describe their artifact with: its
    name, the PyPI package, who supplies it and under which licence (the SBOM's fields)."""

    artifact: str
    package: str
    supplier: str
    license: str
    licenses: tuple[str, ...]


def _supply(table: Table) -> _Supply:
    return _Supply(
        artifact=table.string("artifact"),
        package=table.string("package"),
        supplier=table.string("supplier"),
        license=table.string("license"),
        licenses=table.strings("licenses"),
    )


def _ort(table: Table) -> OrtPackage:
    return table.finished(OrtPackage(**_supply(table), front=table.string("front")))


def _misfit(components: ComponentSet, build: tuple[int, int], cudnn: int | None) -> str | None:
    """Why a component set does not fit a CUDA build (major, minor) with cuDNN `cudnn` (the
    major version_info.py states), or None."""
    have = components.cuda_minor
    if have is None:
        return "it names no CUDA release (key 'cuda')"
    if have[0] != build[0]:
        return f"it is CUDA {components.cuda}, another major"
    if have < build:
        return f"its CUDA {components.cuda} is older than the build's {build[0]}.{build[1]}"
    others = components.cuda_suffix_majors() - {build[0]}
    if others:
        return f"a package is for CUDA {', '.join(map(str, sorted(others)))} (-cuNN)"
    for package in components.packages:
        major = package.version.split(".")[0]
        if cudnn is not None and package.artifact == "cudnn" and major != str(cudnn):
            return f"its cuDNN {package.version} is not cuDNN {cudnn}, the build's"
    return None


def _components(table: Table) -> ComponentSet:
    components = ComponentSet(
        name=table.string("name"),
        summary=table.string("summary"),
        source=table.string("source"),
        packages=tuple(_package(item) for item in table.tables("packages")),
        cuda=table.string("cuda", ""),
    )
    return table.finished(components)


def _package(table: Table) -> Package:
    package = Package(
        **_supply(table),
        version=table.string("version"),
        local=tuple(_local(item) for item in table.tables("local", [])),
        vc_runtime=table.boolean("vc_runtime", False),
        why=table.string("why", ""),
    )
    return table.finished(package)


def _local(table: Table) -> LocalInstall:
    local = LocalInstall(
        env=table.string("env"),
        subdir=table.string("subdir"),
        min_file_version=table.string("min_file_version", None),
        max_file_version=table.string("max_file_version", None),
        why=table.string("why", ""),
    )
    return table.finished(local)


def _frozen(table: Table | None) -> Frozen | None:
    if table is None:
        return None
    frozen = Frozen(
        last=table.string("last"), why=table.string("why"), successor=table.string("successor")
    )
    return table.finished(frozen)


def _gpu_driver(table: Table | None) -> GpuDriver | None:
    if table is None:
        return None
    driver = GpuDriver(
        dll=table.string("dll"),
        cuda_major=table.integer("cuda_major"),
        min_version=table.string("min_version"),
        source=table.string("source"),
        require=table.boolean("require", False),
    )
    return table.finished(driver)
