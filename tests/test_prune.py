"""bundler/pruning/prune.py: which cuDNN sub-libraries a bundle leaves out for the app's models,
decided on a small Plan against a small evidence table (tests/support/pruning.py; the rules of
docs/pruning.md one at a time).
The real build, audit and load proof of a pruned 1.31.1 GPU bundle: tests/test_prune_bundle.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.closure.plan import Edge, EdgeKind, Plan, PlanFile, Status
from bundler.pruning.evidence import (
    Evidence,
    OpLoads,
    all_evidence,
    evidence_dir,
    load_evidence,
)
from bundler.pruning.prune import (
    CANDIDATE,
    SUB_LIBRARY,
    TableSource,
    apply_pruning,
    decide,
    options_mismatch,
)
from tests.support.paths import REPO
from tests.support.pruning import CORE, LAZY, SUBS, evidence, model, plan, pruned, shipped


def test_only_what_no_op_loads_is_pruned_and_the_rest_is_kept() -> None:
    table = evidence(Relu=(), Conv=SUBS[2:3], **{"com.microsoft:FusedConv": SUBS[2:3]})
    found = decide(plan(), [model("Relu", "Conv")], table, "")
    assert pruned(found) == set(SUBS + LAZY) - {"cudnn_ops64_9.dll"}
    assert found.kept == ("cudnn_ops64_9.dll",)
    assert found.saved == 5000
    assert all("m.onnx" in p.why and "ort-9.9.9-cuda13.toml" in p.why for p in found.pruned)


def test_every_model_counts() -> None:
    table = evidence(Relu=(), LSTM=("cudnn_adv64_9.dll", "cudnn_ops64_9.dll"))
    found = decide(plan(), [model("Relu"), model("LSTM")], table, "")
    assert pruned(found) == {"cudnn_cnn64_9.dll", "cudnn_heuristic64_9.dll", *LAZY}


def test_an_op_the_evidence_lacks_prunes_nothing_and_is_named() -> None:
    found = decide(plan(), [model("Relu", "NonMaxSuppression")], evidence(Relu=()), "")
    assert found.pruned == () and found.unknown_ops == ("NonMaxSuppression",)
    assert "NonMaxSuppression" in found.reason


def test_the_ops_a_session_fuses_them_into_count_too() -> None:
    """MatMul and Softmax may run as com.microsoft:Attention (AttentionFusion): its row counts,
    and without one nothing is pruned."""
    rows = {"MatMul": (), "Softmax": (), "com.microsoft:FusedMatMul": ()}
    missing = decide(plan(), [model("MatMul", "Softmax")], evidence(**rows), "")
    assert missing.pruned == () and "com.microsoft:Attention" in missing.unknown_ops
    rows |= {"com.microsoft:Attention": ("nvrtc64_130_0.dll",)}
    rows |= {"com.microsoft:MultiHeadAttention": ("cudnn_heuristic64_9.dll",)}
    found = decide(plan(), [model("MatMul", "Softmax")], evidence(**rows), "")
    assert {"nvrtc64_130_0.dll", "cudnn_heuristic64_9.dll"} <= set(found.kept)


def test_a_library_the_table_never_saw_load_is_not_pruned() -> None:
    """The table is measured on Linux: a library no row loads may be linked there and loaded
    lazily on Windows, so the table says nothing about it (cuFFT here)."""
    ops = {"Relu": OpLoads("Relu", (), "Relu"), "Probe": OpLoads("Probe", SUBS, "Probe")}
    table = Evidence(
        Path("t.toml"), "9.9.9", "13", "9.13.0", "linux", "GPU", "d", "raw.json", (), ops
    )
    found = decide(plan(), [model("Relu")], TableSource(table), "")
    assert pruned(found) == set(SUBS)
    assert set(LAZY) <= set(found.kept)


def test_what_every_session_loads_is_never_pruned() -> None:
    found = decide(plan(), [model("Relu")], evidence(Relu=()), "")
    assert pruned(found).isdisjoint(CORE)
    assert all(SUB_LIBRARY.fullmatch(name) is None for name in CORE)


def test_other_provider_options_than_the_tables_prune_nothing() -> None:
    table = evidence(Relu=()).evidence
    assert options_mismatch(table, {}) == ""
    why = options_mismatch(table, {"cudnn_conv_algo_search": "DEFAULT"})
    assert "cudnn_conv_algo_search=DEFAULT" in why and "bundle measure" in why
    assert "default options" in why


def test_without_evidence_nothing_is_pruned_and_the_reason_is_given() -> None:
    found = decide(plan(), [model("Relu")], None, "no load evidence for ORT 1.19.2")
    assert found.pruned == () and found.reason == "no load evidence for ORT 1.19.2"


def test_a_sub_library_a_kept_dll_imports_stays() -> None:
    """cudnn_cnn imports cudnn_ops statically: with cnn kept, ops stays whatever the evidence
    says; with cnn pruned too, ops goes."""
    imports = [("cudnn_cnn64_9.dll", "cudnn_ops64_9.dll")]
    kept = decide(plan(*imports), [model("Relu")], evidence(Relu=SUBS[1:2]), "")
    assert "cudnn_ops64_9.dll" in kept.kept and "cudnn_cnn64_9.dll" in kept.kept
    gone = decide(plan(*imports), [model("Relu")], evidence(Relu=()), "")
    assert set(SUBS) <= pruned(gone)


def test_a_sub_library_the_app_itself_imports_stays() -> None:
    imports = ("cudnn64_9.dll", "cudnn_adv64_9.dll")
    found = decide(plan(imports), [model("Relu")], evidence(Relu=()), "")
    assert "cudnn_adv64_9.dll" in found.kept


def test_no_models_or_no_candidates_prunes_nothing() -> None:
    assert decide(plan(), [], evidence(Relu=()), "").reason == "no models given"
    cpu = Plan("cpu", "x64", "10.0", (), (), (PlanFile("a.dll", "a.dll", Status.BUNDLED),), ())
    found = decide(cpu, [model("Relu")], evidence(Relu=()), "")
    assert found.pruned == () and "candidates" in found.reason


def test_the_plan_marks_each_pruned_dll_with_its_reason() -> None:
    found = decide(plan(), [model("Relu")], evidence(Relu=()), "")
    marked = apply_pruning(plan(), found).with_status(Status.PRUNED)
    assert {item.name for item in marked} == set(SUBS + LAZY)
    assert all(item.note and "m.onnx" in item.note for item in marked)


def test_the_shipped_tables_and_the_docs_agree() -> None:
    """Every shipped table reads, has its raw output beside it, names only candidates and what
    every session loads, and is listed in docs/pruning.md."""
    shipped = all_evidence([evidence_dir()])
    docs = (REPO / "docs" / "pruning.md").read_text()
    measured = docs.split("### Measured releases")[1].split("##")[0]
    assert shipped, "ORT 1.31.1 / CUDA 13 is measured"
    for table in shipped:
        assert table.ops and table.path.with_name(table.raw).is_file(), table.path
        every = {name.lower() for name in table.every_session}
        for row in table.ops.values():
            assert all(CANDIDATE.fullmatch(n) or n.lower() in every for n in row.loads), row
        assert table.path.name in measured, f"docs/pruning.md does not list {table.path.name}"


def test_issue_28s_reduce_sum_keeps_cudnn_ops_with_the_measured_table() -> None:
    """ReduceSum over axes (0, 2) of a 4-D float tensor calls cuDNN's reduction: the row of the
    measured table (the union of its configurations) says so, and cudnn_ops stays."""
    row = shipped().evidence.ops["ReduceSum"]
    assert "cudnn_ops64_9.dll" in row.loads and row.config_dependent
    assert row.configurations > 50
    found = decide(plan(), [model("ReduceSum")], shipped(), "")
    assert "cudnn_ops64_9.dll" in found.kept and "cudnn_ops64_9.dll" not in pruned(found)


def test_a_cpu_only_op_prunes_as_if_it_were_absent_with_the_measured_table() -> None:
    """GRU ran on the CPU EP in every configuration measured (ORT 1.31.1 has no CUDA kernel
    for it): a model with it prunes exactly what the model without it prunes."""
    table = shipped()
    assert "CPU EP in every configuration" in table.evidence.ops["GRU"].note
    without = decide(plan(), [model("Relu", "Gemm")], table, "")
    assert without.pruned
    assert decide(plan(), [model("Relu", "Gemm", "GRU")], table, "").pruned == without.pruned


def test_an_op_the_measured_table_lacks_prunes_nothing() -> None:
    found = decide(plan(), [model("Relu", "com.example:Fancy")], shipped(), "")
    assert found.pruned == () and found.unknown_ops == ("com.example:Fancy",)


def test_a_table_with_an_unknown_key_is_refused(tmp_path: Path) -> None:
    from bundler.errors import ProfileError

    table = tmp_path / "ort-9.9.9-cuda13.toml"
    head = 'schema_version = 1\nort = "9.9.9"\ncuda = "13"\ncudnn = "9.13.0"\nplatform = "t"\n'
    head += 'gpu = "t"\nmeasured = "t"\nraw = "r.json"\nevery_session = []\n'
    row = '[[ops]]\nop = "Conv"\nloads = ["cudnn_ops64_9.dll"]\nmodel = "Conv"\n'
    table.write_text(head + row)
    [read] = all_evidence([tmp_path])
    assert read.ops["Conv"].loads == ("cudnn_ops64_9.dll",)
    table.write_text(head + row + 'surprise = "x"\n')
    with pytest.raises(ProfileError, match="surprise"):
        load_evidence(table)


def test_nvrtcs_builtins_stay_while_nvrtc_stays() -> None:
    """NVRTC loads its builtins whenever it compiles: a measurement that saw NVRTC loaded but
    not yet its builtins (it had compiled nothing) must not leave the builtins out."""
    builtins = "nvrtc-builtins64_130.dll"
    base = plan()
    files = (*base.files, PlanFile(builtins, builtins, Status.BUNDLED, size=1000))
    edge = Edge("nvrtc64_130_0.dll", builtins, EdgeKind.RUNTIME)
    with_builtins = Plan("p", "x64", "10.0", (), base.roots, files, (*base.edges, edge))
    table = evidence(Relu=(), LSTM=("nvrtc64_130_0.dll",))
    found = decide(with_builtins, [model("LSTM")], table, "")
    assert {"nvrtc64_130_0.dll", builtins} <= set(found.kept)
    gone = decide(with_builtins, [model("Relu")], table, "")
    assert {"nvrtc64_130_0.dll", builtins} <= pruned(gone)
