"""bundler/pruning/onnx_models.py: the op types of real ONNX models, built here with onnx.helper."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from bundler.errors import ConfigError, InputFileError
from bundler.pruning.onnx_models import op_key, read_model_ops
from tests.support.skips import require_module

onnx = require_module("onnx", 'pip install "ort-bundle[models]" (.ci/run installs it)')
TensorProto, helper = onnx.TensorProto, onnx.helper

FLOAT = TensorProto.FLOAT
BOOL = TensorProto.BOOL
INT64 = TensorProto.INT64
OPSET = helper.make_opsetid("", 17)


def tensor(
    name: str, elem_type: int = FLOAT, shape: list[int] | None = None
) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, [2, 2] if shape is None else shape)


def save(
    tmp_path: Path,
    graph: onnx.GraphProto,
    functions: list[onnx.FunctionProto] | None = None,
    opsets: list[onnx.OperatorSetIdProto] | None = None,
) -> Path:
    model = helper.make_model(graph, opset_imports=[OPSET, *(opsets or [])], functions=functions)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    return path


def test_a_plain_graph_gives_its_ops_and_the_file_hash(tmp_path: Path) -> None:
    weight = helper.make_tensor("w", FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "plain", [tensor("x")], [tensor("y")], [weight])
    path = save(tmp_path, graph)
    onnx.checker.check_model(str(path))

    model = read_model_ops(path)

    assert model.ops == {"MatMul", "Relu"}
    assert model.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert model.path == path


def test_the_branches_of_an_if_count(tmp_path: Path) -> None:
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [tensor("t")]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["e"])], "else", [], [tensor("e")]
    )
    choose = helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)
    graph = helper.make_graph([choose], "if", [tensor("x"), tensor("c", BOOL, [])], [tensor("y")])

    ops = read_model_ops(save(tmp_path, graph)).ops

    assert ops == {"If", "Relu", "Softmax"}


def test_the_bodies_of_loop_and_scan_count_at_any_depth(tmp_path: Path) -> None:
    # Loop body: (iteration, condition, carried) -> (condition, carried); it adds x each time
    # and holds an If whose branch holds a Sigmoid: a subgraph inside a subgraph
    inner = helper.make_graph(
        [helper.make_node("Sigmoid", ["acc_out"], ["s"])], "inner", [], [tensor("s")]
    )
    loop_body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
            helper.make_node("If", ["cond_in"], ["unused"], then_branch=inner, else_branch=inner),
        ],
        "loop_body",
        [tensor("i", INT64, []), tensor("cond_in", BOOL, []), tensor("acc_in")],
        [tensor("cond_out", BOOL, []), tensor("acc_out")],
    )
    # Scan body: (state, row) -> (state, row * state)
    scan_body = helper.make_graph(
        [
            helper.make_node("Identity", ["state_in"], ["state_out"]),
            helper.make_node("Mul", ["row", "state_in"], ["scaled"]),
        ],
        "scan_body",
        [tensor("state_in", shape=[2]), tensor("row", shape=[2])],
        [tensor("state_out", shape=[2]), tensor("scaled", shape=[2])],
    )
    nodes = [
        helper.make_node("Loop", ["n", "c", "x"], ["looped"], body=loop_body),
        helper.make_node("Scan", ["s0", "looped"], ["s1", "y"], body=scan_body, num_scan_inputs=1),
    ]
    inputs = [tensor("n", INT64, []), tensor("c", BOOL, []), tensor("x"), tensor("s0", shape=[2])]
    graph = helper.make_graph(nodes, "loops", inputs, [tensor("s1", shape=[2]), tensor("y")])

    ops = read_model_ops(save(tmp_path, graph)).ops

    assert ops == {"Loop", "Scan", "Identity", "Add", "If", "Sigmoid", "Mul"}


def test_an_attribute_holding_a_list_of_graphs_counts(tmp_path: Path) -> None:
    """No standard op has a GRAPHS attribute; a custom one may (attr.graphs, not attr.g)."""
    cases = [
        helper.make_graph([helper.make_node(op, ["x"], [op])], op, [], [tensor(op)])
        for op in ("Erf", "Exp")
    ]
    switch = helper.make_node("Switch", ["x"], ["y"], domain="com.example", cases=cases)
    graph = helper.make_graph([switch], "graphs", [tensor("x")], [tensor("y")])
    path = save(tmp_path, graph, opsets=[helper.make_opsetid("com.example", 1)])

    assert onnx.load(str(path)).graph.node[0].attribute[0].type == onnx.AttributeProto.GRAPHS
    assert read_model_ops(path).ops == {"com.example:Switch", "Erf", "Exp"}


def test_a_local_function_counts_by_its_body_not_its_call(tmp_path: Path) -> None:
    fn_opsets = [OPSET, helper.make_opsetid("custom.fn", 1)]
    # MyBlock: LayerNormalization, then a call of Inner (a function calling a function)
    inner = helper.make_function(
        "custom.fn", "Inner", ["a"], ["b"], [helper.make_node("Tanh", ["a"], ["b"])], fn_opsets
    )
    block_nodes = [
        helper.make_node("LayerNormalization", ["a", "scale"], ["n"], axis=-1),
        helper.make_node("Inner", ["n"], ["b"], domain="custom.fn"),
    ]
    block = helper.make_function(
        "custom.fn", "MyBlock", ["a", "scale"], ["b"], block_nodes, fn_opsets
    )
    call = helper.make_node("MyBlock", ["x", "scale"], ["y"], domain="custom.fn")
    graph = helper.make_graph(
        [call], "fn", [tensor("x"), tensor("scale", shape=[2])], [tensor("y")]
    )
    path = save(tmp_path, graph, [block, inner], [helper.make_opsetid("custom.fn", 1)])

    ops = read_model_ops(path).ops

    assert ops == {"LayerNormalization", "Tanh"}
    assert "custom.fn:MyBlock" not in ops
    assert "custom.fn:Inner" not in ops


def test_functions_that_call_each_other_are_read_once(tmp_path: Path) -> None:
    """Ping calls Pong and Pong calls Ping: not a valid model to run, but one to read."""
    fn_opsets = [OPSET, helper.make_opsetid("custom.fn", 1)]
    ping_nodes = [
        helper.make_node("Neg", ["a"], ["m"]),
        helper.make_node("Pong", ["m"], ["b"], domain="custom.fn"),
    ]
    ping = helper.make_function("custom.fn", "Ping", ["a"], ["b"], ping_nodes, fn_opsets)
    pong_nodes = [
        helper.make_node("Abs", ["a"], ["m"]),
        helper.make_node("Ping", ["m"], ["b"], domain="custom.fn"),
    ]
    pong = helper.make_function("custom.fn", "Pong", ["a"], ["b"], pong_nodes, fn_opsets)
    call = helper.make_node("Ping", ["x"], ["y"], domain="custom.fn")
    graph = helper.make_graph([call], "cycle", [tensor("x")], [tensor("y")])
    path = save(tmp_path, graph, [ping, pong], [helper.make_opsetid("custom.fn", 1)])

    assert read_model_ops(path).ops == {"Neg", "Abs"}


def test_contrib_ops_keep_their_domain_and_ai_onnx_is_the_default(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("FusedMatMul", ["x", "x"], ["h"], domain="com.microsoft", alpha=1.0),
        helper.make_node("Relu", ["h"], ["y"], domain="ai.onnx"),
    ]
    graph = helper.make_graph(nodes, "contrib", [tensor("x")], [tensor("y")])
    path = save(tmp_path, graph, opsets=[helper.make_opsetid("com.microsoft", 1)])

    assert read_model_ops(path).ops == {"com.microsoft:FusedMatMul", "Relu"}
    assert op_key("", "Conv") == op_key("ai.onnx", "Conv") == "Conv"
    assert op_key("com.microsoft", "FusedConv") == "com.microsoft:FusedConv"
    assert op_key("ai.onnx.ml", "TreeEnsembleClassifier") == "ai.onnx.ml:TreeEnsembleClassifier"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such file"),
        (b"not a model", "not an ONNX model"),
        (b"", "not an ONNX model"),  # parses as an empty ModelProto: no graph
    ],
)
def test_a_missing_or_broken_file_is_an_input_error(
    tmp_path: Path, content: bytes | None, says: str
) -> None:
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)

    with pytest.raises(InputFileError) as caught:
        read_model_ops(path)

    message = str(caught.value)
    assert message.startswith(f"{path}: {says}")
    assert "give the .onnx file the app loads" in message
    assert "\n" not in message


def test_without_onnx_it_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "plain", [tensor("x")], [tensor("y")]
    )
    path = save(tmp_path, graph)
    monkeypatch.setitem(sys.modules, "onnx", None)

    with pytest.raises(ConfigError) as caught:
        read_model_ops(path)

    assert 'pip install "ort-bundle[models]"' in str(caught.value)
