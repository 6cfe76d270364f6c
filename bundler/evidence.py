"""Read layer: the load evidence of manifests/evidence/: which cuDNN sub-libraries ONNX
Runtime's CUDA execution provider loads for each op type, as measured on a real GPU.

One TOML file per ORT release measured, written by tools/evidence_table.py from the raw output
of tools/gpu_probe.py (committed beside it): one tiny model per op type, run once in a fresh
process with the CUDA EP, and what the process had mapped after creating the session and after
the first run. Library names are the Windows DLL names of the same libraries (libcudnn_ops.so.9
is cudnn_ops64_9.dll). docs/pruning.md describes the measurement and its limits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bundler.manifest import Table, load_toml
from bundler.resources import manifests_dir


@dataclass(frozen=True)
class OpLoads:
    """One op type's row: the cuDNN libraries its model loaded, and the raw result it came from."""

    op: str
    loads: tuple[str, ...]  # DLL names, e.g. "cudnn_ops64_9.dll"
    model: str  # the probe's model (its name in the raw output)


@dataclass(frozen=True)
class Evidence:
    """One measured release: where and with what it was measured, and a row per op type."""

    path: Path
    ort: str  # the ORT release, e.g. "1.31.1"
    cuda: str  # the CUDA major of the EP build measured, e.g. "13"
    cudnn: str  # the cuDNN version the measurement ran with
    platform: str  # where it ran, e.g. "linux-x86_64"
    gpu: str
    measured: str  # the date
    raw: str  # the probe's raw output, beside this file
    every_session: tuple[str, ...]  # what every session loaded (never pruned anyway)
    ops: dict[str, OpLoads]

    @property
    def name(self) -> str:
        return self.path.name

    def cudnn_major_minor(self) -> str:
        return ".".join(self.cudnn.split(".")[:2])


EVIDENCE_ENV = "BUNDLE_EVIDENCE_DIR"


def evidence_dir() -> Path:
    """The tables shipped with bundle."""
    return manifests_dir() / "evidence"


def evidence_dirs() -> list[Path]:
    """Where tables are read: $BUNDLE_EVIDENCE_DIR first (a team's own measurement with
    tools/gpu_probe.py), then the shipped ones."""
    own = os.environ.get(EVIDENCE_ENV)
    return [Path(own), evidence_dir()] if own else [evidence_dir()]


_TEXT_KEYS = ("ort", "cuda", "cudnn", "platform", "gpu", "measured", "raw")


def load_evidence(path: Path) -> Evidence:
    table = load_toml(path)
    ort, cuda, cudnn, platform, gpu, measured, raw = map(table.string, _TEXT_KEYS)
    every = table.strings("every_session")
    rows = {row.op: row for row in map(_op_row, table.tables("ops"))}
    return table.finished(
        Evidence(path, ort, cuda, cudnn, platform, gpu, measured, raw, every, rows)
    )


def _op_row(table: Table) -> OpLoads:
    return table.finished(
        OpLoads(table.string("op"), table.strings("loads"), table.string("model"))
    )


def all_evidence(folders: list[Path] | None = None) -> list[Evidence]:
    """Every evidence table of `folders` (default: evidence_dirs()), each folder's by name."""
    found = []
    for folder in folders if folders is not None else evidence_dirs():
        found += [load_evidence(path) for path in sorted(folder.glob("*.toml"))]
    return found
