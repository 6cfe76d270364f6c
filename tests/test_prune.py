"""bundler/prune.py: which cuDNN sub-libraries a bundle leaves out for the app's models, decided
on a small Plan against a small evidence table (the rules of docs/pruning.md one at a time).
The real build, audit and load proof of a pruned 1.31.1 GPU bundle: tests/test_prune_bundle.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bundler.evidence import Evidence, OpLoads, all_evidence, evidence_dir, load_evidence
from bundler.models import ModelOps
from bundler.plan import Edge, EdgeKind, Plan, PlanFile, Status
from bundler.prune import SUB_LIBRARY, apply_pruning, decide
from tests.conftest import REPO

SUBS = ("cudnn_adv64_9.dll", "cudnn_cnn64_9.dll", "cudnn_ops64_9.dll", "cudnn_heuristic64_9.dll")
CORE = ("cudnn64_9.dll", "cudnn_graph64_9.dll", "cublasLt64_13.dll")


def plan(*imports: tuple[str, str]) -> Plan:
    """cudnn64_9 loading its sub-libraries at run time, plus the given static imports."""
    names = (*CORE, *SUBS)
    files = tuple(PlanFile(n.lower(), n, Status.BUNDLED, size=1000) for n in names)
    runtime = [Edge("cudnn64_9.dll", n.lower(), EdgeKind.RUNTIME) for n in (*SUBS, CORE[1])]
    static = [Edge(a.lower(), b.lower(), EdgeKind.IMPORT) for a, b in imports]
    return Plan("p", "x64", "10.0", (), ("cudnn64_9.dll",), files, (*runtime, *static))


def evidence(**rows: tuple[str, ...]) -> Evidence:
    ops = {op: OpLoads(op, loads, op) for op, loads in rows.items()}
    return Evidence(
        Path("ort-9.9.9-cuda13.toml"), "9.9.9", "13", "9.13.0", "linux-x86_64", "GPU", "d",
        "raw.json", ("cudnn64_9.dll",), ops,
    )  # fmt: skip


def model(*ops: str) -> ModelOps:
    return ModelOps(Path("m.onnx"), "0" * 64, frozenset(ops))


def test_only_what_no_op_loads_is_pruned_and_the_rest_is_kept() -> None:
    found = decide(plan(), [model("MatMul", "Conv")], evidence(MatMul=(), Conv=SUBS[2:3]), "")
    assert sorted(p.name for p in found.pruned) == sorted(set(SUBS) - {"cudnn_ops64_9.dll"})
    assert found.kept == ("cudnn_ops64_9.dll",)
    assert found.saved == 3000
    assert all("m.onnx" in p.why and "ort-9.9.9-cuda13.toml" in p.why for p in found.pruned)


def test_every_model_counts() -> None:
    table = evidence(MatMul=(), LSTM=("cudnn_adv64_9.dll", "cudnn_ops64_9.dll"))
    found = decide(plan(), [model("MatMul"), model("LSTM")], table, "")
    assert {p.name for p in found.pruned} == {"cudnn_cnn64_9.dll", "cudnn_heuristic64_9.dll"}


def test_an_op_the_evidence_lacks_prunes_nothing_and_is_named() -> None:
    found = decide(plan(), [model("MatMul", "NonMaxSuppression")], evidence(MatMul=()), "")
    assert found.pruned == () and found.unknown_ops == ("NonMaxSuppression",)
    assert "NonMaxSuppression" in found.reason


def test_without_evidence_nothing_is_pruned_and_the_reason_is_given() -> None:
    found = decide(plan(), [model("MatMul")], None, "no load evidence for ORT 1.19.2")
    assert found.pruned == () and found.reason == "no load evidence for ORT 1.19.2"


def test_a_sub_library_a_kept_dll_imports_stays() -> None:
    """cudnn_cnn imports cudnn_ops statically: with cnn kept, ops stays whatever the evidence
    says; with cnn pruned too, ops goes."""
    imports = [("cudnn_cnn64_9.dll", "cudnn_ops64_9.dll")]
    kept = decide(plan(*imports), [model("Conv")], evidence(Conv=SUBS[1:2]), "")
    assert "cudnn_ops64_9.dll" in kept.kept and "cudnn_cnn64_9.dll" in kept.kept
    gone = decide(plan(*imports), [model("MatMul")], evidence(MatMul=()), "")
    assert {p.name for p in gone.pruned} == set(SUBS)


def test_a_sub_library_the_app_itself_imports_stays() -> None:
    found = decide(plan(("cudnn64_9.dll", "cudnn_adv64_9.dll")), [model("M")], evidence(M=()), "")
    assert "cudnn_adv64_9.dll" in found.kept


def test_cudnn_itself_and_its_graph_library_are_never_candidates() -> None:
    assert all(SUB_LIBRARY.fullmatch(name) is None for name in CORE)
    found = decide(plan(), [model("M")], evidence(M=()), "")
    assert {p.name for p in found.pruned}.isdisjoint(CORE)


def test_no_models_or_no_cudnn_prunes_nothing() -> None:
    assert decide(plan(), [], evidence(M=()), "").reason == "no models given"
    cpu = Plan("cpu", "x64", "10.0", (), (), (PlanFile("a.dll", "a.dll", Status.BUNDLED),), ())
    found = decide(cpu, [model("M")], evidence(M=()), "")
    assert found.pruned == () and "cuDNN" in found.reason


def test_the_plan_marks_each_pruned_dll_with_its_reason() -> None:
    found = decide(plan(), [model("M")], evidence(M=()), "")
    pruned = apply_pruning(plan(), found).with_status(Status.PRUNED)
    assert {item.name for item in pruned} == set(SUBS)
    assert all(item.note and "m.onnx" in item.note for item in pruned)


def test_the_shipped_tables_and_the_docs_agree() -> None:
    """Every shipped table reads, names only cuDNN libraries, has its raw output beside it and
    is listed in docs/pruning.md; with none shipped, the docs say so for 1.31.1."""
    shipped = all_evidence([evidence_dir()])
    docs = (REPO / "docs" / "pruning.md").read_text()
    measured = docs.split("### Measured releases")[1].split("**Status.**")[0]
    for table in shipped:
        assert table.ops and table.path.with_name(table.raw).is_file(), table.path
        assert all(n.startswith("cudnn") for row in table.ops.values() for n in row.loads)
        assert table.path.name in measured, f"docs/pruning.md does not list {table.path.name}"
    if not shipped:
        assert "| 1.31.1 | 13 | not yet" in measured


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
