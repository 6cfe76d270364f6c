"""The kernel list of ONNX Runtime's CUDA EP read from ORT's own documentation of its kernels,
for the evidence table's derived rows and its coverage test (issue 42), where the release's own
list cannot be had: `python -m tools.evidence.gpu_matrix kernels` (onnxruntime's
`get_all_opkernel_def`) crashes on the onnxruntime-gpu 1.31.1 wheel, with or without its
TensorRT provider library (docs/pruning.md).

    python3 -m tools.evidence.kernels_source --doc OperatorKernels.md --commit SHA \\
        --schemas SCHEMAS --release 1.31.1 --out ort-1.31.1-cuda13.kernels.json

- OperatorKernels.md is docs/OperatorKernels.md of microsoft/onnxruntime at commit SHA: ORT
  generates it from its registered kernels (tools/python/gen_opkernel_doc.py). Its section
  "Operators implemented by CUDAExecutionProvider" gives, per domain, each op's kernels: the
  opset versions (`13+`, `13`, `[6, 12]`) and the types.
- SCHEMAS is what the release knows (`onnxruntime.capi._pybind_state.get_all_operator_schema()`
  of the release, run on the GPU machine: it creates no provider), written into the output as
  `schemas`, as `gpu_matrix.py kernels` writes them.
- The commit is not the release: an op that gained a CUDA kernel after it would count as having
  none. The table says which commit its `cpu-only` rows come from.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

CUDA = "CUDAExecutionProvider"
SECTION = "## Operators implemented by CUDAExecutionProvider"
DOMAIN_ROW = re.compile(r"^\|\*\*Operator Domain:\*\* \*([^*]+)\*")
VERSIONS = re.compile(r"^\[?(\d+)(?:, (\d+)\])?(\+)?$")


def section(text: str) -> list[str]:
    """The lines of the CUDA EP's table."""
    start = text.index(SECTION)
    end = text.find("\n## Operators implemented by", start + len(SECTION))
    return text[start : end if end > 0 else len(text)].splitlines()


def kernels_of(text: str) -> list[dict[str, Any]]:
    """One entry per kernel row of the CUDA EP's table: op, domain, since, until, types."""
    found: list[dict[str, Any]] = []
    domain, op = "", ""
    for line in section(text):
        heading = DOMAIN_ROW.match(line)
        if heading:
            domain = "" if heading.group(1) == "ai.onnx" else heading.group(1)
            continue
        cells = line.split("|")
        if len(cells) < 5 or not line.startswith("|") or (set(cells[1]) <= {"-"} and cells[1]):
            continue
        op = cells[1].strip() or op
        versions = VERSIONS.match(cells[3].strip())
        if not op or op == "Op Name" or not versions:
            continue
        since = int(versions.group(1))
        until = int(versions.group(2)) if versions.group(2) else None
        if until is None and not versions.group(3):
            until = since  # one opset: "13"
        types = re.sub(r"<br/?>|\*\*", " ", cells[4]).split()
        found.append(
            {"op": op, "domain": domain, "provider": CUDA, "since": since, "until": until,
             "types": " ".join(types)}
        )  # fmt: skip
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, required=True, help="docs/OperatorKernels.md")
    parser.add_argument("--commit", required=True, help="the commit the document is from")
    parser.add_argument("--schemas", type=Path, required=True, help="the release's schemas")
    parser.add_argument("--release", required=True, help="the ORT release, e.g. 1.31.1")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    schemas = json.loads(args.schemas.read_text(encoding="utf-8"))
    kernels = kernels_of(args.doc.read_text(encoding="utf-8"))
    data = {
        "onnxruntime": args.release,
        "kernels_from": {
            "repository": "microsoft/onnxruntime",
            "path": "docs/OperatorKernels.md",
            "commit": args.commit,
        },
        "schemas_from": f"get_all_operator_schema() of onnxruntime-gpu {schemas['onnxruntime']}",
        "providers": [CUDA],
        "kernels": kernels,
        "schemas": schemas["schemas"],
    }
    args.out.write_text(json.dumps(data, indent=0) + "\n", encoding="utf-8")
    ops = {(k["domain"], k["op"]) for k in kernels}
    print(f"{len(kernels)} CUDA kernels of {len(ops)} ops; {len(data['schemas'])} schemas")


if __name__ == "__main__":
    main()
