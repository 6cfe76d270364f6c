"""The GPU proof of model-aware pruning on real models (docs/pruning.md): for each exported
model, the libraries bundle's decision keeps, a run from a folder of exactly those, then a run
with one more library removed.

    python3 -m tools.evidence.prune_proof --table TABLE --models DIR --plan PLAN --ort-dir DIR \\
        --cuda-lib SP/nvidia/cu13/lib --cudnn-lib SP/nvidia/cudnn/lib --out OUTDIR

- The decision is bundle's own (bundler.pruning.prune.decide with the table,
  bundler.pruning.onnx_models for the op types), made on PLAN: the Windows plan of the GPU
  bundle (`bundle build --dry-run --json`'s `plan`), so what stays is what the Windows bundle
  would ship, static imports included.
- The pruned folder holds a symlink to every CUDA and cuDNN library of the Linux wheels whose
  Windows counterpart the decision did not leave out; the model runs through
  `python -m tools.evidence.gpu_probe prove` with LD_LIBRARY_PATH exactly that folder and
  every graph optimization (as an app runs): proof-MODEL.json. It must run with nothing foreign
  mapped.
- Then the same without one more library: the first one the run mapped that the decision could
  have pruned (else cudnn_graph): proof-MODEL-without-LIB.json, which must fail or visibly map
  a foreign copy.
`models.json` (tools/evidence/export_models.py) names the models; `prune-proof.json` sums it
all up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bundler.closure.plan import plan_from_json
from bundler.measure.names import windows_name
from bundler.pruning.evidence import load_evidence
from bundler.pruning.onnx_models import read_model_ops
from bundler.pruning.prune import CANDIDATE, TableSource, decide
from tools.evidence import gpu_probe


def folder_of(target: Path, folders: tuple[Path, ...], left_out: set[str]) -> Path:
    """A folder of symlinks to every library of `folders` (the CUDA and the cuDNN wheels' lib
    folders) but those whose Windows counterpart is left out (all aliases of it)."""
    target.mkdir(parents=True)
    for folder in folders:
        for path in sorted(folder.iterdir()):
            name = (windows_name(str(path)) or "").lower()
            if name not in left_out and not (target / path.name).exists():
                (target / path.name).symlink_to(path)
    return target


def prove(
    args: argparse.Namespace, model: Path, libs: Path, out: Path, entry: dict[str, Any]
) -> dict[str, Any]:
    """`python -m tools.evidence.gpu_probe prove`; the entry's `dims` size the model's named
    dynamic dimensions, its `ones` name the inputs fed all ones (models.json,
    tools/evidence/export_llm.py)."""
    command = [sys.executable, "-m", gpu_probe.MODULE, "prove", "--ort-dir", str(args.ort_dir)]
    command += ["--libs", str(libs), "--model", str(model), "--out", str(out)]
    command += ["--provider", args.provider]
    env = dict(os.environ, **{gpu_probe.DIMS_ENV: json.dumps(entry.get("dims", {}))})
    env[gpu_probe.ONES_ENV] = json.dumps(entry.get("ones", []))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    print(f"{out.name}: exit {done.returncode} {done.stderr.strip()[-300:]}", file=sys.stderr)
    return json.loads(out.read_text()) if out.is_file() else {"ok": False, "foreign": []}


def one_model(args: argparse.Namespace, entry: dict[str, Any], context: dict[str, Any]) -> dict:
    path = args.models / f"{entry['name']}.onnx"
    ops = read_model_ops(path)
    decision = decide(context["plan"], [ops], TableSource(context["table"]), "")
    left_out = {item.name.lower() for item in decision.pruned}
    summary: dict[str, Any] = {"ops": sorted(ops.ops), "pruned": sorted(left_out)}
    summary |= {"kept": list(decision.kept), "reason": decision.reason}
    summary |= {"unknown_ops": list(decision.unknown_ops), "saved": decision.saved}
    if not left_out:
        return summary
    folders = (args.cuda_lib, args.cudnn_lib)
    work = args.out / f"libs-{entry['name']}"
    whole = prove(
        args, path, folder_of(work, folders, left_out), args.out / f"proof-{entry['name']}.json",
        entry,
    )  # fmt: skip
    summary |= {"ok": whole["ok"], "foreign": whole["foreign"], "error": whole.get("error")}
    mapped = [lib["name"] for lib in whole.get("libs", []) if lib.get("from_folder")]
    prunable = [n for n in mapped if (w := windows_name(n)) and CANDIDATE.fullmatch(w)]
    dropped = prunable[0] if prunable else "libcudnn_graph.so.9"
    less = left_out | {(windows_name(dropped) or "").lower()}
    less_folder = folder_of(work.with_name(work.name + "-less"), folders, less)
    short = prove(args, path, less_folder, args.out / f"proof-{entry['name']}-without.json", entry)
    summary |= {"without": dropped, "without_ok": short["ok"]}
    summary |= {"without_foreign": short["foreign"], "without_error": short.get("error")}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--table", "--models", "--plan", "--ort-dir", "--cuda-lib", "--cudnn-lib"):
        parser.add_argument(flag, type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--provider", default="CUDAExecutionProvider", help="(CPU: a smoke test)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    plan_data = json.loads(args.plan.read_text())
    context = {
        "table": load_evidence(args.table),
        "plan": plan_from_json(json.dumps(plan_data.get("plan", plan_data)), str(args.plan)),
    }
    entries = [e for e in json.loads((args.models / "models.json").read_text()) if e["ok"]]
    if args.only:
        entries = [e for e in entries if e["name"] in args.only.split(",")]
    summary = {}
    for entry in entries:
        try:
            summary[entry["name"]] = one_model(args, entry, context)
        except Exception as exc:  # one model's trouble must not hide the others' proofs
            summary[entry["name"]] = {"error": f"{type(exc).__name__}: {exc}"}
        print(entry["name"], json.dumps(summary[entry["name"]])[:400], file=sys.stderr)
    (args.out / "prune-proof.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
