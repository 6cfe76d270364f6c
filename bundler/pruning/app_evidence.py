"""Read/decide layer: the app evidence file that `bundle measure` writes: which CUDA and cuDNN
libraries each of the app's own models loaded, measured with ONNX Runtime on a real machine
(docs/measuring.md), and whether a build may prune from it.

The file is JSON (schema_version 1, sorted keys): where and with what it was measured (tool,
measured, platform, gpu, ort, cudnn, provider, provider_options, dims) and one entry per model
(name, sha256, loaded: Windows DLL names, modules: every mapped path, nodes, providers). It is
evidence only for the models it names, byte for byte (SHA-256), and only for the ORT release and
cuDNN major.minor it was measured with, on the CUDA execution provider: `problems` says, one
sentence each, where a build's inputs differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bundler.errors import InputFileError
from bundler.pruning.onnx_models import ModelOps

SCHEMA_VERSION = 1
CUDA_PROVIDER = "CUDAExecutionProvider"
_MEASURE = "run bundle measure again"
_T = TypeVar("_T")


@dataclass(frozen=True)
class MeasuredModel:
    """One model as measured: its file name and SHA-256, and the DLLs its process loaded."""

    name: str
    sha256: str
    loaded: tuple[str, ...]  # Windows DLL names of the CUDA/cuDNN libraries, e.g. cudnn64_9.dll
    nodes: int = 0  # how many nodes ran (after ORT's graph optimizations)
    providers: tuple[str, ...] = ()  # the providers the nodes ran on


@dataclass(frozen=True)
class AppEvidence:
    """An app evidence file, read and checked (read_app_evidence)."""

    path: Path
    tool: str
    measured: str  # UTC, ISO 8601
    platform: str  # e.g. linux-x86_64, windows-amd64
    gpu: str | None
    ort: str  # the ORT release measured
    cudnn: str | None  # the cuDNN version loaded, None when none was
    provider: str  # e.g. CUDAExecutionProvider
    provider_options: dict[str, str]
    dims: dict[str, int]
    models: tuple[MeasuredModel, ...]

    @property
    def name(self) -> str:
        return self.path.name

    def describe(self) -> str:
        """Where and with what it was measured, for a reason that names it."""
        where = ", ".join(filter(None, (self.gpu, self.platform)))
        return (
            f"{self.name} (ORT {self.ort}, cuDNN {self.cudnn or 'none'}, {self.provider}, "
            f"measured {self.measured} on {where})"
        )

    @property
    def loaded(self) -> frozenset[str]:
        """What any of the models loaded, lower case (Windows names are case-insensitive)."""
        return frozenset(name.lower() for model in self.models for name in model.loaded)


def read_app_evidence(path: Path) -> AppEvidence:
    """The evidence file at `path`. InputFileError for a file that is missing, unreadable, not
    JSON, of another schema_version or missing a field."""
    document = _document(path)
    models = tuple(_model(path, item) for item in _field(path, document, "models", list))
    return AppEvidence(
        path=path,
        tool=_field(path, document, "tool", str),
        measured=_field(path, document, "measured", str),
        platform=_field(path, document, "platform", str),
        gpu=_optional(path, document, "gpu"),
        ort=_field(path, document, "ort", str),
        cudnn=_optional(path, document, "cudnn"),
        provider=_field(path, document, "provider", str),
        provider_options=_strings(path, _field(path, document, "provider_options", dict)),
        dims=_numbers(path, _field(path, document, "dims", dict)),
        models=models,
    )


def problems(
    evidence: AppEvidence, models: Sequence[ModelOps], ort: str, cudnn: str | None
) -> list[str]:
    """Why `evidence` is no evidence for a build of `models` with ORT `ort` and cuDNN
    `cudnn`: one sentence per mismatch; an empty list when it is."""
    found = _model_problems(evidence, models)
    where = evidence.name
    if evidence.ort != ort:
        found.append(
            f"{where} was measured with ORT {evidence.ort}, the build is for ORT {ort}: "
            f"{_MEASURE} with onnxruntime-gpu=={ort}."
        )
    if cudnn is not None and _major_minor(evidence.cudnn) != _major_minor(cudnn):
        seen = f"cuDNN {evidence.cudnn}" if evidence.cudnn else "no cuDNN loaded"
        found.append(
            f"{where} was measured with {seen}, the build ships cuDNN {cudnn}: {_MEASURE} "
            "with the profile's libraries (--libs)."
        )
    if evidence.provider != CUDA_PROVIDER:
        found.append(
            f"{where} was measured on {evidence.provider}, which is no evidence for a GPU "
            f"bundle: {_MEASURE} with --provider cuda on a machine with an NVIDIA GPU."
        )
    return found


def _model_problems(evidence: AppEvidence, models: Sequence[ModelOps]) -> list[str]:
    where = evidence.name
    measured = {model.name.lower(): model for model in evidence.models}
    given = {model.path.name.lower() for model in models}
    found = []
    for model in models:
        entry = measured.get(model.path.name.lower())
        if entry is None:
            found.append(f"{model.path.name} is not in {where}: {_MEASURE} with it.")
        elif entry.sha256 != model.sha256:
            found.append(
                f"{model.path.name} changed since it was measured (sha256 {entry.sha256[:12]} "
                f"in {where}, {model.sha256[:12]} now): {_MEASURE}."
            )
    for entry in evidence.models:
        if entry.name.lower() not in given:
            found.append(
                f"{where} measured {entry.name}, which the build is not given: give every "
                f"model the app runs with --model, and {_MEASURE} with exactly those."
            )
    return found


def _major_minor(version: str | None) -> str | None:
    return ".".join(version.split(".")[:2]) if version else None


def _document(path: Path) -> dict[str, Any]:
    measure = f"write it with bundle measure ... --out {path.name}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputFileError(f"{path}: no such file; {measure}.") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: cannot be read ({exc}); {measure}.") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{path}: not an app evidence file ({exc}); {measure}.") from exc
    if not isinstance(document, dict):
        raise InputFileError(f"{path}: not an app evidence file (no JSON object); {measure}.")
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputFileError(
            f"{path}: schema_version {version}, this bundle reads {SCHEMA_VERSION}; "
            f"{_MEASURE} with this bundle."
        )
    return document


def _field(path: Path, table: dict[str, Any], key: str, kind: type[_T]) -> _T:
    value = table.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise _malformed(path, key, kind.__name__)
    return value


def _malformed(path: Path, key: str, kind: str) -> InputFileError:
    return InputFileError(
        f"{path}: '{key}' is missing or not a {kind}; {_MEASURE} (the file was edited, or not "
        "written by bundle measure)."
    )


def _optional(path: Path, table: dict[str, Any], key: str) -> str | None:
    return None if table.get(key) is None else _field(path, table, key, str)


def _strings(path: Path, table: dict[str, Any]) -> dict[str, str]:
    return {key: _field(path, table, key, str) for key in table}


def _numbers(path: Path, table: dict[str, Any]) -> dict[str, int]:
    return {key: _field(path, table, key, int) for key in table}


def _texts(path: Path, table: dict[str, Any], key: str) -> tuple[str, ...]:
    values = _field(path, table, key, list)
    if not all(isinstance(value, str) for value in values):
        raise _malformed(path, key, "list of strings")
    return tuple(values)


def _model(path: Path, entry: Any) -> MeasuredModel:
    if not isinstance(entry, dict):
        raise _malformed(path, "models", "list of objects")
    return MeasuredModel(
        name=_field(path, entry, "name", str),
        sha256=_field(path, entry, "sha256", str),
        loaded=_texts(path, entry, "loaded"),
        nodes=_field(path, entry, "nodes", int),
        providers=_texts(path, entry, "providers"),
    )
