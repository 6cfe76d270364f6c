"""`bundle build --model`: the real ORT 1.31.1 GPU bundle pruned for a transformer-style and a
conv model, then audited, explained and load-proven under Wine like any bundle. The decision
rules alone: tests/test_prune.py.

The evidence here is a TEST TABLE written below and passed through $BUNDLE_EVIDENCE_DIR, not a
measurement: its rows follow the team's H200 run (docs/field-notes.md, "What ORT's CUDA EP
loads"), so the mechanism is exercised on the real DLLs with the shape of real evidence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundler.evidence import all_evidence
from bundler.lock import read_lock
from bundler.prune import SUB_LIBRARY
from tests.conftest import CPU, HELLO, pip_env, require_module
from tests.support.wine import Wine

onnx = require_module("onnx", 'pip install "ort-bundle[models]" (.ci/run installs it)')
TensorProto, helper = onnx.TensorProto, onnx.helper

ORT = "1.31.1"
# The issue's own measurement (ORT 1.31.1, H200): a transformer-style model maps no cuDNN
# sub-library at all, so the bundle keeps cudnn64_9 and cudnn_graph64_9 only.
SUBS = {
    "cudnn_adv64_9.dll",
    "cudnn_cnn64_9.dll",
    "cudnn_ops64_9.dll",
    "cudnn_engines_precompiled64_9.dll",
    "cudnn_engines_runtime_compiled64_9.dll",
    "cudnn_heuristic64_9.dll",
}
TRANSFORMER_OPS = ("MatMul", "Add", "LayerNormalization", "Softmax")
CONV_OPS = ("Conv", "BatchNormalization", "Relu", "MaxPool")


TEST_TABLE = """# A TEST TABLE for tests/test_prune_bundle.py, not a measurement.
schema_version = 1
ort = "1.31.1"
cuda = "13"
cudnn = "9.13.0"
platform = "test"
gpu = "none (a test table)"
measured = "never"
raw = "ort-1.31.1-cuda13.raw.json"
every_session = ["cudnn64_9.dll", "cudnn_graph64_9.dll"]
"""
TEST_ROWS = {
    **dict.fromkeys(("MatMul", "Add", "LayerNormalization", "Softmax", "Relu"), ()),
    "Conv": (
        "cudnn_ops64_9.dll",
        "cudnn_engines_precompiled64_9.dll",
        "cudnn_engines_runtime_compiled64_9.dll",
        "cudnn_heuristic64_9.dll",
    ),
    "BatchNormalization": ("cudnn_ops64_9.dll",),
    "MaxPool": ("cudnn_ops64_9.dll",),
}


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("evidence")
    rows = "".join(
        f'\n[[ops]]\nop = "{op}"\nloads = {json.dumps(list(loads))}\nmodel = "{op}"\n'
        for op, loads in TEST_ROWS.items()
    )
    (folder / "ort-1.31.1-cuda13.toml").write_text(TEST_TABLE + rows)
    (folder / "ort-1.31.1-cuda13.raw.json").write_text("{}")
    return folder


def bundle(*args: str, evidence: Path | None = None) -> subprocess.CompletedProcess[str]:
    own = {"BUNDLE_EVIDENCE_DIR": str(evidence)} if evidence else {}
    return subprocess.run(
        [sys.executable, "-m", "bundler", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "BUNDLE_DEBUG": "", **pip_env(), **own},
    )


def chain_model(path: Path, ops: tuple[str, ...], domain: str = "") -> Path:
    """A model running `ops` one after another on a [1, 4, 8, 8] tensor (shapes are not
    checked: bundle reads op types only)."""
    nodes = [
        helper.make_node(op, [f"t{i}"], [f"t{i + 1}"], domain=domain or None)
        for i, op in enumerate(ops)
    ]
    shape = [1, 4, 8, 8]
    graph = helper.make_graph(
        nodes,
        path.stem,
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(f"t{len(ops)}", TensorProto.FLOAT, shape)],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))
    return path


def expected_pruned(evidence: Path, ops: tuple[str, ...]) -> set[str]:
    """What the table lets go for `ops`: the sub-libraries no row of them loads."""
    [table] = all_evidence([evidence])
    loaded = {name.lower() for op in ops for name in table.ops[op].loads}
    return {name for name in SUBS if name.lower() not in loaded}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {
        "transformer": chain_model(folder / "encoder.onnx", TRANSFORMER_OPS),
        "conv": chain_model(folder / "detector.onnx", CONV_OPS),
        "unknown": chain_model(folder / "custom.onnx", ("MatMul", "Fancy"), "com.example"),
    }


def build_for(
    out: Path, cache: Path, evidence: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    args = [str(HELLO), "--ort", ORT, "--out", str(out), "--cache-dir", str(cache), "--link"]
    return bundle("build", *args, *extra, evidence=evidence)


@pytest.fixture(scope="module")
def transformer_bundle(
    gpu_cache: Path,
    models: dict[str, Path],
    evidence: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("pruned") / "dist"
    built = build_for(out, gpu_cache, evidence, "--model", str(models["transformer"]))
    assert built.returncode == 0, built.stderr
    return out, built.stdout


@pytest.mark.realdata
def test_a_transformer_bundle_leaves_out_every_sub_library(
    transformer_bundle: tuple[Path, str], evidence: Path, gpu_cache: Path
) -> None:
    out, stdout = transformer_bundle
    lock = read_lock(out / "bundle.lock.json")
    assert lock is not None
    pruned = {item.name for item in lock.pruned}
    assert pruned == expected_pruned(evidence, TRANSFORMER_OPS) == SUBS
    assert not any((out / name).exists() for name in pruned)
    assert (out / "cudnn64_9.dll").is_file() and (out / "cudnn_graph64_9.dll").is_file()
    assert [(m.name, m.ops) for m in lock.models] == [
        ("encoder.onnx", tuple(sorted(TRANSFORMER_OPS)))
    ]
    assert all("encoder.onnx" in item.why and "ort-1.31.1" in item.why for item in lock.pruned)
    saved = sum(item.size for item in lock.pruned)
    extracted = {path.name: path.stat().st_size for path in gpu_cache.rglob("cudnn_*64_9.dll")}
    assert saved == sum(extracted[name] for name in pruned)  # 418 MB in cuDNN 9.13.0.50
    assert "left out" in stdout and "saving 418.0 MB" in stdout


@pytest.mark.realdata
def test_the_audit_agrees_with_the_lock_and_explains_a_pruned_dll(
    transformer_bundle: tuple[Path, str],
) -> None:
    out, _ = transformer_bundle
    lock = read_lock(out / "bundle.lock.json")
    assert lock is not None
    audited = bundle("audit", str(out), "--json")  # the lock says what was pruned: no table
    assert audited.returncode == 0, audited.stdout + audited.stderr
    summary = json.loads(audited.stdout)["plan"]
    assert summary["pruned"] == {item.name: item.why for item in lock.pruned}
    assert summary["missing"] == []
    text = bundle("audit", str(out))
    assert "pruned for the app's models" in text.stdout
    explained = bundle("audit", str(out), "--explain", "cudnn_cnn64_9.dll")
    assert explained.returncode == 0, explained.stderr
    assert "pruned it" in explained.stdout and "encoder.onnx" in explained.stdout


@pytest.mark.realdata
def test_a_conv_bundle_keeps_what_its_ops_load(
    gpu_cache: Path, models: dict[str, Path], evidence: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dist"
    model = str(models["conv"])
    built = build_for(out, gpu_cache, evidence, "--model", model, "--dry-run", "--json")
    assert built.returncode == 0, built.stderr
    pruning = json.loads(built.stdout)["pruning"]
    assert {item["name"] for item in pruning["pruned"]} == expected_pruned(evidence, CONV_OPS)
    assert set(pruning["kept"]) == SUBS - expected_pruned(evidence, CONV_OPS)
    assert pruning["kept"], "Conv loads some cuDNN sub-library (the issue's measurement)"
    assert not out.exists()  # --dry-run writes nothing


@pytest.mark.realdata
def test_an_op_the_evidence_lacks_prunes_nothing(
    gpu_cache: Path, models: dict[str, Path], evidence: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dist"
    built = build_for(out, gpu_cache, evidence, "--model", str(models["unknown"]), "--dry-run")
    assert built.returncode == 0, built.stderr
    assert "nothing pruned" in built.stdout and "com.example:Fancy" in built.stdout


@pytest.mark.realdata
def test_a_model_with_a_cpu_profile_changes_nothing(
    cpu_cache: Path, models: dict[str, Path], evidence: Path, tmp_path: Path
) -> None:
    args = [str(HELLO), "--profile", CPU, "--out", str(tmp_path), "--cache-dir", str(cpu_cache)]
    model = str(models["transformer"])
    built = bundle("build", *args, "--model", model, "--dry-run", evidence=evidence)
    assert built.returncode == 0, built.stderr
    assert "nothing pruned" in built.stdout and "no cuDNN" in built.stdout


@pytest.mark.realdata
def test_the_pruned_bundle_passes_the_wine_load_proof(
    transformer_bundle: tuple[Path, str], wine: Wine
) -> None:
    out, _ = transformer_bundle
    env = {**os.environ, "BUNDLE_DEBUG": "", "WINEPREFIX": str(wine.prefix)}
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    command = [sys.executable, "-m", "bundler", "audit", str(out), "--run", "--json"]
    ran = subprocess.run(command, capture_output=True, text=True, env=env)
    data = json.loads(ran.stdout)
    assert ran.returncode == 0, (ran.stderr, data["findings"])
    proof = data["load_proof"]
    assert proof["agrees"] is True
    loaded = {run["target"] for run in proof["runs"]}
    assert loaded.isdisjoint(SUBS) and "cudnn_graph64_9.dll" in loaded


def test_every_sub_library_name_is_a_candidate() -> None:
    assert all(SUB_LIBRARY.fullmatch(name) for name in SUBS)


@pytest.mark.realdata
def test_a_release_without_evidence_prunes_nothing(
    gpu_cache: Path, models: dict[str, Path], evidence: Path, tmp_path: Path
) -> None:
    """CUDA 12 releases are not measured (the GPU machine has CUDA 13 only): the test table,
    for 1.31.1, does not apply to 1.22.0 and nothing is pruned, saying why."""
    args = [str(HELLO), "--ort", "1.22.0", "--out", str(tmp_path), "--cache-dir", str(gpu_cache)]
    model = str(models["transformer"])
    built = bundle("build", *args, "--model", model, "--dry-run", evidence=evidence)
    assert built.returncode == 0, built.stderr
    assert "nothing pruned" in built.stdout
    assert "no load evidence measured for ORT 1.22.0" in built.stdout


@pytest.mark.realdata
def test_the_installer_and_the_doctor_know_what_was_pruned(
    transformer_bundle: tuple[Path, str],
) -> None:
    out, _ = transformer_bundle
    script = (out / "setup.iss").read_text(encoding="utf-8-sig")
    sources = [line for line in script.splitlines() if line.startswith("Source:")]
    assert not any(name in line for line in sources for name in SUBS)
    comment = next(line for line in script.splitlines() if "cudnn_adv64_9.dll" in line)
    assert comment.startswith(";") and all(name in comment for name in SUBS)
    data = (out / "bundle-doctor.dat").read_text(encoding="utf-8").splitlines()
    pruned = {line.split("\t")[1] for line in data if line.startswith("pruned\t")}
    assert pruned == SUBS
    loads = {line.split("\t")[1] for line in data if line.startswith("load\t")}
    assert loads.isdisjoint(SUBS) and "cudnn_graph64_9.dll" in loads
