"""Hand builders for the ops the first configuration matrix (tools/evidence/probe_matrix.py)
could not build from their ONNX schemas: ops with subgraphs (control flow), with inputs of a
special kind (regions of interest, quantized tensors, sequences, optionals, window sizes) or
with required attributes, and the `com.microsoft` ops that generative (LLM) exports run. Issue
42.

Each family yields `probe_model.Config`s like the hand matrices of probe_matrix, whose
`matrix()` adds them (`FAMILIES`) to its own. An op's configurations are few (the element
types its kernels allow, at most two, and the attribute that picks another code path where
there is one): what matters is which libraries the op's CUDA kernel maps, and an op none of
whose configurations could be built or run keeps no row (bundle prunes nothing for a model
using it; the raw file records why). Standard library, onnx and numpy only, like
probe_matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tools.evidence.probe_model import (
    BOOL,
    FLOAT,
    FLOATS,
    INT32,
    INT64,
    MS,
    UINT8,
    Config,
    Graph,
)

INT8 = 3
Types = Callable[[str], list[str]]


def _array(g: Graph, name: str, values: Any, dtype: str) -> str:
    """An initializer of numpy type `dtype` (not cast to the configuration's type)."""
    import numpy as np
    from onnx import numpy_helper

    g.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), name))
    return name


def _elem_name(elem: int) -> str:
    from onnx import helper

    return str(helper.tensor_dtype_to_np_dtype(elem))


def _two(types: Types, op: str) -> list[str]:
    return types(op)[:2]


# --- control flow: the op itself (its subgraphs' ops have rows of their own) ---------------------


def control_flow(types: Types) -> Iterator[Config]:
    for kind in _two(types, "If"):
        yield _if(kind)
    for kind in _two(types, "Loop"):
        yield _loop(kind)
    for kind in _two(types, "Scan"):
        yield _scan(kind)


def _value(name: str, elem: int, shape: list[int] | None) -> Any:
    from onnx import helper

    info = helper.make_tensor_value_info(name, elem, shape)
    if shape == []:  # a scalar: a shape of no dimensions, which protobuf leaves unset
        info.type.tensor_type.shape.SetInParent()
    return info


def _if(kind: str) -> Config:
    def build() -> Any:
        from onnx import helper

        g = Graph(FLOATS[kind])
        x = g.x("x", [2, 3])
        cond = g.typed("cond", BOOL, [])
        elem = FLOATS[kind]
        branches = {}
        for name, op in (("then", "Add"), ("else", "Mul")):
            node = helper.make_node(op, [x, x], [f"{name}_y"])
            branches[name] = helper.make_graph([node], name, [], [_value(f"{name}_y", elem, None)])
        g.op("If", [cond], [g.out("y")], then_branch=branches["then"], else_branch=branches["else"])
        return g.model(21)

    return Config("If", {"type": kind}, build)


def _loop(kind: str) -> Config:
    def build() -> Any:
        from onnx import helper

        g = Graph(FLOATS[kind])
        elem = FLOATS[kind]
        x = g.x("x", [2, 3])
        trips = _array(g, "trips", 3, "int64")
        keep = _array(g, "keep", True, "bool")
        body = helper.make_graph(
            [
                helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                helper.make_node("Add", ["v_in", x], ["v_out"]),
            ],
            "body",
            [_value("i", INT64, []), _value("cond_in", BOOL, []), _value("v_in", elem, [2, 3])],
            [_value("cond_out", BOOL, []), _value("v_out", elem, [2, 3])],
        )
        g.op("Loop", [trips, keep, x], [g.out("y")], body=body)
        for size in (2, 3):  # onnx's checker wants the loop's output shape
            g.outputs[-1].type.tensor_type.shape.dim.add().dim_value = size
        return g.model(21)

    return Config("Loop", {"type": kind}, build)


def _scan(kind: str) -> Config:
    def build() -> Any:
        from onnx import helper

        g = Graph(FLOATS[kind])
        elem = FLOATS[kind]
        state, xs = g.x("state", [4]), g.x("xs", [3, 4])
        body = helper.make_graph(
            [
                helper.make_node("Add", ["s_in", "x_in"], ["s_out"]),
                helper.make_node("Identity", ["s_out"], ["y_out"]),
            ],
            "body",
            [_value("s_in", elem, [4]), _value("x_in", elem, [4])],
            [_value("s_out", elem, [4]), _value("y_out", elem, [4])],
        )
        outs = [g.out("final"), g.out("ys")]
        g.op("Scan", [state, xs], outs, body=body, num_scan_inputs=1)
        return g.model(21)

    return Config("Scan", {"type": kind}, build)


# --- detection ----------------------------------------------------------------------------------


def detection(types: Types) -> Iterator[Config]:
    for kind in _two(types, "RoiAlign"):
        for mode in ("avg", "max"):
            yield _roi_align(kind, mode)
    for kind in _two(types, "MaxRoiPool"):
        yield _max_roi_pool(kind)
    for kind in _two(types, "MaxUnpool"):
        yield _max_unpool(kind)


def _roi_align(kind: str, mode: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 4, 8, 8])
        rois = g.x("rois", [2, 4])
        batch = _array(g, "batch", [0, 0], "int64")
        attrs = {"mode": mode, "output_height": 2, "output_width": 2, "sampling_ratio": 2}
        g.op("RoiAlign", [x, rois, batch], [g.out("y")], **attrs)
        return g.model(16)

    return Config("RoiAlign", {"type": kind, "mode": mode}, build)


def _max_roi_pool(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 4, 8, 8])
        rois = _array(g, "rois", [[0, 0, 0, 3, 3], [0, 2, 2, 7, 7]], "float32")
        if kind != "float":
            rois = g._cast_in(rois)
        g.op("MaxRoiPool", [x, rois], [g.out("y")], pooled_shape=[2, 2])
        return g.model(17)

    return Config("MaxRoiPool", {"type": kind}, build)


def _max_unpool(kind: str) -> Config:
    """MaxPool with indices, then MaxUnpool (the pool's loads count too: a larger row)."""

    def build() -> Any:
        from onnx import helper

        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 2, 4, 4])
        pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
        g.nodes.append(helper.make_node("MaxPool", [x], ["pooled", "where"], **pool))
        g.op("MaxUnpool", ["pooled", "where"], [g.out("y")], **pool)
        return g.model(22)

    return Config("MaxUnpool", {"type": kind}, build)


# --- quantized models ---------------------------------------------------------------------------


def quantized(types: Types) -> Iterator[Config]:
    for signed in (0, 1):
        yield _matmul_integer(signed)
        yield _qlinear("QLinearMatMul", signed)
        yield _qlinear("QLinearConv", signed)


def _matmul_integer(signed: int) -> Config:
    def build() -> Any:
        g = Graph(FLOAT)
        dtype = "int8" if signed else "uint8"
        a = g.typed("a", INT8 if signed else UINT8, [2, 8])
        b = _array(g, "b", [[(i * 7 + j) % 5 for j in range(4)] for i in range(8)], dtype)
        g.op("MatMulInteger", [a, b], [g.out("y", INT32)])
        return g.model(10)

    return Config("MatMulInteger", {"type": "int8" if signed else "uint8"}, build)


def _qlinear(op: str, signed: int) -> Config:
    def build() -> Any:
        g = Graph(FLOAT)
        dtype = "int8" if signed else "uint8"
        elem = INT8 if signed else UINT8
        scale, zero = _array(g, "scale", 0.05, "float32"), _array(g, "zero", 0, dtype)
        if op == "QLinearMatMul":
            a = g.typed("a", elem, [2, 8])
            b = _array(g, "b", [[(i + j) % 4 for j in range(4)] for i in range(8)], dtype)
            g.op(op, [a, scale, zero, b, scale, zero, scale, zero], [g.out("y", elem)])
            return g.model(10)
        x = g.typed("x", elem, [1, 4, 8, 8])
        w = _array(g, "w", [[[[1, 0, 1]] * 3] * 4] * 8, dtype)
        g.op(op, [x, scale, zero, w, scale, zero, scale, zero], [g.out("y", elem)], pads=[1] * 4)
        return g.model(10)

    return Config(op, {"type": "int8" if signed else "uint8"}, build)


# --- everyday ops with a special input or a required attribute ----------------------------------


def everyday(types: Types) -> Iterator[Config]:
    yield _mod("int64", 0)
    yield _mod("int32", 0)
    for kind in _two(types, "Mod"):
        yield _mod(kind, 1)
    for kind in _two(types, "Compress"):
        yield _compress(kind)
    for kind in _two(types, "ReverseSequence"):
        yield _reverse_sequence(kind)
    for op in ("RandomNormal", "RandomUniform"):
        for kind in _two(types, op):
            yield _random(op, kind)
    for kind in _two(types, "Multinomial"):
        yield _multinomial(kind)
    for kind in _two(types, "Unique"):
        yield _single("Unique", kind, [6], 11, sorted=1)
    for direction in ("LEFT", "RIGHT"):
        yield _bit_shift(direction)
    for kind in _two(types, "CumProd"):
        yield _cum("CumProd", kind)
    for kind in _two(types, "Celu"):
        yield _single("Celu", kind, [2, 3], 12, alpha=1.0)
    for kind in _two(types, "GlobalLpPool"):
        yield _single("GlobalLpPool", kind, [1, 4, 6, 6], 13, p=2)
    for kind in _two(types, "MeanVarianceNormalization"):
        yield _single("MeanVarianceNormalization", kind, [2, 3, 4, 5], 13)
    for kind in _two(types, "Det"):
        yield _single("Det", kind, [2, 3, 3], 11)
    for kind in _two(types, "DeformConv"):
        yield _deform_conv(kind)
    for kind in _two(types, "Col2Im"):
        yield _col2im(kind)
    for kind in _two(types, "AffineGrid"):
        yield _affine_grid(kind)
    for op in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"):
        for kind in _two(types, op):
            yield _loss(op, kind)
    for kind in _two(types, "Upsample"):
        yield _upsample(kind)
    for kind in _two(types, "Scatter"):
        yield _scatter(kind)
    for kind in _two(types, "CenterCropPad"):
        yield _center_crop_pad(kind)
    for kind in _two(types, "TensorScatter"):
        yield _tensor_scatter(kind)
    for kind in _two(types, "BitCast"):
        yield _bit_cast(kind)


def _single(op: str, kind: str, shape: list[int], opset: int, **attrs: Any) -> Config:
    settings = {"type": kind, **{k: v for k, v in attrs.items() if k != "alpha"}}

    def build() -> Any:
        g = Graph(FLOATS[kind])
        outs = [g.out("y")]
        if op == "Unique":
            outs += [g.out(name, INT64) for name in ("indices", "inverse", "counts")]
        g.op(op, [g.x("x", shape)], outs, **attrs)
        # onnx's strict inference fails on MeanVarianceNormalization's own function body
        return g.model(opset, check=op != "MeanVarianceNormalization")

    return Config(op, settings, build)


def _mod(kind: str, fmod: int) -> Config:
    def build() -> Any:
        if kind in FLOATS:
            g = Graph(FLOATS[kind])
            a, b = g.x("a", [2, 3]), g.w("b", [2, 3], 1.0)
            g.op("Mod", [a, b], [g.out("y")], fmod=fmod)
            return g.model(13)
        g = Graph(FLOAT)
        elem = INT64 if kind == "int64" else INT32
        a = g.typed("a", elem, [2, 3])
        b = _array(g, "b", [[3, 4, 5], [6, 7, 8]], kind)
        g.op("Mod", [a, b], [g.out("y", elem)], fmod=fmod)
        return g.model(13)

    return Config("Mod", {"type": kind, "fmod": fmod}, build)


def _compress(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        keep = _array(g, "keep", [True, False, True], "bool")
        g.op("Compress", [g.x("x", [3, 4]), keep], [g.out("y")], axis=0)
        return g.model(11)

    return Config("Compress", {"type": kind}, build)


def _reverse_sequence(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        lengths = _array(g, "lengths", [4, 2], "int64")
        attrs = {"time_axis": 0, "batch_axis": 1}
        g.op("ReverseSequence", [g.x("x", [4, 2, 3]), lengths], [g.out("y")], **attrs)
        return g.model(10)

    return Config("ReverseSequence", {"type": kind}, build)


def _random(op: str, kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        g.op(op, [], [g.out("y")], shape=[2, 3], dtype=FLOATS[kind], seed=1.0)
        return g.model(13)

    return Config(op, {"type": kind}, build)


def _multinomial(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        g.op("Multinomial", [g.x("x", [2, 5])], [g.out("y", INT32)], sample_size=3, seed=1.0)
        return g.model(7)

    return Config("Multinomial", {"type": kind}, build)


def _bit_shift(direction: str) -> Config:
    def build() -> Any:
        g = Graph(FLOAT)
        x = g.typed("x", UINT8, [2, 3])
        by = _array(g, "by", [[1, 2, 3], [0, 1, 2]], "uint8")
        g.op("BitShift", [x, by], [g.out("y", UINT8)], direction=direction)
        return g.model(11)

    return Config("BitShift", {"type": "uint8", "direction": direction}, build)


def _cum(op: str, kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        g.op(op, [g.x("x", [2, 3]), _array(g, "axis", 1, "int64")], [g.out("y")])
        return g.model(26)

    return Config(op, {"type": kind}, build)


def _deform_conv(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x, w = g.x("x", [1, 4, 8, 8]), g.w("w", [8, 4, 3, 3])
        offset = g.w("offset", [1, 2 * 3 * 3, 6, 6])
        g.op("DeformConv", [x, w, offset], [g.out("y")], kernel_shape=[3, 3])
        return g.model(19)

    return Config("DeformConv", {"type": kind}, build)


def _col2im(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 4 * 2 * 2, 9])
        image, block = _array(g, "image", [4, 4], "int64"), _array(g, "block", [2, 2], "int64")
        g.op("Col2Im", [x, image, block], [g.out("y")])
        return g.model(18)

    return Config("Col2Im", {"type": kind}, build)


def _affine_grid(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        size = _array(g, "size", [2, 1, 4, 4], "int64")
        g.op("AffineGrid", [g.x("theta", [2, 2, 3]), size], [g.out("y")], align_corners=0)
        return g.model(20)

    return Config("AffineGrid", {"type": kind}, build)


def _loss(op: str, kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        target = _array(g, "target", [0, 4, 2], "int64")
        g.op(op, [g.x("x", [3, 5]), target], [g.out("y")], reduction="mean")
        return g.model(13)

    return Config(op, {"type": kind}, build)


def _upsample(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        scales = _array(g, "scales", [1.0, 1.0, 2.0, 2.0], "float32")
        g.op("Upsample", [g.x("x", [1, 1, 2, 2]), scales], [g.out("y")], mode="nearest")
        return g.model(9, check=False)

    return Config("Upsample", {"type": kind}, build)


def _scatter(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        where = _array(g, "where", [[1, 0, 2], [0, 2, 1]], "int64")
        feed = [g.x("x", [3, 3]), where, g.x("updates", [2, 3])]
        g.op("Scatter", feed, [g.out("y")], axis=0)
        return g.model(10, check=False)

    return Config("Scatter", {"type": kind}, build)


def _center_crop_pad(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        shape = _array(g, "shape", [3, 6], "int64")
        g.op("CenterCropPad", [g.x("x", [4, 5]), shape], [g.out("y")])
        return g.model(18)

    return Config("CenterCropPad", {"type": kind}, build)


def _tensor_scatter(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        cache, update = g.x("cache", [1, 2, 8, 4]), g.x("update", [1, 2, 1, 4])
        where = _array(g, "where", [3], "int64")
        g.op("TensorScatter", [cache, update, where], [g.out("y")])
        return g.model(24)

    return Config("TensorScatter", {"type": kind}, build)


def _bit_cast(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        to = INT32 if kind == "float" else 5  # int16: the same width as float16
        g.op("BitCast", [g.x("x", [2, 3])], [g.out("y", to)], to=to)
        return g.model(26)

    return Config("BitCast", {"type": kind}, build)


# --- sequences and optionals --------------------------------------------------------------------


SEQUENCE_OPS = (
    "SequenceConstruct",
    "SequenceAt",
    "SequenceLength",
    "SequenceInsert",
    "SequenceErase",
    "SequenceEmpty",
    "ConcatFromSequence",
    "SplitToSequence",
    "SequenceMap",
)
OPTIONAL_OPS = ("Optional", "OptionalHasElement", "OptionalGetElement")


def sequences(types: Types) -> Iterator[Config]:
    for op in SEQUENCE_OPS:
        for kind in _two(types, op):
            yield _sequence(op, kind)
    for op in OPTIONAL_OPS:
        for kind in _two(types, op):
            yield _optional(op, kind)


def _sequence(op: str, kind: str) -> Config:
    """`op` on a sequence of two tensors, the result turned back into a tensor (SequenceAt
    or SequenceLength: their loads count too)."""

    def build() -> Any:
        from onnx import helper

        g = Graph(FLOATS[kind])
        x = g.x("x", [2, 3])
        first = _array(g, "first", 0, "int64")
        node = helper.make_node
        if op == "SplitToSequence":
            g.op(op, [x], ["seq"], axis=0)
        elif op == "SequenceEmpty":
            g.op(op, [], ["empty"], dtype=FLOATS[kind])
            g.nodes.append(node("SequenceInsert", ["empty", x], ["seq"]))
        else:
            g.nodes.append(node("SequenceConstruct", [x, x], ["pair"]))
            if op == "SequenceInsert":
                g.op(op, ["pair", x], ["seq"])
            elif op == "SequenceErase":
                g.op(op, ["pair", first], ["seq"])
            elif op == "SequenceMap":
                body = helper.make_graph(
                    [node("Abs", ["item"], ["mapped"])],
                    "map",
                    [_value("item", FLOATS[kind], None)],
                    [_value("mapped", FLOATS[kind], None)],
                )
                g.op(op, ["pair"], ["seq"], body=body)
            elif op == "SequenceConstruct":
                g.nodes.append(node("Identity", ["pair"], ["seq"]))
        if op == "SequenceLength":
            g.op(op, ["pair"], [g.out("y", INT64)])
        elif op == "ConcatFromSequence":
            g.op(op, ["pair"], [g.out("y")], axis=0)
        elif op == "SequenceAt":
            g.op(op, ["pair", first], [g.out("y")])
        else:
            g.nodes.append(node("SequenceAt", ["seq", first], ["y_t" if kind != "float" else "y"]))
            if kind != "float":
                g.nodes.append(node("Cast", ["y_t"], ["y"], to=FLOAT))
            g.outputs.append(_value("y", FLOAT, None))
        return g.model(17, check=op != "SequenceEmpty")  # onnx infers no element shape

    return Config(op, {"type": kind}, build)


def _optional(op: str, kind: str) -> Config:
    def build() -> Any:
        from onnx import helper

        g = Graph(FLOATS[kind])
        x = g.x("x", [2, 3])
        if op == "Optional":
            g.op(op, [x], ["maybe"])
        else:
            g.nodes.append(helper.make_node("Optional", [x], ["maybe"]))
        if op == "OptionalHasElement":
            g.op(op, ["maybe"], [g.out("y", BOOL)])
        else:
            name = "y_t" if kind != "float" else "y"
            if op == "OptionalGetElement":
                g.op(op, ["maybe"], [name])
            else:
                g.nodes.append(helper.make_node("OptionalGetElement", ["maybe"], [name]))
            if kind != "float":
                g.nodes.append(helper.make_node("Cast", [name], ["y"], to=FLOAT))
            g.outputs.append(_value("y", FLOAT, None))
        return g.model(18)

    return Config(op, {"type": kind}, build)


# --- signal windows (ONNX functions) ------------------------------------------------------------


def windows(types: Types) -> Iterator[Config]:
    for op in ("BlackmanWindow", "HammingWindow", "HannWindow"):
        for kind in _two(types, op):
            yield _window(op, kind)
    for kind in _two(types, "MelWeightMatrix"):
        yield _mel(kind)


def _window(op: str, kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        size = _array(g, "size", 16, "int64")
        g.op(op, [size], [g.out("y")], output_datatype=FLOATS[kind])
        return g.model(17)

    return Config(op, {"type": kind}, build)


def _mel(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        ints = [_array(g, n, v, "int64") for n, v in (("bins", 8), ("dft", 16), ("rate", 16000))]
        low, high = _array(g, "low", 0.0, "float32"), _array(g, "high", 8000.0, "float32")
        outs = [g.out("y")]
        g.op("MelWeightMatrix", [*ints, low, high], outs, output_datatype=FLOATS[kind])
        return g.model(17)

    return Config("MelWeightMatrix", {"type": kind}, build)


# --- attention-era ONNX ops (opset 23 and later) ------------------------------------------------


def attention_ops(types: Types) -> Iterator[Config]:
    for kind in _two(types, "RotaryEmbedding"):
        yield _onnx_rotary(kind)
    for kind in _two(types, "Attention"):
        yield _onnx_attention(kind)
    for kind in _two(types, "SwiGLU"):
        yield _swiglu(kind)


def _onnx_rotary(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 2, 8, 8])  # batch, heads, sequence, head size
        cos, sin = g.w("cos", [1, 8, 4], 0.0), g.w("sin", [1, 8, 4], 0.0)
        g.op("RotaryEmbedding", [x, cos, sin], [g.out("y")])
        return g.model(23)

    return Config("RotaryEmbedding", {"type": kind}, build)


def _onnx_attention(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        q, k, v = (g.x(n, [1, 2, 8, 8]) for n in ("q", "k", "v"))
        g.op("Attention", [q, k, v], [g.out("y")], is_causal=1)
        return g.model(23)

    return Config("Attention", {"type": kind}, build)


def _swiglu(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        g.op("SwiGLU", [g.x("a", [2, 8]), g.x("b", [2, 8])], [g.out("y")])
        return g.model(28)

    return Config("SwiGLU", {"type": kind}, build)


# --- com.microsoft: the ops of generative (LLM) exports -----------------------------------------

HEADS, KV_HEADS, HEAD = 4, 2, 16
SEQ = 8


def llm_contrib(types: Types) -> Iterator[Config]:
    for kind in ("float16", "bfloat16"):
        yield _gqa(kind, rotary=0)
    yield _gqa("float16", rotary=1)
    for kind in ("float", "float16"):
        yield _ms_rotary(kind)
        yield _matmul_nbits(kind, zero_points=0)
        yield _gather_block_quantized(kind)
    yield _matmul_nbits("float16", zero_points=1)


def _gqa(kind: str, rotary: int) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        hidden = (HEADS + 2 * KV_HEADS) * HEAD
        packed = g.x("qkv", [1, SEQ, hidden])
        past = [g.x(n, [1, KV_HEADS, SEQ, HEAD]) for n in ("past_key", "past_value")]
        lens = _array(g, "seqlens_k", [SEQ - 1], "int32")
        total = _array(g, "total", SEQ, "int32")
        feed = [packed, "", "", *past, lens, total]
        if rotary:
            feed += [g.w("cos", [SEQ, HEAD // 2], 0.0), g.w("sin", [SEQ, HEAD // 2], 0.0)]
        outs = [g.out("y"), g.out("present_key"), g.out("present_value")]
        attrs = {"num_heads": HEADS, "kv_num_heads": KV_HEADS, "do_rotary": rotary}
        g.op("GroupQueryAttention", feed, outs, domain=MS, **attrs)
        return g.model(21, MS)

    return Config(f"{MS}:GroupQueryAttention", {"type": kind, "do_rotary": rotary}, build)


def _ms_rotary(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, SEQ, HEADS * HEAD])
        positions = _array(g, "positions", [list(range(SEQ))], "int64")
        cos, sin = g.w("cos", [SEQ, HEAD // 2], 0.0), g.w("sin", [SEQ, HEAD // 2], 0.0)
        g.op("RotaryEmbedding", [x, positions, cos, sin], [g.out("y")], domain=MS, num_heads=HEADS)
        return g.model(21, MS)

    return Config(f"{MS}:RotaryEmbedding", {"type": kind}, build)


def _matmul_nbits(kind: str, zero_points: int) -> Config:
    """A [2, K] times a 4-bit [K, N] weight in blocks of 32 along K (ORT's layout: N rows of
    K/32 blocks of 16 bytes)."""

    def build() -> Any:
        import numpy as np

        g = Graph(FLOATS[kind])
        k, n, block = 64, 8, 32
        packed = np.arange(n * (k // block) * block // 2, dtype=np.uint8) % 251
        weight = _array(g, "weight", packed.reshape(n, k // block, block // 2), "uint8")
        scales = g.w("scales", [n * (k // block)], 0.01)
        feed = [g.x("a", [2, k]), weight, scales]
        if zero_points:
            feed.append(_array(g, "zeros", [0x88] * (n * (k // block) // 2), "uint8"))
        attrs = {"K": k, "N": n, "bits": 4, "block_size": block}
        g.op("MatMulNBits", feed, [g.out("y")], domain=MS, **attrs)
        return g.model(21, MS)

    settings = {"type": kind, "zero_points": zero_points}
    return Config(f"{MS}:MatMulNBits", settings, build)


def _gather_block_quantized(kind: str) -> Config:
    """An embedding table of 16 rows of 32 4-bit values (packed two a byte), one scale per
    block of 32, gathered by token ids."""

    def build() -> Any:
        import numpy as np

        g = Graph(FLOATS[kind])
        table = np.arange(16 * 16, dtype=np.uint8).reshape(16, 16)
        data = _array(g, "table", table, "uint8")
        ids = g.typed("ids", INT64, [1, 4])
        scales = g.w("scales", [16, 1], 0.01)
        attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": 32, "bits": 4}
        g.op("GatherBlockQuantized", [data, ids, scales], [g.out("y")], domain=MS, **attrs)
        return g.model(21, MS)

    return Config(f"{MS}:GatherBlockQuantized", {"type": kind}, build)


def only_regex() -> str:
    """A `tools.evidence.gpu_matrix measure --only` pattern for every configuration these
    families make."""
    import re

    ops = {c.op for family in FAMILIES for c in family(lambda op: list(FLOATS))}
    names = sorted(re.escape(op.replace(":", ".")) for op in ops)
    return f"^({'|'.join(names)})__"


FAMILIES: tuple[Callable[[Types], Iterator[Config]], ...] = (
    control_flow,
    detection,
    quantized,
    everyday,
    sequences,
    windows,
    attention_ops,
    llm_contrib,
)

__all__ = ["FAMILIES", "only_regex"]
