"""The GPU proof of model-aware pruning (docs/pruning.md): run the probe's app-like models with
the cuDNN folder reduced to what a pruned bundle ships, then with one more library removed.

    python3 tools/prune_proof.py --raw raw.json --ort-dir DIR --cuda-lib SP/nvidia/cu13/lib \
        --cudnn-lib SP/nvidia/cudnn/lib --out OUTDIR

For each model (`transformer`, `conv`): the kept cuDNN libraries are cudnn and cudnn_graph plus
what the raw measurement shows the model's op types loading (as bundle's pruning decides it);
every CUDA library stays. A folder of symlinks to exactly those runs the model through
`tools/gpu_probe.py prove` (LD_LIBRARY_PATH is that folder alone): proof-MODEL.json. Then the
same without one library the evidence says is needed (the first kept sub-library, else
cudnn_graph): proof-MODEL-without-LIB.json, which must fail or visibly map a foreign copy.
Standard library only, like the probe; it runs on the GPU machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).with_name("gpu_probe.py")
ALWAYS = ("libcudnn.so.9", "libcudnn_graph.so.9")
APP_OPS = {  # the op types of the probe's app-like models (tools/gpu_probe.py)
    "transformer": ("MatMul", "Add", "LayerNormalization", "Transpose", "Softmax"),
    "conv": ("Conv", "BatchNormalization", "Relu", "MaxPool"),
}


def cudnn_loads(raw: dict, ops: tuple[str, ...]) -> set[str]:
    """The cuDNN file names (libcudnn_ops.so.9, ...) the op models mapped, beyond `before`."""
    found: set[str] = set()
    for result in raw["results"]:
        if result["model"] in ops:
            assert result["ok"], f"{result['model']} failed in the measurement: {result['error']}"
            before = set(result.get("before") or ())
            for path in result["all"]:
                name = Path(path).name
                if path not in before and name.startswith("libcudnn"):
                    found.add(name.split(".so")[0] + ".so.9")
    return found


def folder_of(target: Path, cuda: Path, cudnn: Path, kept: set[str]) -> Path:
    target.mkdir(parents=True)
    for path in sorted(cuda.iterdir()):
        (target / path.name).symlink_to(path)
    for name in sorted(kept):
        (target / name).symlink_to(cudnn / name)
    return target


def prove(args: argparse.Namespace, model: str, libs: Path, out: Path) -> dict:
    command = [sys.executable, str(PROBE), "prove", "--ort-dir", str(args.ort_dir)]
    command += ["--libs", str(libs), "--model", model, "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    print(f"{out.name}: exit {done.returncode}", file=sys.stderr)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--raw", "--ort-dir", "--cuda-lib", "--cudnn-lib", "--out"):
        parser.add_argument(flag, type=Path, required=True)
    args = parser.parse_args()
    raw = json.loads(args.raw.read_text())
    summary = {}
    for model, ops in APP_OPS.items():
        kept = set(ALWAYS) | cudnn_loads(raw, ops)
        work = args.out / f"libs-{model}"
        whole = prove(
            args,
            model,
            folder_of(work, args.cuda_lib, args.cudnn_lib, kept),
            args.out / f"proof-{model}.json",
        )
        extra = sorted(kept - set(ALWAYS))
        dropped = extra[0] if extra else "libcudnn_graph.so.9"
        less = folder_of(
            work.with_name(work.name + "-less"), args.cuda_lib, args.cudnn_lib, kept - {dropped}
        )
        short = prove(args, model, less, args.out / f"proof-{model}-without-{dropped}.json")
        summary[model] = {
            "kept_cudnn": sorted(kept),
            "ok": whole["ok"],
            "foreign": whole["foreign"],
            "without": dropped,
            "without_ok": short["ok"],
            "without_foreign": short["foreign"],
            "without_error": short["error"],
        }
    (args.out / "prune-proof.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
