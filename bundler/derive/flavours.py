"""Flavours: which packages an ORT build needs, and which component versions go together.

A flavour (manifests/flavours/<name>.toml) is the data `bundle profiles new` starts from: the
ORT package of that build (onnxruntime-gpu, onnxruntime, onnxruntime-directml), the execution
providers it ships, the GPU driver DLLs, and one or more component sets: named lists of pinned
package versions that are known to work together (the CUDA 12.4.1 redistributables + cuDNN
9.1.0.70 + an MSVC runtime). A new CUDA or cuDNN is a new component set, chosen with
`--components`; the default is the flavour's `default_components`.

Read/decide layer: the loader validates into frozen dataclasses; raw dicts never leave it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundler import resources
from bundler.errors import ProfileError
from bundler.manifest import Table, load_toml
from bundler.profiles import ARCHITECTURES, VC_RUNTIME_MODES, GpuDriver


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


@dataclass(frozen=True)
class OrtPackage:
    artifact: str
    package: str
    front: str  # the DLL an app links: onnxruntime.dll
    supplier: str
    license: str
    licenses: tuple[str, ...]


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
    )
    table.done()
    flavour.components(None)  # the default must exist
    return flavour


def _ort(table: Table) -> OrtPackage:
    ort = OrtPackage(
        artifact=table.string("artifact"),
        package=table.string("package"),
        front=table.string("front"),
        supplier=table.string("supplier"),
        license=table.string("license"),
        licenses=table.strings("licenses"),
    )
    table.done()
    return ort


def _components(table: Table) -> ComponentSet:
    components = ComponentSet(
        name=table.string("name"),
        summary=table.string("summary"),
        source=table.string("source"),
        packages=tuple(_package(item) for item in table.tables("packages")),
    )
    table.done()
    return components


def _package(table: Table) -> Package:
    package = Package(
        artifact=table.string("artifact"),
        package=table.string("package"),
        version=table.string("version"),
        supplier=table.string("supplier"),
        license=table.string("license"),
        licenses=table.strings("licenses"),
        local=tuple(_local(item) for item in table.tables("local", [])),
        vc_runtime=table.boolean("vc_runtime", False),
        why=table.string("why", ""),
    )
    table.done()
    return package


def _local(table: Table) -> LocalInstall:
    local = LocalInstall(
        env=table.string("env"),
        subdir=table.string("subdir"),
        min_file_version=table.string("min_file_version", None),
        max_file_version=table.string("max_file_version", None),
        why=table.string("why", ""),
    )
    table.done()
    return local


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
    table.done()
    return driver
