"""The shipped evidence table of ORT 1.31.1 / CUDA 13 against what it must cover (issue 42):
every ONNX op of the installed onnx package and every ONNX or com.microsoft op with a CUDA
kernel has a row or a recorded reason; configurations measured again on the same machine load
the same libraries; the GPU proof's models (a ViT-B/16 export, a 4-bit LLM) prune and ran
from their pruned folders. The data are the GPU machine's (manifests/evidence/README.md); the
decisions are bundle's own, made here.
"""

from __future__ import annotations

import json
import lzma
import tomllib
from typing import Any

import pytest

from bundler.pruning.evidence import evidence_dir
from tests.support.pruning import model, plan, pruned, shipped
from tests.support.skips import require_module
from tools.evidence import evidence_table
from tools.evidence.kernels_source import kernels_of

EVIDENCE = evidence_dir()
PROOF = EVIDENCE / "gpu-proof"
TABLE = EVIDENCE / "ort-1.31.1-cuda13.toml"


def raw(name: str) -> dict[str, Any]:
    data = json.loads(lzma.decompress((EVIDENCE / name).read_bytes()))
    assert isinstance(data, dict)
    return data


def kernel_list() -> dict[str, Any]:
    return raw("ort-1.31.1-cuda13.kernels.json.xz")


def test_every_onnx_op_and_every_cuda_contrib_op_has_a_row_or_a_reason() -> None:
    """The ops a model may hold that the table must speak for: a row (measured, cpu-only or
    folded) or an [[unmeasured]] entry saying why there is none."""
    require_module("onnx", 'the onnx package\'s schemas: pip install "ort-bundle[models]"')
    table = shipped().evidence
    owed = evidence_table.wanted_ops(evidence_table.documented(kernel_list()))
    assert "com.microsoft:MatMulNBitsQkv" in owed  # newer than the documentation: owed a reason
    missing = sorted(owed - set(table.ops) - set(table.unmeasured))
    assert not missing, f"{TABLE.name} has neither a row nor a reason for {missing}"
    assert all(reason.strip() for reason in table.unmeasured.values())


def test_the_kernel_list_names_its_source_and_the_cuda_eps_ops() -> None:
    kernels = kernel_list()
    assert kernels["onnxruntime"] == "1.31.1"
    assert len(kernels["kernels_from"]["commit"]) == 40
    ops = {(k["domain"], k["op"]) for k in kernels["kernels"]}
    for op in ("Conv", "If", "Loop", "Scan", "Mod", "RoiAlign"):  # CUDA kernels in ORT 1.31
        assert ("", op) in ops, op
    for op in ("GroupQueryAttention", "MatMulNBits", "RotaryEmbedding", "GatherBlockQuantized"):
        assert ("com.microsoft", op) in ops, op
    assert ("", "StringNormalizer") not in ops  # a CPU-only op


def test_the_ops_of_issue_42_have_measured_rows() -> None:
    """Control flow, detection, quantized, everyday and LLM ops: measured on the GPU now."""
    rows = shipped().evidence.ops
    ops = ["If", "Loop", "Scan", "RoiAlign", "MaxRoiPool", "MaxUnpool", "MatMulInteger", "Mod"]
    ops += ["CumProd", "Compress", "ReverseSequence", "RandomNormal", "RandomUniform"]
    ops += [f"com.microsoft:{op}" for op in ("GroupQueryAttention", "MatMulNBits")]
    ops += [f"com.microsoft:{op}" for op in ("RotaryEmbedding", "GatherBlockQuantized")]
    for op in ops:
        assert op in rows and rows[op].basis == "measured", op
        assert rows[op].configurations >= 1


def test_configurations_measured_again_on_the_same_machine_load_the_same() -> None:
    """The GPU run of issue 42 measured 266 configurations of the first run again (Conv,
    ReduceSum, MatMul, LSTM, Attention, Rfft): each mapped the same libraries."""
    first = {r["model"]: r for r in raw("ort-1.31.1-cuda13.matrix.json.xz")["results"]}
    first |= {r["model"]: r for r in raw("ort-1.31.1-cuda13.matrix-extra.json.xz")["results"]}
    again = raw("ort-1.31.1-cuda13.matrix-again.json.xz")["results"]
    assert len(again) > 200
    for result in again:
        before = first[result["model"]]
        loads = evidence_table.loads
        assert (result["ok"], sorted(loads(result))) == (before["ok"], sorted(loads(before)))


def models() -> dict[str, dict[str, Any]]:
    entries = json.loads((PROOF / "models.json").read_text(encoding="utf-8"))
    return {entry["name"]: entry for entry in entries}


def test_a_torchvision_vit_b_16_export_prunes_cufft() -> None:
    vit = models()["vit_b_16"]
    assert vit["source"] == "torchvision.models.vit_b_16(weights=None)"
    found = decide_for(vit["ops"])
    assert "cufft64_12.dll" in pruned(found), found.reason


@pytest.mark.parametrize("way", ["torchscript, dynamic batch", "dynamo, dynamic batch"])
def test_vit_b_16_prunes_cufft_however_it_was_exported(way: str) -> None:
    """tools/evidence/vit_exports.py on the GPU machine: the TorchScript export holds `Mod` (the
    dynamic batch's arithmetic), which the table had no row for before issue 42."""
    exports = json.loads((PROOF / "vit_b_16-exports.json").read_text(encoding="utf-8"))
    ops = exports["exports"][way]["ops"]
    assert ("Mod" in ops) == way.startswith("torchscript")
    found = decide_for(ops)
    assert "cufft64_12.dll" in pruned(found), found.reason


def test_the_llm_export_holds_the_llm_ops_and_prunes() -> None:
    llm = models()["llama_tiny_int4"]
    ms = {op.split(":")[1] for op in llm["ops"] if op.startswith("com.microsoft:")}
    assert {"GroupQueryAttention", "MatMulNBits", "GatherBlockQuantized"} <= ms
    found = decide_for(llm["ops"])
    assert found.unknown_ops == () and pruned(found), found.reason


def decide_for(ops: list[str]) -> Any:
    from bundler.pruning.prune import decide

    return decide(plan(), [model(*ops)], shipped(), "")


def test_each_pruned_model_ran_from_its_folder_and_failed_without_one_more_library() -> None:
    """prune-proof.json (tools/evidence/prune_proof.py on the GPU): every model that prunes ran
    from a folder of exactly what its bundle keeps, with nothing foreign mapped; with one
    library more removed it failed or mapped a foreign copy."""
    proof = json.loads((PROOF / "prune-proof.json").read_text(encoding="utf-8"))
    assert {"llama_tiny_int4", "vit_b_16"} <= set(proof)
    for name, result in proof.items():
        if not result.get("pruned"):
            continue
        assert result["ok"] and result["foreign"] == [], name
        assert not result["without_ok"] or result["without_foreign"], name
        assert (PROOF / f"proof-{name}.json").is_file(), name


def test_the_kernel_documents_cuda_table_is_read_row_by_row() -> None:
    """tools/evidence/kernels_source.py on a document in the layout of ORT's OperatorKernels.md:
    the CUDA section only, continuation rows belonging to the op above, each domain's rows."""
    doc = "\n".join([
        "## Operators implemented by CPUExecutionProvider", "",
        "| Op Name | Parameters | OpSet Version | Types Supported |",
        "|---------|------------|---------------|-----------------|",
        "|**Operator Domain:** *ai.onnx*||||",
        "|StringNormalizer|*in* X:**tensor(string)**|10+|**T** = tensor(string)|", "",
        "## Operators implemented by CUDAExecutionProvider", "",
        "| Op Name | Parameters | OpSet Version | Types Supported |",
        "|---------|------------|---------------|-----------------|",
        "|**Operator Domain:** *ai.onnx*||||",
        "|Abs|*in* X:**T**<br> *out* Y:**T**|13+|**T** = tensor(float), tensor(float16)|",
        "|||[6, 12]|**T** = tensor(float)|",
        "|Mod|*in* A:**T**<br> *in* B:**T**|13|**T** = tensor(int64)|",
        "|**Operator Domain:** *com.microsoft*||||",
        "|MatMulNBits|*in* A:**T1**|1+|**T1** = tensor(float16)|", "",
        "## Operators implemented by DmlExecutionProvider", "",
        "|**Operator Domain:** *ai.onnx*||||",
        "|Cos|*in* X:**T**|7+|**T** = tensor(float)|",
    ])  # fmt: skip
    found = [(k["domain"], k["op"], k["since"], k["until"]) for k in kernels_of(doc)]
    assert found == [
        ("", "Abs", 13, None),
        ("", "Abs", 6, 12),
        ("", "Mod", 13, 13),
        ("com.microsoft", "MatMulNBits", 1, None),
    ]


def test_a_model_with_an_op_the_table_has_no_row_for_is_told_why() -> None:
    """The decision names the op and the table's recorded reason (here: an LLM op newer than
    the kernel documentation the table's list comes from)."""
    found = decide_for(["MatMul", "com.microsoft:MatMulNBitsQkv"])
    assert pruned(found) == set()
    assert "has no row for com.microsoft:MatMulNBitsQkv (com.microsoft:MatMulNBitsQkv: " in (
        found.reason
    )
    assert "not known" in found.reason and found.reason.endswith(": nothing is pruned")


def test_a_reason_names_the_model_file_without_the_measuring_machines_folder() -> None:
    """The probe wrote its models to a temporary folder on the GPU machine; ORT's errors name
    that path, which means nothing on a user's machine."""
    error = "Load model from /tmp/gpu-matrix-x1/SwiGLU__float__rank-2.onnx failed:/src/model.cc:256"
    assert evidence_table.model_names_only(error) == (
        "Load model from SwiGLU__float__rank-2.onnx failed:/src/model.cc:256"
    )
    windows = r"Load model from C:\Users\ci\gpu-matrix-x1\Mod.onnx failed"
    assert evidence_table.model_names_only(windows) == "Load model from Mod.onnx failed"
    reasons = [item["reason"] for item in tomllib.loads(TABLE.read_text())["unmeasured"]]
    assert reasons and not [reason for reason in reasons if "gpu-matrix-" in reason]
