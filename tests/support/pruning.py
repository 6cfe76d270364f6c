"""Pruning for tests: a small Plan (`plan`: cudnn64_9 loading its sub-libraries at run time, the
CUDA provider naming cuFFT and NVRTC) against a small evidence table (`evidence`) or the
shipped one of a release (`shipped`), the ops of a model (`model`) and the names a decision
pruned (`pruned`)."""

from __future__ import annotations

from pathlib import Path

from bundler.closure.plan import Edge, EdgeKind, Plan, PlanFile, Status
from bundler.pruning.evidence import Evidence, OpLoads, all_evidence, evidence_dir, load_fusions
from bundler.pruning.onnx_models import ModelOps
from bundler.pruning.prune import Pruning, TableSource

SUBS = ("cudnn_adv64_9.dll", "cudnn_cnn64_9.dll", "cudnn_ops64_9.dll", "cudnn_heuristic64_9.dll")
CORE = ("cudnn64_9.dll", "cudnn_graph64_9.dll", "cublasLt64_13.dll")
LAZY = ("cufft64_12.dll", "nvrtc64_130_0.dll")  # named by the CUDA provider, never imported


def plan(*imports: tuple[str, str]) -> Plan:
    """cudnn64_9 loading its sub-libraries at run time, the CUDA provider naming cuFFT and NVRTC,
    plus the given static imports."""
    names = (*CORE, *SUBS, *LAZY, "onnxruntime_providers_cuda.dll")
    files = tuple(PlanFile(n.lower(), n, Status.BUNDLED, size=1000) for n in names)
    runtime = [Edge("cudnn64_9.dll", n.lower(), EdgeKind.RUNTIME) for n in (*SUBS, CORE[1])]
    runtime += [Edge("onnxruntime_providers_cuda.dll", n, EdgeKind.RUNTIME) for n in LAZY]
    static = [Edge(a.lower(), b.lower(), EdgeKind.IMPORT) for a, b in imports]
    edges = (*runtime, *static)
    return Plan("p", "x64", "10.0", (), ("cudnn64_9.dll",), files, edges)


def evidence(options: dict[str, str] | None = None, **rows: tuple[str, ...]) -> TableSource:
    """A table of `rows`, plus a row `Probe` that saw every candidate load (a table speaks only
    for libraries it saw some op load)."""
    seen = {**rows, "Probe": (*SUBS, *LAZY, "nvrtc-builtins64_130.dll")}
    ops = {op: OpLoads(op, loads, op) for op, loads in seen.items()}
    table = Evidence(
        Path("ort-9.9.9-cuda13.toml"), "9.9.9", "13", "9.13.0", "linux-x86_64", "GPU", "d",
        "raw.json", ("cudnn64_9.dll", "cudnn_graph64_9.dll"), ops, options or {},
        load_fusions(),
    )  # fmt: skip
    return TableSource(table)


def model(*ops: str) -> ModelOps:
    return ModelOps(Path("m.onnx"), "0" * 64, frozenset(ops))


def pruned(found: Pruning) -> set[str]:
    return {item.name for item in found.pruned}


def shipped(release: str = "1.31.1") -> TableSource:
    [table] = [t for t in all_evidence([evidence_dir()]) if t.ort == release]
    return TableSource(table)
