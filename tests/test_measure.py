"""`bundle measure`: the app's own measurement, run for real with the CPU onnxruntime of this
machine (no GPU here: `--provider cpu` stands in for CUDA, and `--provider cuda` is exactly the
fallback a GPU machine without its CUDA libraries shows), and the app evidence file it writes,
read back by bundler.pruning.app_evidence. bundler.measure.names maps library names without
onnxruntime."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundler.errors import ExitCode, InputFileError
from bundler.measure.names import windows_name
from bundler.measure.parent import child_environment
from bundler.pruning.app_evidence import AppEvidence, MeasuredModel, problems, read_app_evidence
from bundler.pruning.onnx_models import ModelOps, read_model_ops
from tests.support.paths import CPU, REPO
from tests.support.skips import require_module

CPU_PROVIDER = "CPUExecutionProvider"
ONE = b"\x00\x00\x80\x3f"  # 1.0f, little-endian: every weight of the tiny model
# The Windows unit tier accepts skips naming "ort-bundle[models]" (tests/test_windows_unit_tier.py)
_NEEDS = 'measuring needs onnx and onnxruntime: pip install "ort-bundle[models]" onnxruntime'


# --- names: Linux library names to Windows DLL names (no onnxruntime needed) --------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("libcudnn_ops.so.9", "cudnn_ops64_9.dll"),
        ("libcudnn.so.9", "cudnn64_9.dll"),
        ("libcufft.so.12", "cufft64_12.dll"),
        ("libcudart.so.13", "cudart64_13.dll"),
        ("libcublas.so.13", "cublas64_13.dll"),
        ("libcublasLt.so.13", "cublasLt64_13.dll"),
        ("libcurand.so.10", "curand64_10.dll"),
        ("libnvrtc.so.13", "nvrtc64_130_0.dll"),
        ("libnvrtc-builtins.so.13.0", "nvrtc-builtins64_130.dll"),
        ("libnvJitLink.so.13", "nvJitLink_130_0.dll"),
        ("libcudart.so.12", "cudart64_12.dll"),
        ("libnvrtc.so.12", "nvrtc64_120_0.dll"),
        ("libnvrtc-builtins.so.12.4", "nvrtc-builtins64_124.dll"),
        # /proc/self/maps names the real file: a system install's full version
        ("/usr/lib/x86_64-linux-gnu/libcudnn_engines_precompiled.so.9.13.0",
         "cudnn_engines_precompiled64_9.dll"),
        ("/opt/cuda/lib64/libcublasLt.so.13.1.0.3", "cublasLt64_13.dll"),
        ("/venv/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so.13.0.88",
         "nvrtc-builtins64_130.dll"),
        # Windows: already DLL names, kept in their own spelling
        (r"C:\app\dist\cudnn_ops64_9.dll", "cudnn_ops64_9.dll"),
        (r"C:\app\dist\CUBLASLT64_13.DLL", "CUBLASLT64_13.DLL"),
        ("D:/app/nvrtc-builtins64_130.dll", "nvrtc-builtins64_130.dll"),
    ],
)  # fmt: skip
def test_a_cuda_or_cudnn_library_gets_its_windows_name(path: str, expected: str) -> None:
    assert windows_name(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        "libc.so.6",
        "libcudnn.so",  # the development symlink: not what a process maps
        "libnvrtc-builtins.so.13",  # the builtins always carry a minor
        "/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so",
        "libcuda.so.1",  # the driver: never shipped
        r"C:\Windows\System32\kernel32.dll",
        r"C:\app\dist\onnxruntime.dll",
        "cudnn64_9.dll.bak",
    ],
)
def test_other_files_have_no_windows_name(path: str) -> None:
    assert windows_name(path) is None


def test_the_child_imports_nothing_but_the_standard_library() -> None:
    """The measured process holds what the model needs: onnxruntime and numpy come lazily,
    nothing of bundle, typer, rich, pefile or py7zr."""
    tree = ast.parse((REPO / "bundler" / "measure" / "child.py").read_text(encoding="utf-8"))
    imported = {
        alias.name for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names
    }
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    roots = {name.split(".")[0] for name in imported}
    assert roots - set(sys.stdlib_module_names) == {"numpy"}


def test_the_libs_folder_comes_first_on_the_childs_search_path(tmp_path: Path) -> None:
    key = "PATH" if sys.platform == "win32" else "LD_LIBRARY_PATH"
    env = child_environment(tmp_path)
    assert env[key].split(os.pathsep)[0] == str(tmp_path)
    assert child_environment(Path("libs"))[key].split(os.pathsep)[0] == str(Path.cwd() / "libs")
    assert child_environment(None).get(key) == os.environ.get(key)


# --- problems: when a file is no evidence for a build -------------------------------------------


def evidence(tmp_path: Path, **changes: object) -> AppEvidence:
    fields: dict[str, object] = {
        "path": tmp_path / "app-evidence.json",
        "tool": "bundle measure 0.1.0",
        "measured": "2025-01-01T00:00:00Z",
        "platform": "linux-x86_64",
        "gpu": "NVIDIA H200, 570.86.15",
        "ort": "1.31.1",
        "cudnn": "9.13.0",
        "provider": "CUDAExecutionProvider",
        "provider_options": {},
        "dims": {},
        "models": (MeasuredModel("encoder.onnx", "ab" * 32, ("cudnn64_9.dll",)),),
    }
    return AppEvidence(**{**fields, **changes})  # type: ignore[arg-type]


def given(name: str, sha256: str) -> ModelOps:
    """A model given to the build, as bundler.pruning.onnx_models reads it."""
    return ModelOps(Path("models") / name, sha256, frozenset({"MatMul"}))


def test_matching_evidence_has_no_problems(tmp_path: Path) -> None:
    found = problems(evidence(tmp_path), [given("encoder.onnx", "ab" * 32)], "1.31.1", "9.13.1")
    assert found == []


@pytest.mark.parametrize(
    ("changes", "given", "ort", "cudnn", "words"),
    [
        ({}, [], "1.31.1", "9.13.0", ["app-evidence.json measured encoder.onnx", "--model"]),
        ({}, [("encoder.onnx", "ab" * 32), ("head.onnx", "cd" * 32)], "1.31.1", "9.13.0",
         ["head.onnx is not in app-evidence.json", "run bundle measure again"]),
        ({}, [("encoder.onnx", "ab" * 32)], "1.30.0", "9.13.0",
         ["ORT 1.31.1", "ORT 1.30.0", "onnxruntime-gpu==1.30.0"]),
        ({}, [("encoder.onnx", "ab" * 32)], "1.31.1", "9.14.0", ["cuDNN 9.13.0", "9.14.0"]),
        ({"cudnn": None}, [("encoder.onnx", "ab" * 32)], "1.31.1", "9.13.0", ["no cuDNN"]),
        ({"provider": CPU_PROVIDER}, [("encoder.onnx", "ab" * 32)], "1.31.1", "9.13.0",
         [CPU_PROVIDER, "no evidence for a GPU bundle", "--provider cuda"]),
    ],
    ids=["model-not-given", "model-not-measured", "other-ort", "other-cudnn", "no-cudnn", "cpu"],
)  # fmt: skip
def test_each_mismatch_is_one_sentence(
    tmp_path: Path,
    changes: dict[str, object],
    given: list[tuple[str, str]],
    ort: str,
    cudnn: str,
    words: list[str],
) -> None:
    models = [ModelOps(Path(name), sha, frozenset()) for name, sha in given]
    found = problems(evidence(tmp_path, **changes), models, ort, cudnn)
    assert len(found) == 1, found
    assert all(word in found[0] for word in words), found


def test_model_names_compare_folded(tmp_path: Path) -> None:
    """Windows file names: Encoder.ONNX given is encoder.onnx measured."""
    models = [given("Encoder.ONNX", "ab" * 32)]
    assert problems(evidence(tmp_path), models, "1.31.1", "9.13.0") == []


def test_it_describes_where_it_was_measured(tmp_path: Path) -> None:
    text = evidence(tmp_path).describe()
    assert text.startswith("app-evidence.json (ORT 1.31.1, cuDNN 9.13.0, CUDAExecutionProvider")
    assert "NVIDIA H200" in text and "linux-x86_64" in text


def test_loaded_is_the_union_in_lower_case(tmp_path: Path) -> None:
    models = (
        MeasuredModel("a.onnx", "00", ("cudnn64_9.dll", "CUBLASLT64_13.DLL")),
        MeasuredModel("b.onnx", "11", ("cudnn64_9.dll", "cudnn_ops64_9.dll")),
    )
    loaded = evidence(tmp_path, models=models).loaded
    assert loaded == {"cudnn64_9.dll", "cublaslt64_13.dll", "cudnn_ops64_9.dll"}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, ["no such file", "bundle measure"]),
        ("{not json", ["not an app evidence file", "bundle measure"]),
        ('{"schema_version": 2}', ["schema_version 2", "reads 1", "bundle measure again"]),
        ('{"schema_version": 1, "tool": "x"}', ["is missing", "bundle measure again"]),
    ],
    ids=["missing", "not-json", "other-schema", "missing-field"],
)
def test_an_unreadable_file_is_refused_with_its_name(
    tmp_path: Path, content: str | None, words: list[str]
) -> None:
    path = tmp_path / "evidence.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InputFileError) as raised:
        read_app_evidence(path)
    assert raised.value.exit_code == ExitCode.INPUT
    assert str(path) in raised.value.message
    assert all(word in raised.value.message for word in words), raised.value.message


# --- the command, end to end with the real onnxruntime -------------------------------------------


@pytest.fixture(scope="module")
def ort_release() -> str:
    require_module("onnx", _NEEDS)
    ort = require_module("onnxruntime", _NEEDS)
    return str(ort.__version__)


def tiny_model(path: Path) -> Path:
    """MatMul then Relu on [batch, 4] float inputs (`batch` a named dynamic dimension)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    weights = numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])],
        [weights],
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def endless_model(path: Path) -> Path:
    """A Loop whose trip count is 2**62, carrying x through: it runs until the timeout."""
    from onnx import TensorProto, helper, save

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["v_in"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1]),
        ],
    )
    trips = helper.make_tensor("trips", TensorProto.INT64, [], [2**62])
    keep_going = helper.make_tensor("keep_going", TensorProto.BOOL, [], [True])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "keep_going", "x"], ["y"], body=body)],
        "endless",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [trips, keep_going],
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def bundle(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundler", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "BUNDLE_DEBUG": ""},
    )


@pytest.fixture(scope="module")
def measured(
    ort_release: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """(model, evidence file, the command's result) of one real measurement on the CPU."""
    folder = tmp_path_factory.mktemp("measure")
    model = tiny_model(folder / "tiny.onnx")
    out = folder / "evidence" / "app-evidence.json"
    result = bundle(
        "measure", model, "--ort", ort_release, "--provider", "cpu", "--dim", "batch=2",
        "--out", out,
    )  # fmt: skip
    return model, out, result


def test_a_measurement_writes_the_evidence_file(
    measured: tuple[Path, Path, subprocess.CompletedProcess[str]], ort_release: str
) -> None:
    model, out, result = measured
    assert result.returncode == 0, result.stderr
    text = out.read_bytes().decode("utf-8")
    document = json.loads(text)
    assert text == json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert "\r" not in text
    assert document["schema_version"] == 1
    assert document["tool"].startswith("bundle measure ")
    assert document["ort"] == ort_release
    assert document["provider"] == CPU_PROVIDER
    assert document["dims"] == {"batch": 2}
    assert document["cudnn"] is None  # the CPU provider loads no cuDNN
    [entry] = document["models"]
    assert entry["name"] == "tiny.onnx"
    assert entry["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert entry["nodes"] > 0
    assert entry["providers"] == [CPU_PROVIDER]
    assert entry["loaded"] == []
    assert any("onnxruntime" in Path(path).parent.as_posix() for path in entry["modules"])
    assert list(out.parent.iterdir()) == [out]  # no temporary file left beside it


def test_the_report_says_each_model_and_where_the_file_went(
    measured: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    _, out, result = measured
    assert result.stdout.splitlines()[0].startswith("tiny.onnx: ok, ")
    assert result.stdout.splitlines()[-1] == f"wrote {out}"
    assert "[1/1] tiny.onnx: ok" in result.stderr


def test_the_file_reads_back_and_fits_the_model_it_measured(
    measured: tuple[Path, Path, subprocess.CompletedProcess[str]], ort_release: str
) -> None:
    model, out, _ = measured
    read = read_app_evidence(out)
    assert [entry.name for entry in read.models] == ["tiny.onnx"]
    # measured on the CPU: the file is no evidence for a GPU bundle, and says only that
    found = problems(read, [read_model_ops(model)], ort_release, None)
    assert len(found) == 1 and "no evidence for a GPU bundle" in found[0], found


def test_the_file_is_refused_after_the_model_changes_by_one_byte(
    measured: tuple[Path, Path, subprocess.CompletedProcess[str]],
    ort_release: str,
    tmp_path: Path,
) -> None:
    model, out, _ = measured
    data = model.read_bytes()
    at = data.rindex(ONE) + 3
    changed = tmp_path / "tiny.onnx"
    changed.write_bytes(data[:at] + b"\x40" + data[at + 1 :])  # one weight 1.0 -> 4.0
    found = problems(read_app_evidence(out), [read_model_ops(changed)], ort_release, None)
    sentence = next(line for line in found if "tiny.onnx" in line)
    assert "tiny.onnx changed since it was measured" in sentence
    assert "run bundle measure again" in sentence


def test_json_prints_the_document_written(ort_release: str, tmp_path: Path) -> None:
    model, out = tiny_model(tmp_path / "tiny.onnx"), tmp_path / "evidence.json"
    result = bundle(
        "measure", model, "--ort", ort_release, "--provider", "cpu", "--out", out, "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads(out.read_text(encoding="utf-8"))


def test_another_ort_release_is_refused(ort_release: str, tmp_path: Path) -> None:
    model, out = tiny_model(tmp_path / "tiny.onnx"), tmp_path / "evidence.json"
    result = bundle("measure", model, "--ort", "1.19.2", "--provider", "cpu", "--out", out)
    assert result.returncode == ExitCode.CONFIG, result.stderr
    assert f"onnxruntime {ort_release} is installed" in result.stderr
    assert "ORT 1.19.2" in result.stderr
    assert "pip install onnxruntime==1.19.2" in result.stderr
    assert not out.exists()


def test_a_profile_gives_its_ort_release(ort_release: str, tmp_path: Path) -> None:
    """--profile reads the release as build does: the CPU profile of 1.19.2 is ORT 1.19.2."""
    model, out = tiny_model(tmp_path / "tiny.onnx"), tmp_path / "evidence.json"
    result = bundle("measure", model, "--profile", CPU, "--provider", "cpu", "--out", out)
    assert result.returncode == ExitCode.CONFIG, result.stderr
    assert "ORT 1.19.2" in result.stderr and ort_release in result.stderr


def test_a_fallback_from_the_provider_asked_is_a_failed_measurement(
    ort_release: str, tmp_path: Path
) -> None:
    """Asked for CUDA, the session came up on the CPU (here: no CUDA at all; on a GPU machine:
    CUDA or cuDNN not found). Not a configuration error: the machine's measurement failed,
    so no file."""
    model, out = tiny_model(tmp_path / "tiny.onnx"), tmp_path / "evidence.json"
    result = bundle("measure", model, "--ort", ort_release, "--out", out)
    assert result.returncode == ExitCode.MEASURE_FAILED, result.stderr
    assert "tiny.onnx: the session fell back to CPUExecutionProvider" in result.stderr
    assert "not CUDAExecutionProvider" in result.stderr
    assert f"pip install onnxruntime-gpu=={ort_release}" in result.stderr
    assert "tiny.onnx: FAILED" in result.stdout
    assert not out.exists()


def test_a_model_that_runs_too_long_fails_by_name(ort_release: str, tmp_path: Path) -> None:
    model, out = endless_model(tmp_path / "endless.onnx"), tmp_path / "evidence.json"
    result = bundle(
        "measure", model, "--ort", ort_release, "--provider", "cpu", "--timeout", "3",
        "--out", out,
    )  # fmt: skip
    assert result.returncode == ExitCode.MEASURE_FAILED, result.stderr
    assert "endless.onnx: timed out after 3 s in phase run" in result.stderr
    assert not out.exists()


def test_a_file_that_is_no_model_is_an_input_error(ort_release: str, tmp_path: Path) -> None:
    model, out = tmp_path / "notes.onnx", tmp_path / "evidence.json"
    model.write_text("not a model", encoding="utf-8")
    result = bundle("measure", model, "--ort", ort_release, "--provider", "cpu", "--out", out)
    assert result.returncode == ExitCode.INPUT, result.stderr
    assert "notes.onnx: not an ONNX model" in result.stderr
    assert not out.exists()


def test_two_models_of_one_file_name_are_refused(ort_release: str, tmp_path: Path) -> None:
    """The file names models by file name, folded as Windows folds them."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tiny_model(tmp_path / "a" / "m.onnx"), tiny_model(tmp_path / "b" / "M.onnx")
    out = tmp_path / "evidence.json"
    result = bundle(
        "measure", first, second, "--ort", ort_release, "--provider", "cpu", "--out", out
    )
    assert result.returncode == ExitCode.CONFIG, result.stderr
    assert "have one file name" in result.stderr and "rename one" in result.stderr
    assert not out.exists()


def test_the_child_feeds_a_scalar_input_as_an_array() -> None:
    """A scalar input (an If's condition, a Loop's trip count) is fed as a 0-D array: ORT's
    Python binding refuses a bare numpy scalar ("Unable to handle object of type
    numpy.bool", seen with the If probe model of tools/evidence/probe_ops.py)."""
    np = require_module("numpy", 'numpy comes with onnx: pip install "ort-bundle[models]"')

    from bundler.measure.child import feeds

    class Arg:
        def __init__(self, name: str, kind: str, shape: list[object]) -> None:
            self.name, self.type, self.shape = name, kind, shape

    args = [
        Arg("cond", "tensor(bool)", []),
        Arg("x", "tensor(float)", []),
        Arg("trips", "tensor(int64)", []),
        Arg("mask", "tensor(int64)", ["batch", 8]),
    ]
    fed = feeds(np, args, {"batch": 2})
    assert all(isinstance(value, np.ndarray) for value in fed.values())
    assert [fed[name].shape for name in ("cond", "x", "trips")] == [(), (), ()]
    assert fed["mask"].shape == (2, 8)
