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
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bundler.closure.lockfile import read_lock
from bundler.pruning.evidence import all_evidence
from bundler.pruning.prune import SUB_LIBRARY
from tests.support.cache_links import RELEASES, kept_cache
from tests.support.paths import CPU, HELLO, REPO
from tests.support.runs import pip_env
from tests.support.skips import require_module
from tests.support.wine import Wine

onnx = require_module("onnx", 'pip install "ort-bundle[models]" (.ci/run installs it)')
TensorProto, helper = onnx.TensorProto, onnx.helper

ORT = "1.31.1"
PROFILE = REPO / "manifests" / "profiles" / "ort-1.31.1-gpu-cuda13.toml"
PROOF_MEASURED = REPO / "manifests" / "evidence" / "gpu-proof" / "app-measurement.json"
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
FUSED = (  # the ops ORT may fuse those of the two models into (manifests/evidence/fusions.toml)
    "com.microsoft:Attention",
    "com.microsoft:MultiHeadAttention",
    "com.microsoft:SkipLayerNormalization",
    "com.microsoft:FusedMatMul",
    "com.microsoft:BiasSoftmax",
    "Gemm",
)
TEST_ROWS = {
    **dict.fromkeys(("MatMul", "Add", "LayerNormalization", "Softmax", "Relu", *FUSED), ()),
    "Probe": tuple(sorted(SUBS)),  # a table speaks only for the libraries it saw some op load
    "com.microsoft:FusedConv": ("cudnn_ops64_9.dll",),
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


@pytest.fixture(scope="module")
def releases(gpu_cache: Path) -> Path:
    """The kept cache of released wheels (tests/support/cache_links.kept_cache), seeded with the
    session's GPU cache: ORT 1.31.1's CUDA 13 set and 1.22.0's are fetched and verified on a
    first run only, not extracted again into every run's cache."""
    return kept_cache(RELEASES, seed=gpu_cache)


def extracted_sizes(cache: Path, names: set[str]) -> dict[str, int]:
    """The size of each of `names` in the extracted trees of ORT 1.31.1's pinned archives
    (their sha256 as its profile pins them): the cache holds other releases' cuDNN and NVRTC
    under the same names."""
    pins = tomllib.loads(PROFILE.read_text(encoding="utf-8"))
    digests = {
        src["sha256"] for item in pins["artifacts"] for src in item["sources"] if "sha256" in src
    }
    trees = [cache / "extracted" / digest for digest in sorted(digests)]
    found = {(path.name, path.stat().st_size) for tree in trees for path in tree.rglob("*.dll")}
    matching = sorted((name, size) for name, size in found if name in names)
    assert len(matching) == len(names), (matching, sorted(names))  # each once, one size each
    return dict(matching)


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
    loaded, unknown = table.loads_for(ops)  # the ops and their fusions
    assert not unknown, unknown
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
    releases: Path,
    models: dict[str, Path],
    evidence: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("pruned") / "dist"
    built = build_for(out, releases, evidence, "--model", str(models["transformer"]))
    assert built.returncode == 0, built.stderr
    return out, built.stdout


@pytest.mark.realdata
def test_a_transformer_bundle_leaves_out_every_sub_library(
    transformer_bundle: tuple[Path, str], evidence: Path, releases: Path
) -> None:
    out, stdout = transformer_bundle
    lock = read_lock(out / "bundle.lock.json")
    assert lock is not None
    pruned = {item.name for item in lock.pruned}
    assert pruned == expected_pruned(evidence, TRANSFORMER_OPS) == SUBS
    assert not any((out / name).exists() for name in pruned)
    assert (out / "cudnn64_9.dll").is_file() and (out / "cudnn_graph64_9.dll").is_file()
    assert {"cufft64_12.dll", "nvrtc64_130_0.dll"}.isdisjoint(pruned)  # the table never saw them
    assert [(m.name, m.ops) for m in lock.models] == [
        ("encoder.onnx", tuple(sorted(TRANSFORMER_OPS)))
    ]
    assert all("encoder.onnx" in item.why and "ort-1.31.1" in item.why for item in lock.pruned)
    saved = sum(item.size for item in lock.pruned)
    assert saved == sum(extracted_sizes(releases, pruned).values())  # 418 MB in cuDNN 9.13.0.50
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
    releases: Path, models: dict[str, Path], evidence: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dist"
    model = str(models["conv"])
    built = build_for(out, releases, evidence, "--model", model, "--dry-run", "--json")
    assert built.returncode == 0, built.stderr
    pruning = json.loads(built.stdout)["pruning"]
    assert {item["name"] for item in pruning["pruned"]} == expected_pruned(evidence, CONV_OPS)
    never_seen = {"cufft64_12.dll", "nvrtc64_130_0.dll", "nvrtc-builtins64_130.dll"}
    assert set(pruning["kept"]) == SUBS - expected_pruned(evidence, CONV_OPS) | never_seen
    assert pruning["kept"], "Conv loads some cuDNN sub-library (the issue's measurement)"
    assert not out.exists()  # --dry-run writes nothing


@pytest.mark.realdata
def test_an_op_the_evidence_lacks_prunes_nothing(
    releases: Path, models: dict[str, Path], evidence: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dist"
    built = build_for(out, releases, evidence, "--model", str(models["unknown"]), "--dry-run")
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
    assert "nothing pruned" in built.stdout and "no run-time-loaded candidates" in built.stdout


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


@pytest.mark.realdata
def test_the_build_reads_the_tables_of_bundle_evidence_dir_first(
    releases: Path, models: dict[str, Path], tmp_path: Path
) -> None:
    """$BUNDLE_EVIDENCE_DIR reaches the build (read once by the command, issue 39): a damaged
    table there stops it naming that file, where the shipped tables alone would prune."""
    own = tmp_path / "own"
    own.mkdir()
    damaged = own / "ort-1.31.1-cuda13.toml"
    damaged.write_text("schema_version = 1\nnot toml = = 1\n")
    args = [str(HELLO), "--ort", ORT, "--out", str(tmp_path / "out"), "--cache-dir", str(releases)]
    model = str(models["transformer"])
    built = bundle("build", *args, "--model", model, "--dry-run", evidence=own)
    assert built.returncode == 6, built.stdout + built.stderr
    assert f"{damaged}: invalid TOML" in built.stdout + built.stderr


def test_every_sub_library_name_is_a_candidate() -> None:
    assert all(SUB_LIBRARY.fullmatch(name) for name in SUBS)


@pytest.mark.realdata
def test_a_release_without_evidence_prunes_nothing(
    releases: Path, models: dict[str, Path], evidence: Path, tmp_path: Path
) -> None:
    """CUDA 12 releases are not measured (the GPU machine has CUDA 13 only): the test table,
    for 1.31.1, does not apply to 1.22.0 and nothing is pruned, saying why."""
    args = [str(HELLO), "--ort", "1.22.0", "--out", str(tmp_path), "--cache-dir", str(releases)]
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


CUFFT = "cufft64_12.dll"
NVRTC = {"nvrtc64_130_0.dll", "nvrtc-builtins64_130.dll"}


def bert_layer(path: Path, hidden: int = 16, heads: int = 2, seq: int = 8) -> Path:
    """A BERT-style encoder in float: token embeddings (Gather), one self-attention layer
    (MatMul, Add, Reshape, Transpose, Div, Softmax), the residual LayerNormalization, the
    feed-forward block with erf GELU (Div, Erf, Add, Mul) and its LayerNormalization: the op
    types and element types of the BERT encoder exported on the GPU machine
    (manifests/evidence/gpu-proof/models.json), small."""
    import numpy as np
    from onnx import numpy_helper

    node, size = helper.make_node, hidden // heads
    rng = np.random.default_rng(0)
    square = (hidden, hidden)
    weights = {
        "emb": rng.standard_normal((64, hidden)), "wq": rng.standard_normal(square),
        "wk": rng.standard_normal(square), "wv": rng.standard_normal(square),
        "wo": rng.standard_normal(square), "w1": rng.standard_normal((hidden, 4 * hidden)),
        "w2": rng.standard_normal((4 * hidden, hidden)), "b1": np.zeros(4 * hidden),
        "gamma": np.ones(hidden), "beta": np.zeros(hidden), "scale": np.array(size**0.5),
        "half": np.array(0.5), "one": np.array(1.0), "root2": np.array(2**0.5),
    }  # fmt: skip
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    inits += [numpy_helper.from_array(np.array([1, seq, heads, size], np.int64), "split")]
    inits += [numpy_helper.from_array(np.array([1, seq, hidden], np.int64), "merge")]
    nodes = [node("Gather", ["emb", "ids"], ["x"])]
    for name in ("q", "k", "v"):
        nodes += [node("MatMul", ["x", f"w{name}"], [f"{name}0"])]
        nodes += [node("Reshape", [f"{name}0", "split"], [f"{name}1"])]
        perm = [0, 2, 3, 1] if name == "k" else [0, 2, 1, 3]
        nodes += [node("Transpose", [f"{name}1"], [f"{name}2"], perm=perm)]
    nodes += [
        node("MatMul", ["q2", "k2"], ["s0"]), node("Div", ["s0", "scale"], ["s1"]),
        node("Softmax", ["s1"], ["p"], axis=-1), node("MatMul", ["p", "v2"], ["c0"]),
        node("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
        node("Reshape", ["c1", "merge"], ["c2"]), node("MatMul", ["c2", "wo"], ["a"]),
        node("Add", ["a", "x"], ["r1"]),
        node("LayerNormalization", ["r1", "gamma", "beta"], ["n1"], axis=-1),
        node("MatMul", ["n1", "w1"], ["f0"]), node("Add", ["f0", "b1"], ["f1"]),
        node("Div", ["f1", "root2"], ["g0"]), node("Erf", ["g0"], ["g1"]),
        node("Add", ["g1", "one"], ["g2"]), node("Mul", ["f1", "g2"], ["g3"]),
        node("Mul", ["g3", "half"], ["g4"]), node("MatMul", ["g4", "w2"], ["f2"]),
        node("Add", ["f2", "n1"], ["r2"]),
        node("LayerNormalization", ["r2", "gamma", "beta"], ["y"], axis=-1),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "bert_layer",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def dry_run_pruning(cache: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    """`bundle build --dry-run --json` of examples/hello for ORT 1.31.1: its pruning decision."""
    args = [str(HELLO), "--ort", ORT, "--out", str(tmp_path / "dist"), "--cache-dir", str(cache)]
    built = bundle("build", *args, *extra, "--dry-run", "--json")
    assert built.returncode == 0, built.stderr
    pruning: dict[str, Any] = json.loads(built.stdout)["pruning"]
    return pruning


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bert_layer(tmp_path_factory.mktemp("bert") / "bert_encoder.onnx")


@pytest.mark.realdata
def test_the_shipped_table_leaves_out_what_a_bert_encoder_never_loads(
    releases: Path, bert: Path, tmp_path: Path
) -> None:
    """Issue 28's gain, with the measured 1.31.1 table: every cuDNN sub-library, cuFFT and NVRTC
    go. The Attention a session may fuse MatMul and Softmax into loads the cuDNN engines, the
    heuristic and NVRTC in float16, and nothing more in float, and this model is float."""
    pruning = dry_run_pruning(releases, tmp_path, "--model", str(bert))
    assert pruning["evidence"] == "ort-1.31.1-cuda13.toml"
    left_out = {item["name"] for item in pruning["pruned"]}
    assert left_out == SUBS | {CUFFT} | NVRTC
    assert pruning["saved_bytes"] == sum(extracted_sizes(releases, left_out).values())
    assert 780e6 < pruning["saved_bytes"] < 820e6  # 798 MB, docs/pruning.md


@pytest.mark.realdata
def test_the_same_encoder_in_float16_keeps_what_cudnns_flash_attention_loads(
    releases: Path, bert: Path, tmp_path: Path
) -> None:
    model = onnx.load(str(bert))
    onnx_model = helper.make_model(model.graph, opset_imports=model.opset_import)
    path = tmp_path / "bert_fp16.onnx"
    for tensor in onnx_model.graph.initializer:
        if tensor.data_type == TensorProto.FLOAT:
            import numpy as np
            from onnx import numpy_helper

            half = numpy_helper.to_array(tensor).astype(np.float16)
            tensor.CopyFrom(numpy_helper.from_array(half, tensor.name))
    onnx_model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.save(onnx_model, str(path))
    kept = set(dry_run_pruning(releases, tmp_path, "--model", str(path))["kept"])
    assert {"cudnn_engines_precompiled64_9.dll", "cudnn_heuristic64_9.dll"} | NVRTC <= kept


def app_evidence(path: Path, model: Path, loaded: tuple[str, ...]) -> Path:
    """An app evidence file as `bundle measure` writes it on a GPU machine, for `model`: the
    real one from the H200 (gpu-proof/app-measurement.json) with its BERT entry renamed to
    `model` and given `model`'s SHA-256 (the test machine has no GPU to measure on)."""
    import hashlib

    document = json.loads(PROOF_MEASURED.read_text())
    [entry] = [m for m in document["models"] if m["name"] == "bert_encoder.onnx"]
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    entry |= {"name": model.name, "sha256": digest, "loaded": sorted(loaded)}
    document["models"] = [entry]
    path.write_text(json.dumps(document))
    return path


@pytest.mark.realdata
def test_the_apps_own_measurement_prunes_what_it_never_loaded(
    releases: Path, bert: Path, tmp_path: Path
) -> None:
    measured = json.loads(PROOF_MEASURED.read_text())
    [real] = [m for m in measured["models"] if m["name"] == "bert_encoder.onnx"]
    evidence = app_evidence(tmp_path / "app-evidence.json", bert, tuple(real["loaded"]))
    pruning = dry_run_pruning(releases, tmp_path, "--model", str(bert), "--evidence", str(evidence))
    left_out = {item["name"] for item in pruning["pruned"]}
    assert left_out == SUBS | {CUFFT} | NVRTC
    assert pruning["evidence"] == "app-evidence.json"
    assert all("app-evidence.json" in item["why"] for item in pruning["pruned"])


@pytest.mark.realdata
def test_the_apps_measurement_is_refused_after_the_model_changes_by_one_byte(
    releases: Path, bert: Path, tmp_path: Path
) -> None:
    model = tmp_path / bert.name
    model.write_bytes(bert.read_bytes())
    evidence = app_evidence(tmp_path / "app-evidence.json", model, ())
    data = bytearray(model.read_bytes())
    data[-1] ^= 1  # still an ONNX model: the last byte is in a name
    model.write_bytes(bytes(data))
    args = [
        str(HELLO),
        "--ort",
        ORT,
        "--out",
        str(tmp_path / "dist"),
        "--cache-dir",
        str(releases),
    ]
    built = bundle("build", *args, "--model", str(model), "--evidence", str(evidence), "--dry-run")
    assert built.returncode == 14, built.stdout + built.stderr
    assert "bert_encoder.onnx changed since it was measured" in built.stderr
    assert "bundle measure" in built.stderr
