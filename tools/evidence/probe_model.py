"""One model of the load probe's configuration matrix: its configuration (`Config`: the op,
the matrix's settings, the CUDA provider options, a name that is a file name) and the one-op
graph it is built with (`Graph`). The hand matrices (tools/evidence/probe_matrix.py) and the hand
builders of issue 42 (tools/evidence/probe_ops.py) both build on these. Standard library, onnx
and numpy only; no `bundler` import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FLOAT, UINT8, INT32, INT64, BOOL, FLOAT16, DOUBLE, BFLOAT16 = 1, 2, 6, 7, 9, 10, 11, 16
FLOATS = {"float": FLOAT, "float16": FLOAT16, "bfloat16": BFLOAT16, "double": DOUBLE}
TENSOR_TYPES = {f"tensor({name})": name for name in FLOATS}
MS = "com.microsoft"


@dataclass(frozen=True)
class Config:
    """One model of the matrix: the op it measures, how, and with which provider options."""

    op: str  # the op key: "ReduceSum", "com.microsoft:Attention"
    settings: dict[str, Any]  # the matrix's axes for this model (type, rank, axes, ...)
    build: Callable[[], Any] = field(compare=False, repr=False)
    options: dict[str, str] = field(default_factory=dict)  # CUDA EP options; {} = defaults
    source: str = "hand"  # "hand" (a builder below) or "schema" (built from the ONNX schema)

    @property
    def name(self) -> str:
        """A unique, file-safe id: ReduceSum__float16__r4__axes-0-2__keepdims-0."""
        parts = [self.op.replace(":", "."), *(_part(k, v) for k, v in self.settings.items())]
        parts += [_part(k, v) for k, v in sorted(self.options.items())]
        return "__".join(parts)


def _part(key: str, value: Any) -> str:
    if isinstance(value, list | tuple):
        value = "-".join(str(v) for v in value) or "none"
    text = value if key in ("type", "dims") else f"{key}-{value}"
    return str(text).replace(".", "").replace("/", "-")


# --- building one model ---------------------------------------------------------------------


@dataclass
class Graph:
    """A one-op graph under construction: float tensors enter as float32 and are cast to
    `elem`; outputs of the op's float type are cast back."""

    elem: int
    nodes: list[Any] = field(default_factory=list)
    inputs: list[Any] = field(default_factory=list)
    inits: list[Any] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    after: list[Any] = field(default_factory=list)  # the casts back, placed after the op

    def x(self, name: str, shape: list[int]) -> str:
        """A float graph input of the configuration's type."""
        from onnx import helper

        self.inputs.append(helper.make_tensor_value_info(name, FLOAT, shape))
        return self._cast_in(name)

    def w(self, name: str, shape: list[int], low: float | None = None) -> str:
        """A float initializer (seeded) of the configuration's type."""
        import numpy as np
        from onnx import numpy_helper

        rng = np.random.default_rng(len(self.inits) + sum(shape))
        data = rng.random(shape) + low if low is not None else rng.standard_normal(shape) * 0.1
        self.inits.append(numpy_helper.from_array(data.astype(np.float32), name))
        return self._cast_in(name)

    def i(self, name: str, values: Any, scalar: bool = False) -> str:
        """An int64 initializer."""
        import numpy as np
        from onnx import numpy_helper

        array = np.array(values, dtype=np.int64)  # a scalar stays 0-D
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def typed(self, name: str, elem: int, shape: list[int]) -> str:
        """A graph input of a fixed type (int64 indices, bool masks)."""
        from onnx import helper

        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def _cast_in(self, name: str) -> str:
        if self.elem == FLOAT:
            return name
        from onnx import helper

        self.nodes.append(helper.make_node("Cast", [name], [f"{name}_t"], to=self.elem))
        return f"{name}_t"

    def out(self, name: str, elem: int | None = None) -> str:
        """An output of the op: of the configuration's float type (cast back to float32) when
        `elem` is None, else of type `elem`."""
        from onnx import helper

        if elem is not None:
            self.outputs.append(helper.make_tensor_value_info(name, elem, None))
            return name
        if self.elem == FLOAT:
            self.outputs.append(helper.make_tensor_value_info(name, FLOAT, None))
            return name
        self.after.append(helper.make_node("Cast", [f"{name}_t"], [name], to=FLOAT))
        self.outputs.append(helper.make_tensor_value_info(name, FLOAT, None))
        return f"{name}_t"

    def op(self, op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs: Any):
        from onnx import helper

        node = helper.make_node(op, inputs, outputs, name=op, domain=domain or None, **attrs)
        self.nodes += [node, *self.after]
        self.after.clear()

    def model(self, opset: int, domain: str = "", check: bool = True) -> Any:
        """The model; checked with onnx unless it uses ops onnx does not know (`com.microsoft`,
        or ORT's own ops of the default domain)."""
        from onnx import checker, helper, shape_inference

        graph = helper.make_graph(self.nodes, "probe", self.inputs, self.outputs, self.inits)
        opsets = [helper.make_opsetid("", opset)]
        if domain:
            opsets.append(helper.make_opsetid(domain, 1))
        ir = helper.find_min_ir_version_for(opsets[:1])
        model = helper.make_model(graph, opset_imports=opsets, producer_name="gpu_probe")
        model.ir_version = ir
        if check and not domain:
            model = shape_inference.infer_shapes(model, strict_mode=True)
            checker.check_model(model)
        return model
