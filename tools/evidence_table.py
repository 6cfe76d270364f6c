"""Turn the raw output of tools/gpu_probe.py into the evidence table bundle reads
(manifests/evidence/ort-<release>-cuda<major>.toml, beside the raw JSON it came from).

    python tools/evidence_table.py manifests/evidence/ort-1.31.1-cuda13.raw.json --cuda 13

One row per op type whose model ran on the CUDA EP: the cuDNN libraries the process mapped
after importing onnxruntime (created the session, ran it once), by their Windows DLL names
(libcudnn_ops.so.9 is cudnn_ops64_9.dll). A model that failed or fell back to another provider
gets no row, so bundle prunes nothing for an app using that op. docs/pruning.md explains it.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

APP_MODELS = ("transformer", "conv")  # the probe's app-like models: proofs, not op rows
_CUDNN = re.compile(r"lib(cudnn(?:_[a-z_]+)?)\.so\.(\d+)")


def dll_name(path: str) -> str | None:
    """cudnn_ops64_9.dll for .../libcudnn_ops.so.9.13.0; None for anything else."""
    match = _CUDNN.fullmatch(Path(path).name) or _CUDNN.match(Path(path).name)
    return f"{match[1]}64_{match[2]}.dll" if match else None


def cudnn_text(version: Any) -> str:
    """9.13.0 for cudnnGetVersion()'s 91300 (major * 10000 + minor * 100 + patch)."""
    if not isinstance(version, int):
        return str(version)
    return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"


def loads(result: dict[str, Any]) -> list[str]:
    before = set(result.get("before") or ())
    mapped = [path for path in result.get("all") or () if path not in before]
    return sorted({name for path in mapped if (name := dll_name(path))})


def table(raw: dict[str, Any], raw_name: str, cuda: str) -> str:
    rows = [r for r in raw["results"] if r["ok"] and r["model"] not in APP_MODELS]
    every = set.intersection(*(set(loads(r)) for r in rows)) if rows else set()
    gpu = raw.get("gpu") or "unknown GPU"
    lines = [
        "# Which cuDNN libraries ONNX Runtime's CUDA EP loads, per op type: one tiny model per op,",
        "# each run once in a fresh process (tools/gpu_probe.py), what it had mapped afterwards.",
        f"# Written by tools/evidence_table.py from {raw_name} (beside this file). A model that",
        "# failed or fell back to another provider has no row: bundle prunes nothing for it.",
        "schema_version = 1",
        f'ort = "{raw["onnxruntime"]}"',
        f'cuda = "{cuda}"',
        f'cudnn = "{cudnn_text(raw.get("cudnn_version"))}"',
        'platform = "linux-x86_64"  # the Windows DLL names are those of the same libraries',
        f"gpu = {json.dumps(gpu.strip())}",
        f'measured = "{raw["started"][:10]}"',
        f'raw = "{raw_name}"',
        f"every_session = {json.dumps(sorted(every))}",
    ]
    for result in sorted(rows, key=lambda r: r["model"]):
        lines += ["", "[[ops]]", f'op = "{result["model"]}"']
        lines += [f"loads = {json.dumps(loads(result))}", f'model = "{result["model"]}"']
    failed = [r["model"] for r in raw["results"] if not r["ok"]]
    if failed:
        lines += ["", f"# no row (failed or not on the CUDA EP): {', '.join(sorted(failed))}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="the probe's raw JSON (in manifests/evidence/)")
    parser.add_argument("--cuda", required=True, help="the CUDA major of the ORT build, e.g. 13")
    args = parser.parse_args()
    raw = json.loads(args.raw.read_text())
    target = args.raw.with_name(args.raw.name.replace(".raw.json", ".toml"))
    target.write_text(table(raw, args.raw.name, args.cuda))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
