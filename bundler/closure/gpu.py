"""Decide layer: which GPUs a bundle's CUDA code serves. From the SASS and PTX each bundled DLL
carries (read by bundler.binary.fatbin, recorded in the lock), a compute capability is served
natively,
only by JIT compilation of PTX at first use, or not at all; declared target GPUs (`gpus` in a
profile or bundle.toml) that are not served natively are findings (BA701, BA702). The rules are
NVIDIA's binary and PTX compatibility: docs/field-notes.md#fatbin."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bundler.binary.fatbin import GpuCode, serves
from bundler.errors import ConfigError
from bundler.findings import Finding, finding
from bundler.target import resources
from bundler.target.manifest import load_toml
from bundler.target.profiles import matches

# Compute capabilities of NVIDIA GPUs since Maxwell (CUDA C++ Programming Guide, "Compute
# Capabilities"; the Jetson parts 5.3, 6.2, 7.2, 8.7 and 10.1/11.0 included): the range the
# audit reports is taken over these.
CAPABILITIES: tuple[tuple[int, int], ...] = (
    (5, 0), (5, 2), (5, 3), (6, 0), (6, 1), (6, 2), (7, 0), (7, 2), (7, 5), (8, 0), (8, 6),
    (8, 7), (8, 9), (9, 0), (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1),
)  # fmt: skip

_TARGET = re.compile(r"sm_(\d+)(\d)")
_UNSERVED = "carry neither SASS for it nor PTX the driver can compile for it"
_JIT_ONLY = "run only after the driver compiles their PTX at first use"


def parse_target(text: str, where: str = "gpus") -> tuple[int, int]:
    """(8, 6) for "sm_86", (12, 0) for "sm_120"; ConfigError naming `where` otherwise."""
    match = _TARGET.fullmatch(text.strip().lower())
    if not match:
        raise ConfigError(
            f"{where}: {text!r} is not a GPU architecture; write it as sm_XY (e.g. sm_86 for "
            "compute capability 8.6, sm_120 for 12.0)."
        )
    return int(match.group(1)), int(match.group(2))


def sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def dotted(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


@dataclass(frozen=True)
class Service:
    """How a bundle's DLLs serve one compute capability: the DLLs in each state."""

    capability: tuple[int, int]
    jit: tuple[str, ...]  # DLLs whose code for it is PTX only
    none: tuple[str, ...]  # DLLs with no code for it

    @property
    def state(self) -> str:
        return "none" if self.none else "jit" if self.jit else "native"


def opaque_patterns() -> tuple[str, ...]:
    """Name patterns of the DLLs whose fat binaries do not tell which GPUs they serve
    (manifests/cuda/gpu_code.toml, each with its measurement)."""
    table = load_toml(resources.manifests_dir() / "cuda" / "gpu_code.toml")
    patterns = []
    for item in table.tables("opaque"):
        patterns.append(item.string("name"))
        item.string("why")
        item.done()
    table.done()
    return tuple(patterns)


def judged(code: Mapping[str, GpuCode]) -> dict[str, GpuCode]:
    """The DLLs a GPU verdict may rest on: those with code, less the opaque ones (the table is
    read once a call, not kept between calls)."""
    opaque = opaque_patterns()
    return {
        name: item
        for name, item in code.items()
        if (item.sass or item.ptx) and not any(matches(p, name) for p in opaque)
    }


def service(code: Mapping[str, GpuCode], capability: tuple[int, int]) -> Service:
    states = {name: serves(item, capability) for name, item in sorted(judged(code).items())}
    return Service(
        capability,
        tuple(name for name, state in states.items() if state == "jit"),
        tuple(name for name, state in states.items() if state == "none"),
    )


def coverage(code: Mapping[str, GpuCode]) -> dict[str, list[str]]:
    """{"native": ["5.2", ...], "jit": [...], "none": [...]} over CAPABILITIES."""
    found: dict[str, list[str]] = {"native": [], "jit": [], "none": []}
    if code:
        for capability in CAPABILITIES:
            found[service(code, capability).state].append(dotted(capability))
    return found


def target_findings(targets: Iterable[str], code: Mapping[str, GpuCode]) -> list[Finding]:
    """BA701 for a target some DLL has no code for, BA702 for one served by PTX JIT only."""
    findings = []
    for target in targets:
        capability = parse_target(target)
        served = service(code, capability)
        if served.none:
            check, names, what = "BA701", served.none, _UNSERVED
        elif served.jit:
            check, names, what = "BA702", served.jit, _JIT_ONLY
        else:
            continue
        gpu = f"{sm(capability)} (compute capability {dotted(capability)})"
        message = f"{gpu}: {', '.join(names)} {what}"
        findings.append(finding(check, names, message, _carried(names, code), gpu=sm(capability)))
    return findings


def _carried(names: Iterable[str], code: Mapping[str, GpuCode]) -> tuple[str, ...]:
    return tuple(
        f"{name}: SASS {' '.join(code[name].sass) or '-'}; PTX {' '.join(code[name].ptx) or '-'}"
        for name in names
    )
