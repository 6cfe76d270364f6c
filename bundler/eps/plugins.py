"""Read layer: execution-provider packs: a vendor's plugin EP (TensorRT RTX, OpenVINO, WebGPU)
as a folder of DLLs beside the exe, loaded from manifests/eps/ into frozen dataclasses.

A pack file has a hand-written head (the pin, the plugin DLL, the EP and registration names, the ORT
minimum, the folder, the target's facts, the hardware, each with its source) and a block
tools/manifests/ep_facts.py generates from the pinned wheel ([[files]] with sizes, SHA-256 and
import tables, [imported], [[scan]]). Every key is read and checked here, as bundler.target.profiles
checks a profile: a message names the file and the key. What ships of a pack: every file of its
wheel folder but `not_shipped` and the licences (those go to licenses/<pack>/); driver DLLs never.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bundler.errors import ConfigError, ProfileError
from bundler.target import resources
from bundler.target.manifest import Table, load_toml
from bundler.target.profile_names import version_key
from bundler.target.profiles import Artifact, PipSource, dll_key

_MIN_ORT = re.compile(r"\d+(?:\.\d+){1,2}")
_WHERE = ("pack", "system", "driver", "optional")
# How bundle-doctor.exe decides on the target that a pack can run there (docs/doctor.md):
# nvidia-cuda: a CUDA device of the minimum compute capability and a new enough driver
# (nvcuda.dll); intel: an Intel CPU or display adapter; d3d12: an adapter with Direct3D 12.
PROBES = ("nvidia-cuda", "intel", "d3d12")


@dataclass(frozen=True)
class PackFile:
    """One file of the pack's wheel ([[files]]): its path in the wheel, size and SHA-256, and
    for a DLL its import and delay-import tables (API sets left out)."""

    name: str
    path: str  # inside the wheel, posix
    size: int
    sha256: str
    imports: tuple[str, ...] = ()
    delay_imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class PackLoad:
    """A run-time load no import table shows: hand-found ([[runtime_loads]], `why`) or found by
    `bundle scan` ([[scan]], `where` the loaded DLL lives: pack, system, driver, optional)."""

    loader: str
    loads: str
    where: str
    evidence: str


@dataclass(frozen=True)
class PackSource:
    """The pinned wheel (a pip source, as profiles pin theirs), its size, and the folder of it
    that is the pack."""

    pip: PipSource
    size: int
    folder_in_wheel: str


@dataclass(frozen=True)
class Hardware:
    """What the target machine needs for the pack's factory to offer a device."""

    device: str
    vendors: str
    needs: str
    probe: str  # how bundle-doctor.exe looks for it on the target: one of PROBES
    min_compute_capability: str | None = None
    min_driver: str | None = None


@dataclass(frozen=True)
class Proof:
    """What tests/test_ep_packs_wine.py proves under Wine, and what it cannot."""

    registers: str
    loads_every_dll: bool
    devices: str
    not_proven: str


@dataclass(frozen=True)
class EpPack:
    """An execution-provider pack (manifests/eps/<name>.toml)."""

    name: str
    description: str
    plugin: str  # the DLL the app registers (exports CreateEpFactories)
    ep_name: str  # the EP name its factory reports
    registration_name: str  # the name the app registers the library under
    min_ort: str  # the oldest ORT release the pack's factory accepts
    folder: str  # relative to the exe's folder, posix ("ep/webgpu")
    source: PackSource
    driver_dlls: tuple[str, ...]  # needed on the target, never shipped
    optional_dlls: tuple[str, ...]  # named at run time, absent on most machines and fine so
    vc_runtime: tuple[str, ...]  # the VC++ runtime DLLs the pack imports
    vc_runtime_in_pack: tuple[str, ...]  # of those, the ones that must sit in the pack folder
    own_folder_only: tuple[str, ...]  # loaded only from the pack's own folder
    data_files: tuple[str, ...]  # non-DLL files of the pack that ship (cache.json)
    license: str  # SPDX expression
    licenses: tuple[str, ...]  # wheel paths of its licence files
    not_shipped: tuple[str, ...]  # files of the pack folder ORT never reads
    hardware: Hardware
    files: tuple[PackFile, ...]
    loads: tuple[PackLoad, ...]  # [[runtime_loads]] then [[scan]]
    proof: Proof
    path: Path

    def shipped(self) -> tuple[PackFile, ...]:
        """The pack folder's files that go beside the exe: all but not_shipped and licences."""
        prefix = self.source.folder_in_wheel + "/"
        left_out = {dll_key(name) for name in self.not_shipped}
        return tuple(
            item
            for item in self.files
            if item.path.startswith(prefix)
            and dll_key(item.name) not in left_out
            and item.path not in self.licenses
        )

    def licence_files(self) -> tuple[PackFile, ...]:
        return tuple(item for item in self.files if item.path in self.licenses)

    @property
    def size(self) -> int:
        """Bytes the pack adds to a bundle: its shipped files (the VC++ runtime it carries and
        its licences not counted)."""
        return sum(item.size for item in self.shipped())

    def supports(self, ort: str) -> bool:
        """True when ORT `ort` is at or above the pack's minimum."""
        return version_key(ort) >= version_key(self.min_ort)

    def artifact(self) -> Artifact:
        """The pack's wheel as an artifact of the acquire wing: pinned, cached and hash-checked
        like every other. Its `licenses` name (by file name) every member besides DLLs the
        extraction must take: the licence files and the data files."""
        extra = {PurePosixPath(path).name for path in self.licenses}
        extra |= set(self.data_files)
        return Artifact(
            name=f"ep-{self.name}",
            version=self.source.pip.version,
            provides=tuple(
                item.name for item in self.shipped() if dll_key(item.name).endswith(".dll")
            ),
            licenses=tuple(sorted(extra)),
            sources=(self.source.pip,),
            license=self.license,
        )


def available_packs() -> dict[str, Path]:
    """Pack name -> manifest file, for every pack shipped with bundle."""
    return {path.stem: path for path in sorted(resources.eps_dir().glob("*.toml"))}


def load_pack(name: str) -> EpPack:
    """The shipped pack `name`; a ConfigError with the closest name for an unknown one."""
    known = available_packs()
    if name not in known:
        close = difflib.get_close_matches(name, list(known), 1, 0.5)
        guess = f"; did you mean {close[0]}?" if close else "."
        raise ConfigError(
            f"unknown execution-provider pack '{name}'{guess} The packs: "
            f"{', '.join(known)} (manifests/eps/)."
        )
    return load_pack_file(known[name])


def load_pack_file(path: Path) -> EpPack:
    table = load_toml(path)
    target, hardware = table.table("target"), table.table("hardware")
    pack = EpPack(
        name=table.string("name"),
        description=table.string("description"),
        plugin=table.string("plugin"),
        ep_name=table.string("ep_name"),
        registration_name=table.string("registration_name"),
        min_ort=_min_ort(table),
        folder=_folder(table),
        source=_source(table.table("source")),
        driver_dlls=target.strings("driver_dlls"),
        optional_dlls=target.strings("optional_dlls", ()),
        vc_runtime=target.strings("vc_runtime"),
        vc_runtime_in_pack=target.strings("vc_runtime_in_pack"),
        own_folder_only=target.strings("own_folder_only", ()),
        data_files=target.strings("data_files"),
        license=target.string("license"),
        licenses=target.strings("licenses"),
        not_shipped=target.strings("not_shipped", ()),
        hardware=target.finished(_hardware(hardware)),
        files=tuple(_file(item) for item in table.tables("files")),
        loads=_loads(table),
        proof=_proof(table.table("proof")),
        path=path,
    )
    _imported(table.table("imported"))
    table.done()
    _check(pack, table.where)
    return pack


def _min_ort(table: Table) -> str:
    value: str = table.string("min_ort")
    if not _MIN_ORT.fullmatch(value):
        raise ProfileError(
            f"{table.where}: key 'min_ort' must be an ORT release such as 1.24 or 1.24.4, "
            f"not '{value}'."
        )
    return value


def _folder(table: Table) -> str:
    value: str = table.string("folder")
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value or ":" in value:
        raise ProfileError(
            f"{table.where}: key 'folder' must be a relative posix path inside the bundle "
            f"(such as ep/webgpu), not '{value}'."
        )
    return value


def _source(table: Table) -> PackSource:
    if table.string("kind") != "pip":
        raise ProfileError(f"{table.where}: key 'kind' must be pip (a pack is a pinned wheel).")
    pip = PipSource(
        table.string("package"),
        table.string("version"),
        table.string("wheel"),
        table.hexdigest("sha256", 64),
    )
    return table.record(PackSource, pip=pip)


def _hardware(table: Table) -> Hardware:
    hardware = table.record(Hardware)
    if hardware.probe not in PROBES:
        raise ProfileError(f"{table.where}: key 'probe' must be one of {', '.join(PROBES)}.")
    if (hardware.probe == "nvidia-cuda") != (hardware.min_compute_capability is not None):
        raise ProfileError(
            f"{table.where}: key 'min_compute_capability' goes with probe nvidia-cuda, and only "
            "with it."
        )
    return hardware


def _proof(table: Table) -> Proof:
    return table.record(Proof)


def _file(table: Table) -> PackFile:
    item = table.record(PackFile, sha256=table.hexdigest("sha256", 64))
    if PurePosixPath(item.path).name != item.name:
        raise ProfileError(f"{table.where}: key 'name' must be the file name of 'path'.")
    return item


def _loads(table: Table) -> tuple[PackLoad, ...]:
    """[[runtime_loads]] (hand-found, the evidence checked by tools/manifests/ep_facts.py) and
    [[scan]]."""
    loads = []
    for item in table.tables("runtime_loads", []):
        for key in ("string", "encoding"):
            item.string(key)
        item.integer("offset")
        load = PackLoad(item.string("loader"), item.string("loads"), "pack", item.string("why"))
        loads.append(item.finished(load))
    for item in table.tables("scan", []):
        where = item.string("where")
        if where not in _WHERE:
            raise ProfileError(f"{item.where}: key 'where' must be one of {', '.join(_WHERE)}.")
        load = PackLoad(item.string("loader"), item.string("loads"), where, item.string("evidence"))
        loads.append(item.finished(load))
    return tuple(loads)


def _imported(table: Table) -> None:
    """[imported] is a generated summary of [[files]]' import tables: read for its shape."""
    for key in ("pack", "vc_runtime", "system", "driver"):
        table.strings(key)
    table.done()


def _check(pack: EpPack, where: str) -> None:
    """The head's names must be files of the pack: a typo would ship an incomplete pack."""
    if pack.name != pack.path.stem:
        raise ProfileError(f"{where}: key 'name' must be the file's name, '{pack.path.stem}'.")
    names = {dll_key(item.name) for item in pack.files}
    paths = {item.path for item in pack.files}
    named = [("plugin", (pack.plugin,)), ("data_files", pack.data_files)]
    named += [("not_shipped", pack.not_shipped), ("own_folder_only", pack.own_folder_only)]
    for key, values in named:
        for value in values:
            if dll_key(value) not in names:
                raise ProfileError(
                    f"{where}: key '{key}' names {value}, which is not in [[files]]; fix the "
                    "name or regenerate the block (python -m tools.manifests.ep_facts --write)."
                )
    for value in pack.licenses:
        if value not in paths:
            raise ProfileError(f"{where}: key 'licenses' names {value}, which is not in [[files]].")
