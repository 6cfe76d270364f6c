"""Measure which shared libraries ONNX Runtime's CUDA execution provider maps, per operator type.

cuDNN 9 and CUDA load most of their libraries with dlopen/LoadLibrary at run time, and which ones
depends on the operators a model uses: an import-table walk cannot tell. This probe builds one
tiny ONNX model per operator type (float32, fixed shapes, weights and integer arguments as
initializers; opset 17, Gelu opset 20), plus two app-like models: `transformer` (MatMul, Add,
LayerNormalization, Transpose, MatMul, Softmax, MatMul) and `conv` (Conv, BatchNormalization,
Relu, MaxPool). Each model runs in a fresh Python process that imports onnxruntime and numpy
only, and reads /proc/self/maps (every mapped file whose name ends in `.so` or holds `.so.`):

  before     mapped after `import onnxruntime`, before the session
  at_create  new after `InferenceSession(model, providers=[PROVIDER])`
  at_run     new after one `run` with seeded random inputs
  all        everything mapped at the end of the measured run

A result is ok when the session was created on PROVIDER (first of `get_providers()`; otherwise
"provider fell back: ...") and the run succeeded; a crash or a timeout (120 s) is a failed
result with the reason. After the measurement a second, profiled session tells on which
provider every node ran (`placement`, `op_on_provider`; `at_profile` lists what only that
session mapped). Single-op models run with graph optimizations disabled (nothing is folded or
fused away), the app-like ones with all of them (as an app would): `--optimization` overrides.

On the GPU machine (no network; onnxruntime-gpu in a `pip install --target` folder, the CUDA
and cuDNN wheels in a venv; onnx and numpy importable by the python that runs this):

    SP=<venv>/lib/python3.X/site-packages
    export LD_LIBRARY_PATH=$SP/nvidia/cu13/lib:$SP/nvidia/cudnn/lib
    python3 -m tools.evidence.gpu_probe measure --ort-dir <ort-target-dir> --out raw.json
    python3 -m tools.evidence.gpu_probe prove --ort-dir <ort-target-dir> --libs <kept-dir> \\
        --model transformer --out proof-transformer.json

`measure` writes the raw JSON (platform, python, onnxruntime version, provider, GPU name and
driver from nvidia-smi, the LD_LIBRARY_PATH folders, cuDNN and CUDA runtime versions read with
ctypes in a child, one result per model); it exits 1 when a model failed, after writing.
`prove` runs one model in a fresh process whose LD_LIBRARY_PATH is exactly LIBDIR (a folder of
copies of, or symlinks to, the libraries kept) and reports, for every mapped libcudnn*,
libcublas*, libcudart*, libcurand*, libcufft*, libnvrtc*, libnvJitLink* and libonnxruntime*,
its real path and whether it came from LIBDIR (its real path is the real path of an entry of
LIBDIR); ORT's own onnxruntime/capi/libonnxruntime_* count as "ort"; the rest is "foreign".
It exits 0 only when the run was ok and nothing was foreign. `models` lists (and writes) the
probe models. Locally, without a GPU: `--provider CPUExecutionProvider`, `--ort-dir` omitted
(the installed onnxruntime).

The raw output of a GPU run is committed to manifests/evidence/ (one file per ORT release and
CUDA flavour), the evidence the CUDA runtime rules are derived from. Standard library, onnx,
numpy and onnxruntime only; of `bundler`, only `bundle measure`'s child (bundler.measure.child,
standard library only, as are the package files above it). Run from the repository root: each
child is this module again (`python -m tools.evidence.gpu_probe`), in the same folder.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bundler.measure import child as measuring

# onnx.TensorProto element types (onnx is imported lazily: the measuring child must not map it)
FLOAT, UINT8, INT64, BOOL, FLOAT16 = 1, 2, 7, 9, 10
CUDA = "CUDAExecutionProvider"
CHILD_TIMEOUT_S = 120
WATCHED = (
    "libcudnn",
    "libcublas",
    "libcudart",
    "libcurand",
    "libcufft",
    "libnvrtc",
    "libnvJitLink",
    "libonnxruntime",
)
LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}
APPS = ("transformer", "conv")
OPTIONS_ENV = "GPU_PROBE_OPTIONS"  # the CUDA EP's options for a child, as a JSON object
DIMS_ENV = "GPU_PROBE_DIMS"  # named dynamic dimensions of a model's inputs (JSON)
ONES_ENV = "GPU_PROBE_ONES"  # inputs fed all ones (JSON list of names)
# What a child runs: this module, as `python -m` names it (also when gpu_matrix imports it).
MODULE = __spec__.name

Spec = tuple[Any, ...]  # a graph input: (name, shape) or (name, shape, element type)
Out = str | tuple[str, int]  # a graph output: name (float) or (name, element type)


# --- models -------------------------------------------------------------------------------


def _model(
    name: str,
    nodes: list[Any],
    inputs: list[Spec],
    outs: Iterable[Out],
    inits: dict[str, Any],
    opset: int = 17,
) -> Any:
    """An onnx ModelProto of `nodes`: output shapes inferred (strictly), checked by onnx.checker."""
    from onnx import checker, helper, numpy_helper, shape_inference

    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        name,
        [vi(i[0], i[2] if len(i) > 2 else FLOAT, i[1]) for i in inputs],
        [vi(o, FLOAT, None) if isinstance(o, str) else vi(o[0], o[1], None) for o in outs],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    opsets = [helper.make_opsetid("", opset)]
    ir = helper.find_min_ir_version_for(opsets)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gpu_probe", ir_version=ir)
    model = shape_inference.infer_shapes(model, strict_mode=True)  # fills the outputs' shapes
    checker.check_model(model, full_check=True)
    return model


def _op(
    op_type: str,
    inputs: list[Spec],
    inits: dict[str, Any] | None = None,
    outs: Iterable[Out] = ("y",),
    feed: list[str] | None = None,
    opset: int = 17,
    **attrs: Any,
) -> Any:
    """A one-node model; the node reads the graph inputs, then the initializers (or `feed`)."""
    from onnx import helper

    inits = inits or {}
    names = feed if feed is not None else [i[0] for i in inputs] + list(inits)
    outs = list(outs)
    outputs = [o if isinstance(o, str) else o[0] for o in outs]
    node = helper.make_node(op_type, names, outputs, name=op_type, **attrs)
    return _model(op_type, [node], inputs, outs, inits, opset)


def _w(*shape: int, low: float | None = None) -> Any:
    """Seeded float32 weights (uniform in [low, low + 1) when low is given)."""
    import numpy as np

    rng = np.random.default_rng(sum(shape) + len(shape))
    if low is not None:
        return (rng.random(shape) + low).astype(np.float32)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def _i(*values: int, scalar: bool = False) -> Any:
    """An int64 initializer: a 1-D array of `values`, or one scalar."""
    import numpy as np

    return np.array(values[0] if scalar else list(values), dtype=np.int64)


def _f(value: float) -> Any:
    """A float32 scalar initializer."""
    import numpy as np

    return np.array(value, dtype=np.float32)


def _elementwise() -> dict[str, Any]:
    """Binary, unary and comparison operators on [2, 8]."""
    import numpy as np

    a, b, x = ("a", [2, 8]), ("b", [2, 8]), ("x", [2, 8])
    m: dict[str, Any] = {op: _op(op, [a, b]) for op in ("Add", "Sub", "Mul", "Div", "Max", "Min")}
    unary = ("Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Abs", "Neg", "Floor")
    m |= {op: _op(op, [x]) for op in (*unary, "Reciprocal", "Identity", "Dropout")}
    m["LeakyRelu"] = _op("LeakyRelu", [x], alpha=0.1)
    m["HardSigmoid"] = _op("HardSigmoid", [x], alpha=0.2, beta=0.5)
    m["PRelu"] = _op("PRelu", [x], {"slope": _w(8)})
    m["Gelu"] = _op("Gelu", [x], opset=20)
    m["Pow"] = _op("Pow", [x], {"e": _f(2.0)})
    m["Clip"] = _op("Clip", [x], {"lo": _f(0.6), "hi": _f(1.2)})
    m |= {op: _op(op, [a, b], outs=[("y", BOOL)]) for op in ("Equal", "Less", "Greater")}
    m["Not"] = _op("Not", [("a", [2, 8], BOOL)], outs=[("y", BOOL)])
    m["Where"] = _op("Where", [("c", [2, 8], BOOL), a, b])
    m["Cast"] = _op("Cast", [x], outs=[("y", FLOAT16)], to=FLOAT16)
    scale, zero = _f(0.01), np.array(128, dtype=np.uint8)
    m["QuantizeLinear"] = _op("QuantizeLinear", [x], {"s": scale, "z": zero}, outs=[("y", UINT8)])
    m["DequantizeLinear"] = _op("DequantizeLinear", [("q", [2, 8], UINT8)], {"s": scale, "z": zero})
    return m


def _reductions() -> dict[str, Any]:
    """Matrix products, normalizations over the last axis, reductions, cumulative ops."""
    x = ("x", [2, 8])
    m: dict[str, Any] = {"MatMul": _op("MatMul", [x], {"w": _w(8, 4)})}
    m["Gemm"] = _op("Gemm", [x], {"w": _w(8, 4), "c": _w(4)})
    m["Einsum"] = _op("Einsum", [x], {"w": _w(8, 4)}, equation="ij,jk->ik")
    m["Softmax"] = _op("Softmax", [x], axis=-1)
    m["LogSoftmax"] = _op("LogSoftmax", [x], axis=-1)
    m["LayerNormalization"] = _op(
        "LayerNormalization", [x], {"scale": _w(8, low=0.5), "bias": _w(8)}, axis=-1
    )
    m["ReduceMean"] = _op("ReduceMean", [x], axes=[1], keepdims=1)  # axes: attribute until 18
    m["ReduceSum"] = _op("ReduceSum", [x], {"axes": _i(1)}, keepdims=1)  # an input since 13
    m["ReduceMax"] = _op("ReduceMax", [x], axes=[1], keepdims=1)
    m["ArgMax"] = _op("ArgMax", [x], outs=[("y", INT64)], axis=1)
    m["TopK"] = _op("TopK", [x], {"k": _i(3)}, outs=["values", ("indices", INT64)], axis=1)
    m["CumSum"] = _op("CumSum", [x], {"axis": _i(1, scalar=True)})
    m["NonZero"] = _op("NonZero", [x], outs=[("y", INT64)])
    return m


def _shapes() -> dict[str, Any]:
    """Shape and data movement operators."""
    x, x4 = ("x", [2, 8]), ("x", [1, 4, 8, 8])
    m: dict[str, Any] = {"Transpose": _op("Transpose", [x], perm=[1, 0])}
    m["Reshape"] = _op("Reshape", [x], {"shape": _i(4, 4)})
    m["Flatten"] = _op("Flatten", [x4], axis=1)
    m["Squeeze"] = _op("Squeeze", [x4], {"axes": _i(0)})
    m["Unsqueeze"] = _op("Unsqueeze", [x], {"axes": _i(0)})
    m["Concat"] = _op("Concat", [("a", [2, 8]), ("b", [2, 8])], axis=0)
    m["Split"] = _op("Split", [x], {"split": _i(3, 5)}, outs=["y0", "y1"], axis=1)
    steps = {"starts": _i(0), "ends": _i(4), "axes": _i(1), "steps": _i(1)}
    m["Slice"] = _op("Slice", [x], steps)
    m["Gather"] = _op("Gather", [("x", [8, 4])], {"indices": _i(1, 0, 7)}, axis=0)
    gather = {"indices": _i(0, 7, 2, 1, 3, 6).reshape(2, 3)}
    m["GatherElements"] = _op("GatherElements", [x], gather, axis=1)
    m["ScatterND"] = _op(
        "ScatterND", [x, ("u", [1, 8])], {"i": _i(1).reshape(1, 1)}, feed=["x", "i", "u"]
    )
    m["Expand"] = _op("Expand", [("x", [1, 8])], {"shape": _i(4, 8)})
    m["Tile"] = _op("Tile", [x], {"repeats": _i(2, 1)})
    m["Pad"] = _op("Pad", [x4], {"pads": _i(0, 0, 1, 1, 0, 0, 1, 1)}, mode="constant")
    m["DepthToSpace"] = _op("DepthToSpace", [x4], blocksize=2)
    m["Shape"] = _op("Shape", [x], outs=[("y", INT64)])
    m["ConstantOfShape"] = _constant_of_shape()
    m["Range"] = _op(
        "Range",
        [],
        {"start": _i(0, scalar=True), "limit": _i(8, scalar=True), "delta": _i(1, scalar=True)},
        outs=[("y", INT64)],
    )
    return m


def _constant_of_shape() -> Any:
    from onnx import helper

    value = helper.make_tensor("value", FLOAT, [1], [1.0])
    return _op("ConstantOfShape", [], {"shape": _i(2, 8)}, value=value)


def _nn() -> dict[str, Any]:
    """Convolution, pooling, normalization and resizing on [1, 4, 8, 8]."""
    x = ("x", [1, 4, 8, 8])
    m: dict[str, Any] = {
        "Conv": _op("Conv", [x], {"w": _w(8, 4, 3, 3), "b": _w(8)}, pads=[1, 1, 1, 1]),
        "ConvTranspose": _op("ConvTranspose", [x], {"w": _w(4, 8, 3, 3)}, strides=[2, 2]),
    }
    stats = {"scale": _w(4, low=0.5), "bias": _w(4), "mean": _w(4), "var": _w(4, low=0.5)}
    m["BatchNormalization"] = _op("BatchNormalization", [x], stats)
    m["InstanceNormalization"] = _op(
        "InstanceNormalization", [x], {"scale": _w(4, low=0.5), "bias": _w(4)}, epsilon=1e-5
    )
    m["MaxPool"] = _op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    m["AveragePool"] = _op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    m["GlobalAveragePool"] = _op("GlobalAveragePool", [x])
    scales = _scales()
    m["Resize"] = _op("Resize", [x], {"scales": scales}, feed=["x", "", "scales"], mode="nearest")
    boxes, scores = ("boxes", [1, 6, 4]), ("scores", [1, 1, 6])
    m["NonMaxSuppression"] = _op(
        "NonMaxSuppression", [boxes, scores], {"max": _i(3), "iou": _f(0.5)}, outs=[("y", INT64)]
    )
    return m


def _scales() -> Any:
    import numpy as np

    return np.array([1.0, 1.0, 2.0, 2.0], dtype=np.float32)


def _rnn() -> dict[str, Any]:
    """LSTM, GRU, RNN: sequence 3, batch 2, input 8, hidden 4, forward."""
    x, h = ("x", [3, 2, 8]), 4
    m: dict[str, Any] = {}
    for op, gates in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
        weights = {"w": _w(1, gates * h, 8), "r": _w(1, gates * h, h), "b": _w(1, 2 * gates * h)}
        m[op] = _op(op, [x], weights, hidden_size=h)
    return m


def _transformer() -> Any:
    """Attention-ish: LayerNorm(x @ W + b), its scores against itself, softmax, @ values."""
    from onnx import helper

    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "w"], ["q"], name="proj"),
        node("Add", ["q", "b"], ["h"], name="bias"),
        node("LayerNormalization", ["h", "gamma", "beta"], ["n"], name="norm", axis=-1),
        node("Transpose", ["n"], ["nt"], name="keys", perm=[0, 2, 1]),
        node("MatMul", ["n", "nt"], ["s"], name="scores"),
        node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
        node("MatMul", ["p", "n"], ["y"], name="context"),
    ]
    inits = {"w": _w(16, 16), "b": _w(16), "gamma": _w(16, low=0.5), "beta": _w(16)}
    return _model("transformer", nodes, [("x", [1, 8, 16])], ["y"], inits)


def _conv_app() -> Any:
    """Conv 3x3 (3 -> 8 channels, 32x32), BatchNormalization, Relu, MaxPool 2x2."""
    from onnx import helper

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"], name="bn"),
        node("Relu", ["n"], ["r"], name="relu"),
        node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits = {"w": _w(8, 3, 3, 3), "b": _w(8), "scale": _w(8, low=0.5), "bias": _w(8)}
    inits |= {"mean": _w(8), "var": _w(8, low=0.5)}
    return _model("conv", nodes, [("x", [1, 3, 32, 32])], ["y"], inits)


BUILDERS: tuple[Callable[[], dict[str, Any]], ...] = (_elementwise, _reductions, _shapes, _nn, _rnn)


def models(folder: Path, names: Iterable[str] | None = None) -> dict[str, Path]:
    """Write the probe models into `folder`: {name: path}, op types first, then the apps.

    Op-type models are `op-<OpType>.onnx`, app-like ones `app-<name>.onnx` (`conv` and `Conv`
    differ only in case). `names` limits which are written; an unknown name is a ValueError.
    """
    import onnx

    built: dict[str, Any] = {}
    for builder in BUILDERS:
        built |= builder()
    ops = sorted(built)
    built |= {"transformer": _transformer(), "conv": _conv_app()}
    wanted = list(names) if names is not None else [*ops, *APPS]
    unknown = [n for n in wanted if n not in built]
    if unknown:
        raise ValueError(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(built)}")
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name in wanted:
        path = folder / f"{'app' if name in APPS else 'op'}-{name}.onnx"
        onnx.save(built[name], path)
        paths[name] = path
    return paths


# --- the measuring child (imports onnxruntime and numpy only) ------------------------------


def _mapped() -> set[str]:
    """Paths of the shared objects mapped into this process (/proc/self/maps), as bundle
    measure's child reads them."""
    return set(measuring.loaded_modules())


def _feeds(np: Any, session: Any) -> dict[str, Any]:
    """Seeded random inputs, as bundle measure's child makes them: floats in [0.5, 1.5) (Log,
    Sqrt, Pow stay finite), ints 0 or 1; a named dynamic dimension as `$GPU_PROBE_DIMS` (JSON,
    name -> size: an LLM's past and total lengths must agree) gives it, else 1; the inputs
    `$GPU_PROBE_ONES` names (a JSON list) are all ones."""
    dims = json.loads(os.environ.get(DIMS_ENV) or "{}")
    fed = dict(measuring.feeds(np, session.get_inputs(), dims))
    for name in json.loads(os.environ.get(ONES_ENV) or "[]"):  # an LLM's attention mask
        fed[name] = np.ones_like(fed[name])
    return fed


def _options(ort: Any, level: str, profile_prefix: str | None = None) -> Any:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[level])
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def _emit(result: dict[str, Any]) -> None:
    """One JSON line per finished phase: the parent keeps the last one if the child dies."""
    print(json.dumps(result), flush=True)


def _phase(result: dict[str, Any], key: str, seen: set[str], action: Callable[[], Any]) -> Any:
    """Run `action`; record the newly mapped objects under `key` and its time, even on error."""
    start = time.perf_counter()
    try:
        return action()
    finally:
        now = _mapped()
        result[key] = sorted(now - seen)
        seen |= now
        result[f"{key.removeprefix('at_')}_s"] = round(time.perf_counter() - start, 3)
        result["phase"] = key
        _emit(result)


def _placement(ort: Any, model: str, provider: str, level: str) -> list[dict[str, str]]:
    """Which provider ran each node: a second session with profiling, one run."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="gpu-probe-") as tmp:
        options = _options(ort, level, profile_prefix=os.path.join(tmp, "profile"))
        session = ort.InferenceSession(model, sess_options=options, providers=_providers(provider))
        session.run(None, _feeds(np, session))
        with open(session.end_profiling(), encoding="utf-8") as fh:
            events = json.load(fh)
    placed: dict[str, dict[str, str]] = {}
    for event in events:
        args, name = event.get("args") or {}, str(event.get("name", ""))
        if event.get("cat") == "Node" and "provider" in args and name.endswith("_kernel_time"):
            node = name.removesuffix("_kernel_time")
            placed[node] = {
                "node": node,
                "op": args.get("op_name", ""),
                "provider": args["provider"],
            }
    return sorted(placed.values(), key=lambda p: p["node"])


def _on_provider(placement: list[dict[str, str]], provider: str) -> bool:
    """Whether every node but ORT's own copies between devices ran on `provider`."""
    ops = [p for p in placement if not p["op"].startswith("Memcpy")]
    return bool(ops) and all(p["provider"] == provider for p in ops)


def _providers(provider: str) -> list[Any]:
    """The provider, with the options of $GPU_PROBE_OPTIONS (a JSON object) when set."""
    options = json.loads(os.environ.get(OPTIONS_ENV) or "{}")
    return [(provider, options)] if options else [provider]


class FellBack(RuntimeError):
    """The session came up, but not on the provider asked for."""


def _measure(result: dict[str, Any], model: str, provider: str, level: str) -> tuple[Any, Any]:
    """Import, create, run; fills `result`. Returns (onnxruntime module, session)."""
    import numpy as np
    import onnxruntime as ort

    result["onnxruntime"] = ort.__version__
    result["onnxruntime_path"] = os.path.dirname(ort.__file__)
    ort.set_default_logger_severity(3)
    np.random.default_rng(0)  # numpy.random's own extensions (and libcrypto) map here, not at run
    seen = _mapped()
    result["before"] = sorted(seen)

    def create() -> Any:
        options = _options(ort, level)
        return ort.InferenceSession(model, sess_options=options, providers=_providers(provider))

    session = _phase(result, "at_create", seen, create)
    result["providers"] = session.get_providers()
    if not result["providers"] or result["providers"][0] != provider:
        raise FellBack(f"provider fell back: {result['providers']} (asked for {provider})")
    feeds = _feeds(np, session)
    _phase(result, "at_run", seen, lambda: session.run(None, feeds))
    result["all"] = sorted(_mapped())
    return ort, session


def child_one(model: str, name: str, provider: str, level: str, placement: bool) -> dict[str, Any]:
    """The `_one` subcommand: measure one model in this (fresh) process."""
    result: dict[str, Any] = {"model": name, "providers": [], "ok": False, "error": None}
    result |= {"optimization": level, "before": [], "at_create": [], "at_run": [], "all": []}
    try:
        ort, session = _measure(result, model, provider, level)
        result["ok"] = True
    except Exception as exc:
        result["error"] = str(exc) if isinstance(exc, FellBack) else f"{type(exc).__name__}: {exc}"
        result["all"] = sorted(_mapped())
        return result
    del session
    if placement:
        seen = set(result["all"])
        try:
            result["placement"] = _placement(ort, model, provider, level)
            result["op_on_provider"] = _on_provider(result["placement"], provider)
        except Exception as exc:
            result["placement_error"] = f"{type(exc).__name__}: {exc}"
        result["at_profile"] = sorted(_mapped() - seen)
    return result


def _load_first(names: Iterable[str]) -> ctypes.CDLL | None:
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def child_versions() -> dict[str, Any]:
    """The `_versions` subcommand: cuDNN and CUDA runtime versions through ctypes, or null."""
    found: dict[str, Any] = {"cudnn_version": None, "cudart_version": None}
    cudnn = _load_first(["libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"])
    if cudnn is not None:
        cudnn.cudnnGetVersion.restype = ctypes.c_size_t
        found["cudnn_version"] = int(cudnn.cudnnGetVersion())
    names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"]
    cudart = _load_first(names)
    if cudart is not None:
        for key, func in (
            ("cudart_version", "cudaRuntimeGetVersion"),
            ("cuda_driver_version", "cudaDriverGetVersion"),
        ):
            value = ctypes.c_int(0)
            if getattr(cudart, func)(ctypes.byref(value)) == 0:
                found[key] = value.value
    found["paths"] = sorted(p for p in _mapped() if os.path.basename(p).startswith(WATCHED))
    return found


# --- the parent ---------------------------------------------------------------------------


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data or ""


def _spawn(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run this script's hidden subcommand in a fresh interpreter; its last JSON line.

    The line gets "_failure" when the child timed out or died before it said "done".
    """
    command = [sys.executable, "-m", MODULE, *argv]
    failure = None
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout, stderr, code = _text(exc.stdout), _text(exc.stderr), None
        failure = f"timed out after {timeout:g} s"
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    record: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if failure is None and not record.get("done"):
        how = f"signal {signal.Signals(-code).name}" if code and code < 0 else f"exit {code}"
        failure = f"child died ({how})"
    if failure:
        last = record.get("phase", "start")
        tail = " | ".join(stderr.strip().splitlines()[-5:])
        record["_failure"] = f"{failure}, last phase: {last}" + (
            f"; stderr: {tail}" if tail else ""
        )
    return record


def _child_args(
    path: Path, name: str, provider: str, ort_dir: str | None, level: str, placement: bool
) -> list[str]:
    args = ["_one", str(path), "--name", name, "--provider", provider, "--level", level]
    if ort_dir:
        args += ["--ort-dir", ort_dir]
    return args + ([] if placement else ["--no-placement"])


def _level(name: str, optimization: str) -> str:
    if optimization != "auto":
        return optimization
    return "all" if name in APPS else "disable"


def measure_one(
    path: Path, name: str, args: argparse.Namespace, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One model in a fresh child; a crash or timeout is a failed result with the reason."""
    level = _level(name, args.optimization)
    argv = _child_args(path, name, args.provider, args.ort_dir, level, args.placement)
    record = _spawn(argv, args.timeout, env)
    failure = record.pop("_failure", None)
    record.setdefault("model", name)
    for key in ("providers", "before", "at_create", "at_run", "all"):
        record.setdefault(key, [])
    record.pop("done", None)
    if failure:
        record["ok"] = False
        record["error"] = f"{record['error']}; {failure}" if record.get("error") else failure
    return record


def _gpu() -> str | None:
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        proc = subprocess.run(query, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def _progress(index: int, total: int, record: dict[str, Any], seconds: float) -> None:
    head = f"[{index}/{total}] {record['model']}:"
    if not record.get("ok"):
        print(f"{head} FAILED {record.get('error')} ({seconds:.1f} s)", file=sys.stderr)
        return
    placed = {True: "", False: " (nodes off the provider)", None: ""}
    where = placed[record.get("op_on_provider")]
    counts = f"+{len(record['at_create'])} at create, +{len(record['at_run'])} at run"
    print(f"{head} ok {counts}{where} ({seconds:.1f} s)", file=sys.stderr)


def _header(args: argparse.Namespace, versions: dict[str, Any]) -> dict[str, Any]:
    library_path = os.environ.get("LD_LIBRARY_PATH", "")
    return {
        "probe": "tools/evidence/gpu_probe.py",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "onnxruntime": None,
        "onnxruntime_path": None,
        "ort_dir": args.ort_dir,
        "provider": args.provider,
        "optimization": args.optimization,
        "gpu": _gpu(),
        "library_dirs": [d for d in library_path.split(os.pathsep) if d],
        "cudnn_version": versions.get("cudnn_version"),
        "cudart_version": versions.get("cudart_version"),
        "cuda_driver_version": versions.get("cuda_driver_version"),
        "version_libs": versions.get("paths", []),
        "results": [],
    }


def _write(data: dict[str, Any], out: str) -> None:
    text = json.dumps(data, indent=1) + "\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")


def cmd_measure(args: argparse.Namespace) -> int:
    """Every model (or --models) in its own child; the raw JSON to --out."""
    versions = _spawn(["_versions"], args.timeout)
    versions.pop("_failure", None)
    raw = _header(args, versions)
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-probe-models-") as tmp:
        folder = Path(args.models_dir) if args.models_dir else Path(tmp)
        paths = models(folder, args.models.split(",") if args.models else None)
        for index, (name, path) in enumerate(paths.items(), 1):
            start = time.perf_counter()
            record = measure_one(path, name, args)
            _progress(index, len(paths), record, time.perf_counter() - start)
            raw["results"].append(record)
    first = next((r for r in raw["results"] if r.get("onnxruntime")), {})
    raw["onnxruntime"] = first.get("onnxruntime")
    raw["onnxruntime_path"] = first.get("onnxruntime_path")
    raw["elapsed_s"] = round(time.perf_counter() - begin, 1)
    _write(raw, args.out)
    failed = [r["model"] for r in raw["results"] if not r["ok"]]
    total = len(raw["results"])
    print(f"{total - len(failed)}/{total} ok in {raw['elapsed_s']} s", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _origin(path: str, folder: dict[str, str]) -> str:
    """'folder' (real path of an entry of LIBDIR), 'ort' (onnxruntime/capi/), or 'foreign'."""
    real = Path(os.path.realpath(path))
    if str(real) in folder:
        return "folder"
    in_capi = real.parent.name == "capi" and real.parent.parent.name == "onnxruntime"
    return "ort" if in_capi and real.name.startswith("libonnxruntime") else "foreign"


def classify(mapped: Iterable[str], libdir: Path) -> dict[str, Any]:
    """The watched libraries among `mapped`, each with where it came from."""
    folder = {os.path.realpath(p): p.name for p in libdir.iterdir()} if libdir.is_dir() else {}
    libs, used = [], set()
    for path in sorted(mapped):
        if not os.path.basename(path).startswith(WATCHED):
            continue
        origin = _origin(path, folder)
        real = os.path.realpath(path)
        used.add(real)
        name = os.path.basename(path)
        libs.append(
            {"name": name, "path": real, "from_folder": origin == "folder", "origin": origin}
        )
    foreign = sorted({lib["name"] for lib in libs if lib["origin"] == "foreign"})
    unused = sorted(name for real, name in folder.items() if real not in used)
    return {"libs": libs, "foreign": foreign, "unused": unused}


def cmd_prove(args: argparse.Namespace) -> int:
    """One model with LD_LIBRARY_PATH exactly LIBDIR: where every watched library came from."""
    libdir = Path(args.libs).resolve()
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    with tempfile.TemporaryDirectory(prefix="gpu-probe-prove-") as tmp:
        if args.model.endswith(".onnx"):  # an app's model file: run as the app would
            path, args.optimization = Path(args.model), "all"
        else:
            path = models(Path(tmp), [args.model])[args.model]
        record = measure_one(path, args.model, args, env)
    proof = {"model": args.model, "provider": args.provider, "libdir": str(libdir)}
    proof |= {"onnxruntime": record.get("onnxruntime"), "providers": record["providers"]}
    proof |= {"ok": record["ok"], "error": record["error"]}
    proof |= {"op_on_provider": record.get("op_on_provider")}
    proof |= classify(record["all"], libdir)
    _write(proof, args.out)
    state = "ok" if record["ok"] else f"FAILED {record['error']}"
    foreign = ", ".join(proof["foreign"]) or "none"
    print(
        f"{args.model}: {state}; {len(proof['libs'])} libraries, foreign: {foreign}",
        file=sys.stderr,
    )
    return 0 if record["ok"] and not proof["foreign"] else 1


def cmd_models(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="gpu-probe-models-") as tmp:
        paths = models(Path(args.out_dir) if args.out_dir else Path(tmp))
        for name, path in paths.items():
            print(f"{name}\t{path if args.out_dir else path.name}")
    return 0


# --- command line -------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ort-dir",
        metavar="DIR",
        help="a `pip install --target` folder holding onnxruntime(-gpu): put first "
        "on the children's sys.path (default: the installed onnxruntime)",
    )
    parser.add_argument(
        "--provider",
        default=CUDA,
        metavar="P",
        help=f"the execution provider to measure (default {CUDA}; "
        "CPUExecutionProvider for a smoke test without a GPU)",
    )
    parser.add_argument(
        "--optimization",
        default="auto",
        choices=["auto", *LEVELS],
        help="graph optimization level; auto (default): disable for the op-type "
        "models, all for the app-like ones",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=CHILD_TIMEOUT_S,
        metavar="S",
        help=f"seconds per child process (default {CHILD_TIMEOUT_S})",
    )
    parser.add_argument(
        "--no-placement",
        dest="placement",
        action="store_false",
        help="skip the second, profiled session that tells where each node ran",
    )
    parser.add_argument(
        "--out",
        default="-",
        metavar="FILE",
        help="where the JSON goes (default -, standard output)",
    )


def _hidden(sub: Any) -> None:
    one = sub.add_parser("_one")
    one.add_argument("model")
    one.add_argument("--name", required=True)
    one.add_argument("--provider", required=True)
    one.add_argument("--level", choices=list(LEVELS), required=True)
    one.add_argument("--ort-dir")
    one.add_argument("--no-placement", dest="placement", action="store_false")
    sub.add_parser("_versions").add_argument("--ort-dir")


def parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    top = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description=__doc__, formatter_class=raw
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="{measure,prove,models}")
    measure = sub.add_parser(
        "measure",
        help="map libraries per op type",
        description="Run every probe model in its own fresh process and "
        "write the raw JSON (see the top-level --help).",
    )
    _common(measure)
    measure.add_argument(
        "--models", metavar="NAME,...", help="only these models (names as `models` lists them)"
    )
    measure.add_argument(
        "--models-dir", metavar="DIR", help="keep the models in DIR (default: a temporary folder)"
    )
    prove = sub.add_parser(
        "prove",
        help="run one model on LIBDIR alone",
        description="Run one model in a fresh process with LD_LIBRARY_PATH exactly LIBDIR; "
        "report each mapped libcudnn*, libcublas*, libcudart*, libcurand*, libcufft*, libnvrtc*, "
        "libnvJitLink* and libonnxruntime*: its real path and its origin, 'folder' (the real "
        "path of an entry of LIBDIR, which may be a symlink), 'ort' (onnxruntime/capi/ of the "
        "onnxruntime used) or 'foreign'. Exit 0 when the run was ok and nothing is foreign.",
    )
    _common(prove)
    prove.add_argument(
        "--libs",
        required=True,
        metavar="LIBDIR",
        help="folder of the kept libraries (copies or symlinks)",
    )
    prove.add_argument(
        "--model",
        required=True,
        metavar="NAME",
        help="transformer, conv, an op type (Conv, MatMul, ...), or an .onnx file (run with "
        "every graph optimization, as an app would)",
    )
    listing = sub.add_parser("models", help="list the probe models (and write them)")
    listing.add_argument("--out-dir", metavar="DIR", help="write the .onnx files into DIR")
    _hidden(sub)
    return top


def _run_hidden(args: argparse.Namespace) -> int:
    if args.ort_dir:
        sys.path.insert(0, os.path.abspath(args.ort_dir))
    if args.command == "_versions":
        _emit({**child_versions(), "done": True})
        return 0
    result = child_one(args.model, args.name, args.provider, args.level, args.placement)
    _emit({**result, "done": True})
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command.startswith("_"):
        return _run_hidden(args)
    commands = {"measure": cmd_measure, "prove": cmd_prove, "models": cmd_models}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
