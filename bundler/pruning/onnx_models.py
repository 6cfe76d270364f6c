"""Read layer: the operator types an ONNX model runs, and the SHA-256 of its file.

The `onnx` package is an optional dependency (`pip install "ort-bundle[models]"`), imported only
when a model is read. Tensors stored outside the .onnx file are not loaded: op types live in the
graph, not in the weights.

Counted: every node of the main graph, of every subgraph held in a node's attributes (the
branches of If, the bodies of Loop and Scan, at any depth) and of the body of every local
function (`model.functions`). A node that calls a local function is not an op of its own: the
ops of the function's body count instead. All local functions are read, called or not, so a
function that only another function calls is counted, and calls between functions (recursive
ones too) need no following.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler.disk.digest import file_sha256
from bundler.errors import ConfigError, InputFileError

_DEFAULT_DOMAINS = ("", "ai.onnx")
_NEEDS_ONNX = 'reading models needs the onnx package: pip install "ort-bundle[models]"'
_GIVE_MODEL = "give the .onnx file the app loads"


@dataclass(frozen=True)
class ModelOps:
    """One ONNX model: its file, SHA-256 and the op types it runs."""

    path: Path
    sha256: str  # hex digest of the .onnx file's bytes
    ops: frozenset[str]  # op keys, see op_key
    # op key -> the element types of its nodes (float, float16, int64, ...; "unknown" where
    # shape inference could not tell, as for nodes of subgraphs and functions)
    types: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False, hash=False)


def op_key(domain: str, op_type: str) -> str:
    """'Conv' for the default ONNX domain ('' or 'ai.onnx'); 'com.microsoft:FusedConv' otherwise."""
    return op_type if domain in _DEFAULT_DOMAINS else f"{domain}:{op_type}"


def read_model_ops(path: Path) -> ModelOps:
    """The op types the model at `path` runs. ConfigError without the onnx package;
    InputFileError for a file that is missing, unreadable or not an ONNX model."""
    onnx = _import_onnx()
    sha256 = _model_sha256(path)
    model = _load(onnx, path)
    ops = frozenset(_model_ops(model))
    return ModelOps(path=path, sha256=sha256, ops=ops, types=_op_types(onnx, model, ops))


_FLOATS = {1: "float", 10: "float16", 16: "bfloat16", 11: "double"}


def _op_types(onnx: Any, model: Any, ops: frozenset[str]) -> dict[str, frozenset[str]]:
    """Each op's element types: its nodes' first input's type (their output's, for a node with
    no input), from onnx's shape inference. "unknown" where inference cannot tell, and for every
    op when it fails: evidence measured per type then counts the op's whole row."""
    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # a model onnx cannot infer (custom domains, huge) is still a model
        return {op: frozenset({"unknown"}) for op in ops}
    elems = {init.name: init.data_type for init in graph.initializer}
    for value in (*graph.input, *graph.value_info, *graph.output):
        if value.type.HasField("tensor_type"):
            elems[value.name] = value.type.tensor_type.elem_type
    found: dict[str, set[str]] = {op: set() for op in ops}
    for node in graph.node:
        key = op_key(node.domain, node.op_type)
        if key in found:
            names = [name for name in (*node.input, *node.output) if name]
            found[key].add(_type_name(onnx, elems.get(names[0]) if names else None))
    for op in _nested_ops(model):  # nodes in subgraphs or functions: types not inferred
        if op in found:
            found[op].add("unknown")
    return {op: frozenset(kinds) for op, kinds in found.items()}


def _nested_ops(model: Any) -> set[str]:
    """Op keys of the nodes in subgraphs (any depth) and in local functions' bodies."""
    bodies: list[Iterable[Any]] = [function.node for function in model.functions]
    for node in model.graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                bodies.append(attribute.g.node)
            bodies.extend(graph.node for graph in attribute.graphs)
    return {op_key(node.domain, node.op_type) for node in _all_nodes(bodies)}


def _type_name(onnx: Any, elem: int | None) -> str:
    if not elem:
        return "unknown"
    return _FLOATS.get(elem) or str(onnx.TensorProto.DataType.Name(elem)).lower()


def _import_onnx() -> Any:
    try:
        onnx: Any = importlib.import_module("onnx")
    except ImportError as exc:
        raise ConfigError(_NEEDS_ONNX) from exc
    return onnx


def _model_sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except FileNotFoundError as exc:
        raise InputFileError(f"{path}: no such file; {_GIVE_MODEL}.") from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputFileError(f"{path}: cannot be read ({reason}); {_GIVE_MODEL}.") from exc


def _load(onnx: Any, path: Path) -> Any:
    decode_error: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError
    failures = (decode_error, ValueError, OSError, TypeError, RuntimeError, RecursionError)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except failures as exc:
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputFileError(f"{path}: not an ONNX model ({detail}); {_GIVE_MODEL}.") from exc
    # An empty file, or bytes that happen to decode, parse as a ModelProto without a graph.
    if not model.HasField("graph"):
        raise InputFileError(f"{path}: not an ONNX model (it has no graph); {_GIVE_MODEL}.")
    return model


def _model_ops(model: Any) -> set[str]:
    """Op keys of the main graph and of every local function's body, calls to functions left
    out."""
    functions = {_function_key(function) for function in model.functions}
    bodies: list[Iterable[Any]] = [model.graph.node]
    bodies.extend(function.node for function in model.functions)
    return {
        op_key(node.domain, node.op_type)
        for node in _all_nodes(bodies)
        if _call_key(node) not in functions
    }


def _all_nodes(bodies: Iterable[Iterable[Any]]) -> Iterator[Any]:
    """Every node of `bodies` and of the subgraphs in their attributes, at any depth (a stack,
    not recursion: nesting depth is the model's to choose)."""
    pending: list[Iterable[Any]] = list(bodies)
    while pending:
        for node in pending.pop():
            yield node
            # an attribute of type GRAPH holds one subgraph (g), of type GRAPHS a list (graphs);
            # read by field, so that a model that leaves `type` unset is read too
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    pending.append(attribute.g.node)
                pending.extend(graph.node for graph in attribute.graphs)


def _function_key(function: Any) -> tuple[str, str]:
    # The overload field (IR version 10) tells apart functions of one domain and name.
    return op_key(function.domain, function.name), getattr(function, "overload", "")


def _call_key(node: Any) -> tuple[str, str]:
    return op_key(node.domain, node.op_type), getattr(node, "overload", "")
