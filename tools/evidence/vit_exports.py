"""ViT-B/16 (torchvision, random weights) exported the ways a user may export it, and bundle's
pruning decision for each with a table (issue 42): the TorchScript exporter with a dynamic
batch, and the dynamo exporter with a dynamic batch.

    python3 -m tools.evidence.vit_exports --plan PLAN --table OLD --table NEW > vit_exports.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--table", type=Path, action="append", required=True)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    import torch  # after the arguments: --help needs no torch
    import torchvision

    from bundler.closure.plan import plan_from_json
    from bundler.pruning.evidence import load_evidence
    from bundler.pruning.onnx_models import read_model_ops
    from bundler.pruning.prune import TableSource, decide

    warnings.filterwarnings("ignore")
    data = json.loads(args.plan.read_text())
    plan = plan_from_json(json.dumps(data.get("plan", data)), str(args.plan))
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    batch = torch.export.Dim("batch", max=64)
    ways: dict[str, dict[str, Any]] = {
        "torchscript, dynamic batch": {
            "dynamo": False, "opset_version": 17, "input_names": ["x"],
            "dynamic_axes": {"x": {0: "batch"}},
        },
        "dynamo, dynamic batch": {"dynamo": True, "dynamic_shapes": ({0: batch},)},
    }  # fmt: skip
    found: dict[str, Any] = {}
    for name, kwargs in ways.items():
        path = args.work / f"vit_b_16-{len(found)}.onnx"
        row: dict[str, Any] = {"export": {k: str(v) for k, v in kwargs.items()}}
        try:
            torch.onnx.export(model, (x,), str(path), **kwargs)
            ops = read_model_ops(path)
            row["ops"] = sorted(ops.ops)
            for table in args.table:
                decision = decide(plan, [ops], TableSource(load_evidence(table)), "")
                pruned = sorted(item.name for item in decision.pruned)
                row[str(table)] = {"pruned": pruned, "reason": decision.reason}
        except Exception as exc:  # one way's failure is a finding too
            row["error"] = f"{type(exc).__name__}: {exc}"[:500]
        found[name] = row
    versions = {"torch": torch.__version__, "torchvision": torchvision.__version__}
    print(json.dumps({**versions, "exports": found}, indent=1))


if __name__ == "__main__":
    main()
