"""The evidence pipeline without a GPU: tools/gpu_probe.py measures real ONNX Runtime sessions
(the CPU execution provider standing in for CUDA), tools/evidence_table.py turns the raw output
into a table, and bundle reads that table. The GPU run itself: docs/pruning.md."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

from bundler.evidence import load_evidence
from tests.conftest import REPO, require

TOOLS = REPO / "tools"


def test_the_probe_and_the_table_writer_make_a_table_bundle_reads(tmp_path: Path) -> None:
    require(find_spec("onnxruntime") is not None, "pip install onnxruntime (the test extra has it)")
    raw = tmp_path / "ort-9.9.9-cuda13.raw.json"
    measured = subprocess.run(
        [sys.executable, str(TOOLS / "gpu_probe.py"), "measure", "--provider",
         "CPUExecutionProvider", "--models", "MatMul,Conv,transformer", "--out", str(raw)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert measured.returncode == 0, measured.stderr
    data = json.loads(raw.read_text())
    assert [(r["model"], r["ok"]) for r in data["results"]] == [
        ("MatMul", True), ("Conv", True), ("transformer", True)
    ]  # fmt: skip
    # what a session maps is read from /proc/self/maps: ORT's own library at least
    assert any("onnxruntime" in path for path in data["results"][0]["all"])
    written = subprocess.run(
        [sys.executable, str(TOOLS / "evidence_table.py"), str(raw), "--cuda", "13"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    table = load_evidence(tmp_path / "ort-9.9.9-cuda13.toml")
    assert table.ort == data["onnxruntime"] and table.raw == raw.name
    assert set(table.ops) == {"MatMul", "Conv"}  # the app-like model is a proof, not a row
    assert all(row.loads == () for row in table.ops.values())  # the CPU EP loads no cuDNN


def test_the_table_writer_names_cudnn_libraries_by_their_windows_names() -> None:
    sys.path.insert(0, str(TOOLS))
    try:
        import evidence_table
    finally:
        sys.path.remove(str(TOOLS))
    assert evidence_table.dll_name("/x/nvidia/cudnn/lib/libcudnn_ops.so.9") == "cudnn_ops64_9.dll"
    assert evidence_table.dll_name("/usr/lib/libcudnn.so.9.14.0") == "cudnn64_9.dll"
    name = "libcudnn_engines_precompiled.so.9"
    assert evidence_table.dll_name(name) == "cudnn_engines_precompiled64_9.dll"
    assert evidence_table.dll_name("/x/libcublasLt.so.13") is None
    assert evidence_table.cudnn_text(91300) == "9.13.0"
