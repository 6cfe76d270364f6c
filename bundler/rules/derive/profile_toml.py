"""Decide layer: render a derived profile as TOML in the schema bundler.target.profiles reads, with
a
comment on every fact saying where it came from: the index page and SHA-256 for a pin, the scan
evidence (file, string, offset) for a root or rule, the linker version for the VC++ floor, the
flavour file for what was chosen rather than measured. The user reviews the file; nothing here is
read back except by the profile loader."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bundler.rules.derive.build_info import BuildInfo
from bundler.rules.derive.facts import Facts, Load, Windows, as_pattern
from bundler.rules.derive.flavours import ComponentSet, Flavour, LocalInstall, Package
from bundler.rules.derive.pins import WheelPin
from bundler.target.loads import RecordedFile
from bundler.target.profiles import CudaEp, dll_key


@dataclass(frozen=True)
class DerivedArtifact:
    """A package of the component set that provides a DLL of the closure, with its pin."""

    package: Package
    pin: WheelPin
    members: dict[str, str]  # key -> the DLL's path inside the wheel
    signed: bool = False  # every DLL it provides carries an Authenticode certificate table
    # keys of the VC++ runtime DLLs it provides for the app alone (no DLL of the closure
    # imports the runtime); empty for an artifact of the closure
    for_app: tuple[str, ...] = ()


def q(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


@dataclass(frozen=True)
class Rendering:
    """What the derivation chose, and from what, for the profile's header and top keys."""

    command: str
    name: str
    ort: str  # the ORT release (1.30.0)
    version: str  # the ORT package's version (1.30.0, or 1.30.0.202609102321 with a build stamp)
    flavour: Flavour
    components: ComponentSet
    index_url: str
    build: BuildInfo
    chosen: str  # which component set, and why
    windows: Windows  # the minimum Windows and the DLLs that raise it
    cuda_ep: CudaEp | None = None  # measured on the CUDA provider and its onnxruntime.dll


def render_profile(
    how: Rendering,
    facts: Facts,
    artifacts: Sequence[DerivedArtifact],
    files: Sequence[RecordedFile] = (),
) -> str:
    out: list[str] = []
    out += _header(how)
    out += _top(how, facts)
    out += _rules(facts, how.flavour)
    for artifact in artifacts:
        out += _artifact(artifact, facts, how.flavour)
    if files:
        out += recorded_files_toml(files, f"Measured by `{how.command}` on the pinned wheels")
    return "\n".join(out) + "\n"


RECORDED_MARKER = "# --- [[files]]: the pinned DLLs' import tables"


def recorded_files_toml(files: Sequence[RecordedFile], how: str) -> list[str]:
    """The [[files]] block: one table per pinned DLL with its size and import tables (API
    sets left out). It starts with RECORDED_MARKER, so a tool can replace it as a whole."""
    out = [
        "",
        RECORDED_MARKER,
        f"# {how}; sizes are the wheels' files.",
        "# What each DLL loads stays known when it is absent from a folder (bundle audit).",
        "# API sets are left out.",
    ]
    for item in files:
        out += ["", "[[files]]", f"name = {q(item.name)}", f"artifact = {q(item.artifact)}"]
        out.append(f"size = {item.size}")
        for key, names in (("imports", item.imports), ("delay_imports", item.delay_imports)):
            if names:
                out.append(f"{key} = [{', '.join(map(q, names))}]")
    return out


def _header(how: Rendering) -> list[str]:
    build = how.build
    stated = (
        f"CUDA {build.cuda_version}, cuDNN {build.cudnn_version or '?'}"
        if build.cuda_version
        else "no CUDA"
    )
    return [
        f"# Derived by `{how.command}`: review every fact before use.",
        f"# The build: {build.source()} states {stated}.",
        f"# Chosen, not measured: flavour {how.flavour.name} ({how.flavour.path.name}); "
        f"{how.chosen}.",
        f"# Pins: the package index {how.index_url} (PEP 691), each wheel downloaded and verified.",
        "# Roots, rules and provided DLLs: `bundle scan` and the import tables of the DLLs.",
        "# No url sources: the release zip's and NVIDIA's archives' SHA-256 could not be pinned",
        "# from where this was derived (not reachable); the pinned wheels carry the same release.",
        "# Not derived either: [[scan_exceptions]]; add them by hand with their own provenance.",
        "schema_version = 1",
    ]


def _top(how: Rendering, facts: Facts) -> list[str]:
    flavour = how.flavour
    description = flavour.description.format(
        ort=how.ort, version=how.version, components=how.components.summary
    )
    out = [
        f"name = {q(how.name)}",
        f"description = {q(description)}",
        f"architecture = {q(flavour.architecture)}  # flavour {flavour.name}",
        f"min_windows = {q(how.windows.text)}  # {how.windows.why or flavour.min_windows_why}",
        f"vc_runtime = {q(flavour.vc_runtime)}  # flavour {flavour.name}",
        "",
        "# Always shipped: the front DLL and the providers it loads by full path (no import table",
        "# shows them).",
        "roots = [",
        *(f"    {q(load.name)},  # {load.evidence}" for load in facts.roots),
        "]",
    ]
    for load in facts.left_out:
        out.append(
            f"# Left out: {load.name} ({load.evidence}): not an execution provider of "
            f"flavour {flavour.name} ({', '.join(flavour.execution_providers) or 'none'})."
        )
    drivers = ", ".join(q(name) for name in flavour.driver_dlls)
    out += [
        "",
        f"# flavour {flavour.name}: the GPU driver's DLLs, required on the target, never shipped.",
        f"driver_dlls = [{drivers}]",
    ]
    driver = flavour.gpu_driver
    if driver is not None:
        out += [
            "",
            f"[gpu_driver]  # flavour {flavour.name}",
            f"dll = {q(driver.dll)}",
            f"cuda_major = {driver.cuda_major}",
            f"min_version = {q(driver.min_version)}",
            f"source = {q(driver.source)}",
            f"require = {'true' if driver.require else 'false'}",
        ]
    return out + _cuda_ep(how.cuda_ep)


def _cuda_ep(found: CudaEp | None) -> list[str]:
    """[cuda_ep]: each value with the measurement it comes from."""
    if found is None:
        return []
    exported = "exports" if found.plugin_capable else "does not export"
    out = [
        "",
        "[cuda_ep]  # measured on the pinned onnxruntime_providers_cuda.dll and onnxruntime.dll",
        f"plugin_capable = {'true' if found.plugin_capable else 'false'}  # "
        f"onnxruntime_providers_cuda.dll {exported} CreateEpFactories",
    ]
    if found.default_mode is not None:
        flag = "has a" if found.default_mode == "plugin" else "has no"
        out.append(
            f'default_mode = {q(found.default_mode)}  # onnxruntime.dll\'s "ORT Build Info:" '
            f"string {flag} cuda-plugin-ep= flag"
        )
    return out


def _rules(facts: Facts, flavour: Flavour) -> list[str]:
    out = ["", "# What no import table shows: DLLs loaded with LoadLibrary at run time."]
    for trigger, loads in _grouped(facts.rules):
        out += [
            "",
            "[[runtime_rules]]",
            f"trigger = {q(trigger)}",
            "loads = [",
        ]
        for shown, load in _patterned(loads, flavour.name_patterns):
            note = "" if shown == load.name else f"; written as flavour {flavour.name}'s pattern"
            out.append(f"    {q(shown)},  # {load.evidence}{note}")
        why = f"{trigger} names these DLLs and does not import them (found by bundle scan)"
        out += ["]", f"why = {q(why)}"]
    if facts.driver_loads:
        out += ["", "# Driver DLLs also named: no rule needed (never shipped; see driver_dlls):"]
        out += [f"# - {it.trigger} -> {it.name}: {it.evidence}" for it in facts.driver_loads]
    return out


def _grouped(loads: Iterable[Load]) -> list[tuple[str, list[Load]]]:
    groups: dict[str, tuple[str, list[Load]]] = {}
    for load in loads:
        groups.setdefault(dll_key(load.trigger), (load.trigger, []))[1].append(load)
    return list(groups.values())


def _patterned(loads: Iterable[Load], patterns: Sequence[str]) -> list[tuple[str, Load]]:
    shown: dict[str, tuple[str, Load]] = {}
    for load in loads:
        name = as_pattern(load.name, patterns)
        shown.setdefault(dll_key(name), (name, load))
    return list(shown.values())


def _artifact(artifact: DerivedArtifact, facts: Facts, flavour: Flavour) -> list[str]:
    package = artifact.package
    provided = [name for name in facts.closure if facts.owners[dll_key(name)] == package.artifact]
    provided += [artifact.members[key].rsplit("/", 1)[-1] for key in artifact.for_app]
    pin = artifact.pin
    size = f", {pin.size} bytes" if pin.size is not None else ""
    out = [
        "",
        "[[artifacts]]",
        f"name = {q(package.artifact)}",
        f"version = {q(package.version)}  # {package.why or 'the ORT release asked for'}",
        f"supplier = {q(package.supplier)}  # flavour {flavour.name}",
        f"license = {q(package.license)}  # flavour {flavour.name}",
        *(
            [
                "signed = true  # every DLL it provides carries an Authenticode signature in "
                "the pinned wheel (measured; bundle audit --signatures verifies it)"
            ]
            if artifact.signed
            else []
        ),
        "provides = [",
    ]
    written: set[str] = set()
    for name in provided:
        shown = as_pattern(name, flavour.name_patterns)
        if dll_key(shown) not in written:
            written.add(dll_key(shown))
            out.append(f"    {q(shown)},  # {pin.wheel}: {artifact.members[dll_key(name)]}")
    if artifact.for_app:
        out.append("    # for an app that imports the VC++ runtime: no DLL of the release does")
    out += [
        "]",
        f"licenses = [{', '.join(map(q, package.licenses))}]  # flavour {flavour.name}",
        "",
        "[[artifacts.sources]]",
        'kind = "pip"',
        f"package = {q(pin.package)}",
        f"version = {q(pin.version)}",
        f"wheel = {q(pin.wheel)}  # {pin.page}{size}",
        f"sha256 = {q(pin.sha256)}  # {pin.page}, verified by download",
    ]
    for local in package.local:
        out += _local(local, artifact, facts)
    return out


def _local(local: LocalInstall, artifact: DerivedArtifact, facts: Facts) -> list[str]:
    out = [
        "",
        "[[artifacts.sources]]",
        'kind = "dir"',
        f"env = {q(local.env)}",
        f"subdir = {q(local.subdir)}",
    ]
    if local.why:
        out.append(f"# flavour: {local.why}")
    minimum = local.min_file_version
    if artifact.package.vc_runtime and facts.floor is not None:
        major, minor = facts.floor.version
        minimum = f"{major}.{minor}.0.0"
        out.append(
            f"# linker: {facts.floor.binary} has MSVC linker {major}.{minor}, the newest among "
            "the DLLs importing the VC++ runtime"
        )
    if minimum is not None:
        out.append(f"min_file_version = {q(minimum)}")
    if local.max_file_version is not None:
        out.append(f"max_file_version = {q(local.max_file_version)}")
    return out
