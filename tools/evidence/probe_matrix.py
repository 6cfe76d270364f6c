"""The configuration matrix of the load probe (tools/evidence/gpu_probe.py `matrix`): many small
ONNX models per operator, each in one configuration that may change the code path ONNX
Runtime's CUDA execution provider takes, and so the libraries it loads.

What an op loads depends on more than its type: `ReduceSum` over the last axis runs ORT's own
kernel, over axes (0, 2) of a 4-D tensor it calls cuDNN's reduction (and maps `cudnn_ops`). So
every op is measured in a matrix, and its row in the evidence table is the union of what its
configurations loaded (tools/evidence/evidence_table.py):

- hand-written matrices for the ops whose kernels call cuDNN, cuFFT or NVRTC, or that the
  ONNX and `com.microsoft` fusions produce: element type (float, float16, bfloat16, double, as
  the CUDA kernel's type constraints allow), rank 1 to 5, reduction axes (trailing, leading,
  several, all, none) with `keepdims` and `noop_with_empty_axes`, convolution 1-D/2-D/3-D with
  `group` (1, 2, depthwise), dilations, strides and `auto_pad`, pooling kind with `ceil_mode`,
  RNN directions, attention with and without a mask, ...;
- every other op with a CUDA kernel in the release (`gpu_matrix kernels` lists them): a model
  built from its ONNX schema (required inputs, each float type the kernel allows, ranks 2 and
  4); an op whose schema needs attributes or special inputs gets a hand builder or stays
  unmeasured (the table then has no row and bundle prunes nothing for a model using it);
- CUDA provider options that change the code path (`cudnn_conv_algo_search`, `prefer_nhwc`,
  `cudnn_conv_use_max_workspace`, the attention kernel `sdpa_kernel`), over the convolution and
  attention configurations: the table is for the default options, and states them.

Every float tensor enters the graph as float32 and is cast to the configuration's type inside
it (numpy has no bfloat16), so the models' inputs are always float32, int64 or bool. The Cast
nodes run in the same session: their loads count towards the op's row, which can only make a
row larger (never prunes more). Standard library, onnx and numpy only; no `bundler` import.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tools.evidence import probe_ops
from tools.evidence.probe_model import (
    BOOL,
    DOUBLE,
    FLOAT,
    FLOAT16,
    FLOATS,
    INT32,
    INT64,
    MS,
    TENSOR_TYPES,
    UINT8,
    Config,
    Graph,
)

DIMS = (3, 4, 5, 6, 7)  # rank r uses DIMS[:r]


def _shape(rank: int) -> list[int]:
    return list(DIMS[:rank])


# --- hand matrices ----------------------------------------------------------------------------

REDUCTIONS = (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
)
FULL_REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax")


def _axes_choices(rank: int) -> list[tuple[int, ...] | None]:
    """None: every axis (the axes input left out); then trailing, leading, several."""
    choices: list[tuple[int, ...] | None] = [None, (rank - 1,)]
    if rank > 1:
        choices.append((0,))
    if rank > 2:
        choices += [(0, 2), (1, rank - 1)]
    return choices


def reduction(op: str, kind: str, rank: int, axes: Any, keepdims: int, noop: int = 0) -> Config:
    settings = {"type": kind, "rank": rank, "axes": list(axes) if axes else "all"}
    settings |= {"keepdims": keepdims, "noop_with_empty_axes": noop}

    def build() -> Any:
        g = Graph(FLOATS[kind])
        feed = [g.x("x", _shape(rank))]
        if axes is not None:
            feed.append(g.i("axes", list(axes)))
        elif noop:
            feed.append(g.i("axes", []))
        g.op(op, feed, [g.out("y")], keepdims=keepdims, noop_with_empty_axes=noop)
        return g.model(18)

    return Config(op, settings, build)


def reductions(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for op in REDUCTIONS:
        for kind in types(op) if op in FULL_REDUCTIONS else types(op)[:2]:
            ranks = (1, 2, 3, 4, 5) if op in FULL_REDUCTIONS else (2, 4)
            for rank in ranks:
                for axes in _axes_choices(rank):
                    yield reduction(op, kind, rank, axes, 1)
                    if rank == 4 or op not in FULL_REDUCTIONS:
                        yield reduction(op, kind, rank, axes, 0)
            yield reduction(op, kind, 3, None, 1, noop=1)
    for op in ("ArgMax", "ArgMin"):
        for kind, rank, axis, keep, last in itertools.product(
            types(op)[:3], (2, 4), (0, -1), (0, 1), (0, 1)
        ):
            yield _arg(op, kind, rank, axis, keep, last)


def _arg(op: str, kind: str, rank: int, axis: int, keep: int, last: int) -> Config:
    settings = {"type": kind, "rank": rank, "axis": axis, "keepdims": keep}
    settings["select_last_index"] = last

    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", _shape(rank))
        attrs = {"axis": axis, "keepdims": keep, "select_last_index": last}
        g.op(op, [x], [g.out("y", INT64)], **attrs)
        return g.model(13)

    return Config(op, settings, build)


def softmaxes(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for op in ("Softmax", "LogSoftmax"):
        for kind, rank in itertools.product(types(op), (2, 3, 4)):
            for axis in sorted({-1, 0, 1}):
                yield _simple(op, kind, rank, 13, axis=axis)


def _simple(op: str, kind: str, rank: int, opset: int, **attrs: Any) -> Config:
    settings: dict[str, Any] = {"type": kind, "rank": rank, **attrs}

    def build() -> Any:
        g = Graph(FLOATS[kind])
        g.op(op, [g.x("x", _shape(rank))], [g.out("y")], **attrs)
        return g.model(opset)

    return Config(op, settings, build)


def convolutions(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for kind, dims, group, dilation in itertools.product(
        types("Conv"), (1, 2, 3), ("1", "2", "depthwise"), (1, 2)
    ):
        yield _conv("Conv", kind, dims, group, dilation, 1, "NOTSET")
    for pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        yield _conv("Conv", "float", 2, "1", 1, 1, pad)
    for kind, dims, group, stride in itertools.product(
        types("ConvTranspose")[:2], (1, 2, 3), ("1", "2"), (1, 2)
    ):
        yield _conv("ConvTranspose", kind, dims, group, 1, stride, "NOTSET")
    for kind, dims in itertools.product(types("Conv")[:2], (1, 2, 3)):
        yield _conv("Conv", kind, dims, "1", 1, 2, "NOTSET")


def _conv(op: str, kind: str, dims: int, group: str, dilation: int, stride: int, pad: str):
    channels = 4
    groups = {"1": 1, "2": 2, "depthwise": channels}[group]
    settings = {"type": kind, "dims": f"{dims}d", "group": group, "dilation": dilation}
    settings |= {"stride": stride, "auto_pad": pad}

    def build() -> Any:
        g = Graph(FLOATS[kind])
        spatial = [8] * dims
        x = g.x("x", [1, channels, *spatial])
        kernel = [3] * dims
        if op == "Conv":
            w = g.w("w", [8 if groups != channels else channels, channels // groups, *kernel])
        else:
            w = g.w("w", [channels, 4 // groups, *kernel])
        attrs: dict[str, Any] = {"group": groups, "strides": [stride] * dims}
        attrs["dilations"] = [dilation] * dims
        if pad == "NOTSET":
            attrs["pads"] = [1] * (2 * dims)
        else:
            attrs["auto_pad"] = pad
        g.op(op, [x, w], [g.out("y")], **attrs)
        return g.model(17)

    return Config(op, settings, build)


def pooling(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for op, kind, dims, ceil in itertools.product(
        ("MaxPool", "AveragePool"), types("MaxPool")[:2], (1, 2, 3), (0, 1)
    ):
        yield _pool(op, kind, dims, ceil)
    yield _pool("AveragePool", "float", 2, 0, count_include_pad=1)
    yield _pool("MaxPool", "float", 2, 0, dilations=2)
    yield _pool("MaxPool", "float", 2, 0, indices=True)
    yield _pool("LpPool", "float", 2, 0)
    for op, kind, dims in itertools.product(
        ("GlobalMaxPool", "GlobalAveragePool"), types("GlobalAveragePool")[:3], (1, 2, 3)
    ):
        yield _global(op, kind, dims)


def _pool(op: str, kind: str, dims: int, ceil: int, **extra: Any) -> Config:
    settings: dict[str, Any] = {"type": kind, "dims": f"{dims}d", "ceil_mode": ceil, **extra}

    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 4, *([7] * dims)])
        attrs: dict[str, Any] = {"kernel_shape": [2] * dims, "strides": [2] * dims}
        if op != "LpPool":
            attrs["ceil_mode"] = ceil
        if extra.get("count_include_pad"):
            attrs["count_include_pad"] = 1
            attrs["pads"] = [1] * (2 * dims)
        if extra.get("dilations"):
            attrs["dilations"] = [2] * dims
        outs = [g.out("y")] + ([g.out("i", INT64)] if extra.get("indices") else [])
        g.op(op, [x], outs, **attrs)
        return g.model(18)

    return Config(op, settings, build)


def _global(op: str, kind: str, dims: int) -> Config:
    settings = {"type": kind, "dims": f"{dims}d"}

    def build() -> Any:
        g = Graph(FLOATS[kind])
        g.op(op, [g.x("x", [1, 4, *([6] * dims)])], [g.out("y")])
        return g.model(17)

    return Config(op, settings, build)


def normalizations(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for kind, rank in itertools.product(types("BatchNormalization")[:3], (2, 3, 4, 5)):
        yield _norm("BatchNormalization", kind, rank)
    for kind, rank in itertools.product(types("InstanceNormalization")[:3], (3, 4, 5)):
        yield _norm("InstanceNormalization", kind, rank)
    for kind, rank, axis in itertools.product(types("LayerNormalization"), (2, 3, 4), (-1, 1)):
        yield _norm("LayerNormalization", kind, rank, axis)
    for kind in types("LRN")[:2]:
        yield _simple("LRN", kind, 4, 13, size=3)
    for kind in types("GroupNormalization")[:2]:
        yield _norm("GroupNormalization", kind, 4)


def _norm(op: str, kind: str, rank: int, axis: int | None = None) -> Config:
    settings: dict[str, Any] = {"type": kind, "rank": rank}
    if axis is not None:
        settings["axis"] = axis

    def build() -> Any:
        g = Graph(FLOATS[kind])
        shape = _shape(rank)
        x, c = g.x("x", shape), shape[1]
        if op == "BatchNormalization":
            stats = [g.w("scale", [c], 0.5), g.w("bias", [c]), g.w("mean", [c])]
            g.op(op, [x, *stats, g.w("var", [c], 0.5)], [g.out("y")])
            return g.model(15)
        if op == "LayerNormalization":
            normed = shape[axis:] if axis is not None else shape[-1:]
            scale, bias = g.w("scale", normed, 0.5), g.w("bias", normed)
            g.op(op, [x, scale, bias], [g.out("y")], axis=axis)
            return g.model(17)
        if op == "GroupNormalization":
            g.op(op, [x, g.w("scale", [c], 0.5), g.w("bias", [c])], [g.out("y")], num_groups=2)
            return g.model(21, check=False)
        g.op(op, [x, g.w("scale", [c], 0.5), g.w("bias", [c])], [g.out("y")])
        return g.model(17)

    return Config(op, settings, build)


def recurrent(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for op, kind, direction in itertools.product(
        ("LSTM", "GRU", "RNN"), types("LSTM")[:2], ("forward", "reverse", "bidirectional")
    ):
        yield _rnn(op, kind, direction, False)
    for op in ("LSTM", "GRU", "RNN"):
        yield _rnn(op, "float", "forward", True)


def _rnn(op: str, kind: str, direction: str, lengths: bool) -> Config:
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    settings = {"type": kind, "direction": direction, "sequence_lens": int(lengths)}

    def build() -> Any:
        g = Graph(FLOATS[kind])
        hidden, dirs = 4, 2 if direction == "bidirectional" else 1
        x = g.x("x", [3, 2, 8])
        w = g.w("w", [dirs, gates * hidden, 8])
        r = g.w("r", [dirs, gates * hidden, hidden])
        b = g.w("b", [dirs, 2 * gates * hidden])
        feed = [x, w, r, b]
        if lengths:
            import numpy as np

            g.inits.append(_int32("lens", np.array([3, 2], dtype=np.int32)))
            feed.append("lens")
        g.op(op, feed, [g.out("y")], hidden_size=hidden, direction=direction)
        return g.model(14)

    return Config(op, settings, build)


def _int32(name: str, array: Any) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name)


def matrix_products(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for kind, rank in itertools.product(types("MatMul"), (2, 3, 4)):
        yield _matmul(kind, rank)
    for kind, ta, tb in itertools.product(types("Gemm"), (0, 1), (0, 1)):
        yield _gemm(kind, ta, tb)
    equations = ("ij,jk->ik", "bij,bjk->bik", "ij->i", "ij->ji", "ii->i", "bhid,bhjd->bhij")
    for kind, equation in itertools.product(types("Einsum")[:2], equations):
        yield _einsum(kind, equation)


def _matmul(kind: str, rank: int) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        shape = [2, 3, 4, 8][-rank:]
        a = g.x("a", shape)
        b = g.w("b", [*shape[:-2], 8, 4])
        g.op("MatMul", [a, b], [g.out("y")])
        return g.model(13)

    return Config("MatMul", {"type": kind, "rank": rank}, build)


def _gemm(kind: str, ta: int, tb: int) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        a = g.x("a", [8, 2] if ta else [2, 8])
        b = g.w("b", [4, 8] if tb else [8, 4])
        g.op("Gemm", [a, b, g.w("c", [4])], [g.out("y")], transA=ta, transB=tb)
        return g.model(13)

    return Config("Gemm", {"type": kind, "transA": ta, "transB": tb}, build)


def _einsum(kind: str, equation: str) -> Config:
    shapes = {
        "ij,jk->ik": [[2, 8], [8, 4]],
        "bij,bjk->bik": [[2, 3, 8], [2, 8, 4]],
        "ij->i": [[4, 8]],
        "ij->ji": [[4, 8]],
        "ii->i": [[5, 5]],
        "bhid,bhjd->bhij": [[1, 2, 4, 8], [1, 2, 6, 8]],
    }[equation]

    def build() -> Any:
        g = Graph(FLOATS[kind])
        feed = [g.x(f"x{n}", shape) for n, shape in enumerate(shapes)]
        g.op("Einsum", feed, [g.out("y")], equation=equation)
        return g.model(12)

    tag = equation.replace(",", "_").replace("->", "_to_")
    return Config("Einsum", {"type": kind, "equation": tag}, build)


def spectral(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for kind, inverse, onesided in itertools.product(types("DFT")[:2], (0, 1), (0, 1)):
        if inverse and onesided:
            continue
        yield _dft(kind, inverse, onesided)
    for kind in types("STFT")[:2]:
        yield _stft(kind)


def _dft(kind: str, inverse: int, onesided: int) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 16, 1] if not inverse else [1, 16, 2])
        g.op(
            "DFT",
            [x, "", g.i("axis", 1, scalar=True)],
            [g.out("y")],
            inverse=inverse,
            onesided=onesided,
        )
        return g.model(20)

    return Config("DFT", {"type": kind, "inverse": inverse, "onesided": onesided}, build)


def _stft(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 64, 1])
        step = g.i("step", 8, scalar=True)
        window = g.w("window", [16], 0.5)
        g.op("STFT", [x, step, window], [g.out("y")], onesided=1)
        return g.model(17)

    return Config("STFT", {"type": kind}, build)


def resizing(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for kind, mode, rank in itertools.product(
        types("Resize")[:2], ("nearest", "linear", "cubic"), (4, 5)
    ):
        if mode == "cubic" and rank == 5:
            continue
        yield _resize(kind, mode, rank)
    for kind, mode in itertools.product(types("GridSample")[:2], ("bilinear", "nearest")):
        yield _grid_sample(kind, mode)


def _resize(kind: str, mode: str, rank: int) -> Config:
    def build() -> Any:
        import numpy as np
        from onnx import numpy_helper

        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 2, *([4] * (rank - 2))])
        scales = np.array([1.0, 1.0, *([2.0] * (rank - 2))], dtype=np.float32)
        g.inits.append(numpy_helper.from_array(scales, "scales"))
        g.op("Resize", [x, "", "scales"], [g.out("y")], mode=mode)
        return g.model(19)

    return Config("Resize", {"type": kind, "mode": mode, "rank": rank}, build)


def _grid_sample(kind: str, mode: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x, grid = g.x("x", [1, 2, 4, 4]), g.x("grid", [1, 3, 3, 2])
        g.op("GridSample", [x, grid], [g.out("y")], mode=mode)
        return g.model(16)

    return Config("GridSample", {"type": kind, "mode": mode}, build)


# --- com.microsoft: the ops ORT's fusions make of transformer and conv graphs --------------------


def contrib(types: Callable[[str], list[str]]) -> Iterator[Config]:
    for kind in ("float", "float16"):
        yield _attention(kind, masked=False)
        yield _attention(kind, masked=True)
        yield _mha(kind, bias=False)
        yield _mha(kind, bias=True)
        yield _skip_layer_norm("SkipLayerNormalization", kind)
        yield _skip_layer_norm("SkipSimplifiedLayerNormalization", kind)
        yield _embed_layer_norm(kind)
        yield _unary_ms("FastGelu", kind, bias=True)
        yield _unary_ms("BiasGelu", kind, bias=True)
        yield _unary_ms("Gelu", kind)
        yield _unary_ms("QuickGelu", kind)
        yield _unary_ms("BiasAdd", kind, bias=True, residual=True)
        yield _fused_matmul(kind)
        yield _fused_conv(kind)
        yield _simplified_layer_norm(kind)
        yield _bias_softmax(kind)
        yield _fft("Rfft", kind)
        yield _fft("Irfft", kind)


def _ms(op: str) -> str:
    return f"{MS}:{op}"


def _attention(kind: str, masked: bool) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [1, 8, 16])
        feed = [x, g.w("w", [16, 48]), g.w("b", [48])]
        if masked:
            feed.append(g.typed("mask", INT32, [1, 8]))
        g.op("Attention", feed, [g.out("y")], domain=MS, num_heads=2)
        return g.model(17, MS)

    return Config(_ms("Attention"), {"type": kind, "mask": int(masked)}, build)


def _mha(kind: str, bias: bool) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        q, k, v = g.x("q", [1, 8, 16]), g.x("k", [1, 8, 16]), g.x("v", [1, 8, 16])
        feed = [q, k, v] + ([g.w("bias", [48])] if bias else [])
        g.op("MultiHeadAttention", feed, [g.out("y")], domain=MS, num_heads=2)
        return g.model(17, MS)

    return Config(_ms("MultiHeadAttention"), {"type": kind, "bias": int(bias)}, build)


def _skip_layer_norm(op: str, kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        feed = [g.x("x", [1, 8, 16]), g.x("skip", [1, 8, 16]), g.w("gamma", [16], 0.5)]
        if op == "SkipLayerNormalization":
            feed.append(g.w("beta", [16]))
        g.op(op, feed, [g.out("y")], domain=MS, epsilon=1e-5)
        return g.model(17, MS)

    return Config(_ms(op), {"type": kind}, build)


def _embed_layer_norm(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        ids = g.typed("ids", INT32, [1, 8])
        segment = g.typed("segment", INT32, [1, 8])
        tables = [g.w("word", [32, 16]), g.w("position", [16, 16]), g.w("segment_emb", [2, 16])]
        feed = [ids, segment, *tables, g.w("gamma", [16], 0.5), g.w("beta", [16])]
        g.op(
            "EmbedLayerNormalization",
            feed,
            [g.out("y"), g.out("mask_index", INT32)],
            domain=MS,
            epsilon=1e-5,
        )
        return g.model(17, MS)

    return Config(_ms("EmbedLayerNormalization"), {"type": kind}, build)


def _unary_ms(op: str, kind: str, bias: bool = False, residual: bool = False) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        feed = [g.x("x", [1, 8, 16])]
        if bias:
            feed.append(g.w("bias", [16]))
        if residual:
            feed.append(g.x("skip", [1, 8, 16]))
        g.op(op, feed, [g.out("y")], domain=MS)
        return g.model(17, MS)

    return Config(_ms(op), {"type": kind}, build)


def _fused_matmul(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        g.op(
            "FusedMatMul", [g.x("a", [2, 8]), g.w("b", [8, 4])], [g.out("y")], domain=MS, alpha=0.5
        )
        return g.model(17, MS)

    return Config(_ms("FusedMatMul"), {"type": kind}, build)


def _fused_conv(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        feed = [g.x("x", [1, 4, 8, 8]), g.w("w", [8, 4, 3, 3]), g.w("b", [8])]
        g.op("FusedConv", feed, [g.out("y")], domain=MS, activation="Relu", pads=[1, 1, 1, 1])
        return g.model(17, MS)

    return Config(_ms("FusedConv"), {"type": kind}, build)


def _simplified_layer_norm(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        feed = [g.x("x", [1, 8, 16]), g.w("gamma", [16], 0.5)]
        g.op("SimplifiedLayerNormalization", feed, [g.out("y")], axis=-1, epsilon=1e-5)
        return g.model(17, check=False)

    return Config("SimplifiedLayerNormalization", {"type": kind}, build)


def _fft(op: str, kind: str) -> Config:
    """ORT's own FFT ops (cuFFT on the CUDA EP): a real signal of 16, and its half spectrum."""

    def build() -> Any:
        g = Graph(FLOATS[kind])
        x = g.x("x", [2, 16] if op == "Rfft" else [2, 9, 2])
        attrs = {"signal_ndim": 1, "normalized": 0, "onesided": 1}
        g.op(op, [x], [g.out("y")], domain=MS, **attrs)
        return g.model(17, MS)

    return Config(_ms(op), {"type": kind}, build)


def _bias_softmax(kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        feed = [g.x("x", [1, 2, 8, 8]), g.x("bias", [1, 2, 8, 8])]
        g.op("BiasSoftmax", feed, [g.out("y")], domain=MS, axis=-1, is_inner_broadcast=0)
        return g.model(17, MS)

    return Config(_ms("BiasSoftmax"), {"type": kind}, build)


def indexing(types: Callable[[str], list[str]]) -> Iterator[Config]:
    """Ops that exported models use and whose schemas need special inputs or attributes."""
    for kind in types("GatherND")[:2]:
        yield _indexing("GatherND", kind)
        yield _indexing("OneHot", kind)
        yield _indexing("SpaceToDepth", kind)
        yield _indexing("Trilu", kind)
        yield _indexing("ScatterElements", kind)
    for to in ("float16", "int64", "bool", "double"):
        yield _cast(to)


def _indexing(op: str, kind: str) -> Config:
    def build() -> Any:
        g = Graph(FLOATS[kind])
        if op == "GatherND":
            feed = [g.x("x", [4, 5, 6]), g.i("idx", [[0, 1], [3, 4]])]
            g.op(op, feed, [g.out("y")])
        elif op == "OneHot":
            feed = [g.i("idx", [0, 2, 1]), g.i("depth", 4, scalar=True), g.w("values", [2])]
            g.op(op, feed, [g.out("y")], axis=-1)
        elif op == "SpaceToDepth":
            g.op(op, [g.x("x", [1, 2, 4, 4])], [g.out("y")], blocksize=2)
        elif op == "Trilu":
            g.op(op, [g.x("x", [3, 4, 5])], [g.out("y")], upper=0)
        else:
            feed = [g.x("x", [3, 4]), g.i("idx", [[0, 1, 2, 3]]), g.x("u", [1, 4])]
            g.op(op, feed, [g.out("y")], axis=0)
        return g.model(16)

    return Config(op, {"type": kind}, build)


def _cast(to: str) -> Config:
    elems = {"float16": FLOAT16, "int64": INT64, "bool": BOOL, "double": DOUBLE}

    def build() -> Any:
        g = Graph(FLOAT)
        g.op("Cast", [g.x("x", [2, 8])], [g.out("y", elems[to])], to=elems[to])
        return g.model(19)

    return Config("Cast", {"type": "float", "to": to}, build)


HAND: tuple[Callable[[Callable[[str], list[str]]], Iterator[Config]], ...] = (
    reductions,
    softmaxes,
    convolutions,
    pooling,
    normalizations,
    recurrent,
    matrix_products,
    spectral,
    resizing,
    contrib,
    indexing,
)

# Provider options that may change which libraries a kernel runs, and the ops they touch.
OPTION_SETS: tuple[tuple[dict[str, str], tuple[str, ...]], ...] = (
    ({"cudnn_conv_algo_search": "DEFAULT"}, ("Conv", "ConvTranspose", _ms("FusedConv"))),
    ({"cudnn_conv_algo_search": "HEURISTIC"}, ("Conv", "ConvTranspose", _ms("FusedConv"))),
    ({"cudnn_conv_use_max_workspace": "0"}, ("Conv", "ConvTranspose")),
    (
        {"prefer_nhwc": "1"},
        (
            "Conv",
            "ConvTranspose",
            "MaxPool",
            "AveragePool",
            "GlobalAveragePool",
            "BatchNormalization",
        ),
    ),
    ({"sdpa_kernel": "16"}, (_ms("Attention"), _ms("MultiHeadAttention"))),
)


# --- every other CUDA op: from its ONNX schema --------------------------------------------------


def schema_configs(op: str, opset: int, types: list[str]) -> Iterator[Config]:
    """Models of `op` (default domain) built from its schema at `opset`: required inputs only,
    ranks 2 and 4, each float type of `types` (or one config when it has no float input)."""
    for kind in types or ["float"]:
        label = kind if types else "nonfloat"
        for rank in (2, 4):
            build = _schema_builder(op, opset, kind, rank)
            yield Config(op, {"type": label, "rank": rank}, build, {}, "schema")


def _schema_builder(op: str, opset: int, kind: str, rank: int) -> Callable[[], Any]:
    def build() -> Any:
        from onnx import defs

        schema = defs.get_schema(op, opset, "")
        required = [name for name, attr in schema.attributes.items() if attr.required]
        if required:
            raise ValueError(f"needs attribute(s) {', '.join(required)}")
        params = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
        g = Graph(FLOATS[kind])
        feed = []
        for n, formal in enumerate(schema.inputs):
            option = str(formal.option)
            if option.endswith("Optional"):
                break
            count = 2 if option.endswith("Variadic") else 1
            for m in range(count):
                feed.append(_schema_input(g, f"in{n}_{m}", formal.type_str, params, kind, rank))
        outs = []
        for n, formal in enumerate(schema.outputs):
            if str(formal.option).endswith("Optional"):
                break
            elem = _resolve(formal.type_str, params, kind)
            outs.append(g.out(f"out{n}", None if elem == FLOATS[kind] else elem))
        g.op(op, feed, outs)
        return g.model(opset)

    return build


_FIXED = {
    "tensor(int64)": INT64,
    "tensor(bool)": BOOL,
    "tensor(int32)": INT32,
    "tensor(uint8)": UINT8,
    "tensor(float)": FLOAT,
}


def _resolve(type_str: str, params: dict[str, list[str]], kind: str) -> int:
    allowed = params.get(type_str, [type_str])
    if f"tensor({kind})" in allowed:
        return FLOATS[kind]
    for name, elem in _FIXED.items():
        if name in allowed:
            return elem
    raise ValueError(f"no probe type among {', '.join(allowed)}")


def _schema_input(
    g: Graph, name: str, type_str: str, params: dict[str, list[str]], kind: str, rank: int
) -> str:
    elem = _resolve(type_str, params, kind)
    if elem == FLOATS[kind]:
        return g.x(name, _shape(rank))
    return g.typed(name, elem, _shape(rank))


# --- the whole matrix ---------------------------------------------------------------------------


def kernel_types(kernels: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """op key -> the float types (float, float16, bfloat16, double, in that order) that the
    CUDA kernels of the op accept in any of their type constraints."""
    found: dict[str, set[str]] = {}
    for kernel in kernels:
        key = op_key(kernel["domain"], kernel["op"])
        kinds = found.setdefault(key, set())
        for allowed in kernel["types"].values():
            kinds.update(TENSOR_TYPES[t] for t in allowed if t in TENSOR_TYPES)
    return {key: [k for k in FLOATS if k in kinds] for key, kinds in found.items()}


def op_key(domain: str, op: str) -> str:
    return op if domain in ("", "ai.onnx") else f"{domain}:{op}"


def matrix(kernels: list[dict[str, Any]] | None = None, also: Iterable[str] = ()) -> list[Config]:
    """Every configuration: the hand matrices, the option sets over them, then a schema-built
    model set for each CUDA op (default domain) the hand matrices leave out, and for each op of
    `also` (ops of real models without a CUDA kernel: ONNX functions run as their bodies). Without
    `kernels` (a smoke test off the GPU machine), every float type is tried and no schema set is
    made."""
    by_op = kernel_types(kernels) if kernels is not None else {}

    def types(op: str) -> list[str]:
        if kernels is None:
            return list(FLOATS)
        return by_op.get(op) or by_op.get(_ms(op)) or ["float"]

    families = (*HAND, *probe_ops.FAMILIES)
    configs = [config for family in families for config in family(types)]
    configs += list(_with_options(configs))
    if kernels is None and also:  # no kernel list: every op of `also`, float and float16
        hand = {config.op for config in configs}
        for op in sorted(set(also) - hand):
            if ":" not in op and (opset := _newest(op)):
                configs += list(schema_configs(op, opset, ["float", "float16"]))
    if kernels is not None:
        hand = {config.op for config in configs}
        wanted = _cuda_ops(kernels) | {op: _newest(op) for op in also if op not in by_op}
        for op, opset in sorted(wanted.items()):
            if op not in hand and ":" not in op and opset:
                configs += list(schema_configs(op, opset, by_op.get(op, list(FLOATS)[:2])))
    names = [config.name for config in configs]
    assert len(names) == len(set(names)), "configuration names must be unique"
    return configs


def _with_options(configs: list[Config]) -> Iterator[Config]:
    """The option sets over the float and float16 configurations of their ops (convolutions:
    2-D and 3-D, group 1 or depthwise, no dilation, explicit pads)."""
    for options, ops in OPTION_SETS:
        for config in configs:
            if config.op in ops and _option_worthy(config.settings):
                yield Config(config.op, config.settings, config.build, options, config.source)


def _option_worthy(settings: dict[str, Any]) -> bool:
    return (
        settings.get("type") in ("float", "float16")
        and settings.get("dims", "2d") != "1d"
        and settings.get("group", "1") in ("1", "depthwise")
        and settings.get("dilation", 1) == 1
        and settings.get("auto_pad", "NOTSET") == "NOTSET"
    )


def _newest(op: str) -> int:
    """The opset of the newest ONNX schema of `op` (0 when onnx does not know it)."""
    from onnx import defs

    try:
        return int(defs.get_schema(op).since_version)
    except Exception:
        return 0


def _cuda_ops(kernels: list[dict[str, Any]]) -> dict[str, int]:
    """op key -> the opset of its newest CUDA kernel (capped by what onnx can build)."""
    from onnx import defs

    newest = defs.onnx_opset_version()
    found: dict[str, int] = {}
    for kernel in kernels:
        key = op_key(kernel["domain"], kernel["op"])
        found[key] = min(max(found.get(key, 0), kernel["since"]), newest)
    return found
