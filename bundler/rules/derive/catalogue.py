"""Decide layer: the shipped profile catalogue as data, and how two profiles differ.

The catalogue is one profile per ORT minor release since 1.19 (its newest patch with a Windows
wheel) for each package: onnxruntime-gpu (the flavour of the CUDA major the wheel states),
onnxruntime (CPU) and onnxruntime-directml, and after onnxruntime-directml's last release
(1.24.4) onnxruntime-windowsml, whose versions carry a build stamp (its newest build of each
minor release is pinned). `tools/manifests/derive_catalogue.py` derives it
again and prints `differences` between the shipped and the fresh profiles; `bundle profiles
outdated` compares the releases on the index with it. Profiles are compared as data (pins,
roots, rules, provided DLLs, recorded files, Windows and driver floors), never as text, so a
comment or an order change is no difference.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from bundler.target.loads import RecordedFile
from bundler.target.profiles import (
    Artifact,
    DirSource,
    PipSource,
    Profile,
    UrlSource,
    dll_key,
)

PACKAGES = {
    "gpu": "onnxruntime-gpu",
    "cpu": "onnxruntime",
    "directml": "onnxruntime-directml",
    "windowsml-directml": "onnxruntime-windowsml",
}
SINCE = (1, 19)
# Windows ML's build carries the DirectML line on where onnxruntime-directml stopped (1.24.4,
# manifests/flavours/directml.toml [frozen]): the catalogue takes it from the next minor on.
SINCE_OF = {"windowsml-directml": (1, 25)}


def since(kind: str) -> tuple[int, int]:
    """The first minor release the catalogue covers for a package kind."""
    return SINCE_OF.get(kind, SINCE)


@dataclass(frozen=True)
class Entry:
    """One catalogue profile: its release, flavour kind and what it pins, for listings."""

    name: str
    release: str
    kind: str  # "gpu", "cpu", "directml", or "other" (a hand-written variant)
    cuda: str | None  # the cuda-runtime artifact's version
    cudnn: str | None
    size: int  # bytes of every recorded DLL ([[files]]), 0 when none are recorded
    derived: bool  # written by `bundle profiles new` (else by hand)


def entry(profile: Profile, text: str) -> Entry:
    versions = {artifact.name: artifact.version for artifact in profile.artifacts}
    named = re.fullmatch(r"ort-(\d+(?:\.\d+)*)-(.+)", profile.name)
    release, tail = (named[1], named[2]) if named else (versions.get("onnxruntime", "?"), "")
    kind = "gpu" if tail.startswith("gpu") else tail if tail in PACKAGES else "other"
    if tail.startswith("gpu") and tail.count("-") > 1:
        kind = "other"  # e.g. gpu-cuda12-tensorrt
    return Entry(
        name=profile.name,
        release=release,
        kind=kind,
        cuda=versions.get("cuda-runtime") or _static_cuda(profile),
        cudnn=versions.get("cudnn"),
        size=sum(item.size for item in profile.files),
        derived=text.startswith("# Derived by"),
    )


def _static_cuda(profile: Profile) -> str | None:
    """A GPU profile without a CUDA runtime DLL: the provider links cudart statically (1.27.0)."""
    driver = profile.gpu_driver
    return f"{driver.cuda_major}.x (static cudart)" if driver else None


def profile_facts(profile: Profile) -> dict[str, Any]:
    """What a profile says, as sorted plain data (JSON-able); comments and order left out."""
    return {
        "min_windows": ".".join(map(str, profile.min_windows)),
        "vc_runtime": profile.vc_runtime,
        "roots": sorted(map(dll_key, profile.roots)),
        "driver_dlls": sorted(map(dll_key, profile.driver_dlls)),
        "gpu_driver": (
            {"cuda_major": profile.gpu_driver.cuda_major, "min": profile.gpu_driver.min_version}
            if profile.gpu_driver
            else None
        ),
        "cuda_ep": asdict(profile.cuda_ep) if profile.cuda_ep else None,
        "rules": sorted(
            f"{dll_key(rule.trigger)} -> {dll_key(name)}"
            for rule in profile.runtime_rules
            for name in rule.loads
        ),
        "artifacts": sorted(_artifact(artifact) for artifact in profile.artifacts),
        "pins": sorted(
            _source(artifact.name, source)
            for artifact in profile.artifacts
            for source in artifact.sources
        ),
        "files": sorted(_recorded(item) for item in profile.files),
    }


def _artifact(artifact: Artifact) -> str:
    provides = ", ".join(sorted(map(dll_key, artifact.provides)))
    signed = " (signed)" if artifact.signed else ""
    return f"{artifact.name} {artifact.version}: {provides}{signed}"


def _recorded(item: RecordedFile) -> str:
    text = f"{dll_key(item.name)} {item.size} imports {', '.join(map(dll_key, item.imports))}"
    if item.delay_imports:
        text += f"; delay-imports {', '.join(map(dll_key, item.delay_imports))}"
    return text


def _source(artifact: str, source: UrlSource | PipSource | DirSource) -> str:
    if isinstance(source, PipSource):
        return f"{artifact}: pip {source.package}=={source.version} sha256:{source.sha256}"
    if isinstance(source, UrlSource):
        return f"{artifact}: url {source.url} sha256:{source.sha256}"
    return f"{artifact}: dir %{source.env}%/{source.subdir}"


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Per key, what was removed and added (lists) or the old and new value (the rest)."""
    found: list[dict[str, Any]] = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if isinstance(old, list) and isinstance(new, list):
            found.append(
                {
                    "key": key,
                    "removed": [item for item in old if item not in new],
                    "added": [item for item in new if item not in old],
                }
            )
        else:
            found.append({"key": key, "before": old, "after": new})
    return found
