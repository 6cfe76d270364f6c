"""The evidence pipeline without a GPU: tools/evidence/gpu_probe.py measures real ONNX Runtime
sessions (the CPU execution provider standing in for CUDA), tools/evidence/evidence_table.py
turns the raw output into a table, and bundle reads that table. The GPU run itself:
docs/pruning.md."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from bundler.pruning.evidence import load_evidence
from tests.support.paths import REPO
from tests.support.skips import require
from tools.evidence import evidence_table


def test_the_probe_and_the_table_writer_make_a_table_bundle_reads(tmp_path: Path) -> None:
    require(find_spec("onnxruntime") is not None, "pip install onnxruntime (the test extra has it)")
    raw = tmp_path / "ort-9.9.9-cuda13.raw.json"
    measured = subprocess.run(
        [sys.executable, "-m", "tools.evidence.gpu_probe", "measure", "--provider",
         "CPUExecutionProvider", "--models", "MatMul,Conv,transformer", "--out", str(raw)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert measured.returncode == 0, measured.stderr
    data = json.loads(raw.read_text())
    assert [(r["model"], r["ok"]) for r in data["results"]] == [
        ("MatMul", True), ("Conv", True), ("transformer", True)
    ]  # fmt: skip
    # what a session maps is read from /proc/self/maps: ORT's own library at least
    assert any("onnxruntime" in path for path in data["results"][0]["all"])
    written = subprocess.run(
        [sys.executable, "-m", "tools.evidence.evidence_table", str(raw), "--cuda", "13"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    table = load_evidence(tmp_path / "ort-9.9.9-cuda13.toml")
    assert table.ort == data["onnxruntime"] and table.raw == raw.name
    measured = {op for op, row in table.ops.items() if row.basis == "measured"}
    assert measured == {"MatMul", "Conv"}  # the app-like model is a proof, not a row
    assert table.ops["Constant"].basis == "folded"  # never runs: ORT makes it an initializer
    assert all(row.loads == () for row in table.ops.values())  # the CPU EP loads no cuDNN


def result(op: str, *mapped: str, ok: bool = True, **settings: Any) -> dict[str, Any]:
    """A raw result as the probe writes it: `mapped` is what the session mapped beyond
    `import onnxruntime` (Linux paths)."""
    before = ["/sp/onnxruntime/capi/libonnxruntime.so.1.31.1"]
    name = "__".join([op, *(f"{k}-{v}" for k, v in settings.items())])
    everything = [*before, "/sp/nvidia/cudnn/lib/libcudnn.so.9", *mapped]
    return {"model": name, "op": op, "settings": settings, "options": {}, "ok": ok,
            "before": before, "all": everything, "error": None if ok else "failed"}  # fmt: skip


def test_a_row_is_the_union_of_its_configurations_and_says_they_differ() -> None:
    """Issue 28's case: ReduceSum over the last axis runs ORT's own kernel, over axes (0, 2) of
    a 4-D float tensor cuDNN's reduction (cudnn_ops). One sample would miss the second."""
    ops = "/sp/nvidia/cudnn/lib/libcudnn_ops.so.9"
    rows = evidence_table.measured_rows([
        result("ReduceSum", axes="3", rank=4),
        result("ReduceSum", ops, axes="0-2", rank=4),
        result("ReduceSum", "/sp/nvidia/cudnn/lib/libcudnn_adv.so.9", ok=False, axes="1"),
        result("Relu", rank=2),
        result("Relu", rank=4),
    ])  # fmt: skip
    assert rows["ReduceSum"]["loads"] == ["cudnn64_9.dll", "cudnn_ops64_9.dll"]
    assert rows["ReduceSum"]["configurations"] == 2  # the failed one counts for nothing
    assert rows["ReduceSum"]["config_dependent"] and rows["ReduceSum"]["failed"] == 1
    assert rows["Relu"] == {
        "loads": ["cudnn64_9.dll"], "configurations": 2, "config_dependent": False,
        "model": "2 configurations", "failed": 0, "cpu_only": False,
        "by_type": {"float": ["cudnn64_9.dll"]},
    }  # fmt: skip
    assert evidence_table.cudnn_text(91300) == "9.13.0"


def kernels() -> dict[str, Any]:
    """A release whose CUDA EP has Relu only, and schemas for Relu, NonZero (not an ONNX
    function: runs on the CPU), HardSwish (an ONNX function: ORT inlines it) and Constant."""
    return {
        "onnxruntime": "9.9.9",
        "kernels": [{"op": "Relu", "domain": "", "provider": "CUDAExecutionProvider",
                     "since": 14, "until": 2**31 - 1, "types": {"T": ["tensor(float)"]}}],
        "schemas": [{"op": op, "domain": "", "since": 1, "deprecated": False}
                    for op in ("Relu", "NonZero", "HardSwish", "Constant")],
    }  # fmt: skip


def test_an_op_without_a_cuda_kernel_gets_a_derived_row_that_says_so() -> None:
    require(find_spec("onnx") is not None, 'pip install "ort-bundle[models]"')
    derived = evidence_table.derived_rows(kernels(), {"Relu"})
    assert derived["NonZero"]["basis"] == "cpu-only" and "9.9.9" in derived["NonZero"]["note"]
    assert derived["Constant"]["basis"] == "folded"
    assert "HardSwish" not in derived  # a function runs as its body, maybe on the GPU
    assert "Relu" not in derived  # measured


def test_a_model_with_a_cpu_only_op_prunes_as_if_the_op_were_absent(tmp_path: Path) -> None:
    require(find_spec("onnx") is not None, 'pip install "ort-bundle[models]"')
    raw = {"onnxruntime": "9.9.9", "started": "2026-12-02T00:00:00Z", "gpu": "GPU",
           "cudnn_version": 91300, "results": [
               result("Relu", rank=2),
               result("Conv", "/sp/nvidia/cudnn/lib/libcudnn_ops.so.9"),
               result("com.microsoft:FusedConv", "/sp/nvidia/cudnn/lib/libcudnn_cnn.so.9"),
           ]}  # fmt: skip
    path = tmp_path / "ort-9.9.9-cuda13.toml"
    path.write_text(evidence_table.table(raw, kernels(), "raw.json", "13"))
    evidence = load_evidence(path)
    assert evidence.ops["NonZero"].basis == "cpu-only" and evidence.ops["NonZero"].loads == ()
    with_it = evidence.loads_for({"Relu", "NonZero"})
    assert with_it == evidence.loads_for({"Relu"}) and with_it[1] == ()
    assert evidence.loads_for({"Relu", "HardSwish"})[1] == ("HardSwish",)  # no row: unknown
