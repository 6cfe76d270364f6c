#!/bin/bash
# The GPU run behind manifests/evidence/ for issue 42, as it ran on the team's GPU machine
# (an H200 with PyTorch's CUDA 13 libraries and no network; docs/pruning.md, "Measuring"):
#
#     bash tools/evidence/evidence_run.sh PARTS OUT     (from the repository root)
#
# PARTS holds what travelled to the machine: ort.part* (the onnxruntime-gpu 1.31.1 wheel in
# parts), cudnn.part* when the machine's cuDNN is not the pinned 9.13.0.50, llm/ (the model
# tools/evidence/export_llm.py made, with its models.json) and plan.json (`bundle build
# --dry-run --json` of examples/hello with ort-1.31.1-gpu-cuda13). OUT receives, each file small
# enough to travel back: schemas.json (the release's operator schemas), kernels.json.xz,
# matrix-ops.json.xz, matrix-again.json.xz (ops of the first run measured again), vit_b_16.json,
# proofs.tar.xz, versions.txt.
set -uo pipefail
parts=$(realpath "$1")
out=$(realpath "$2")
work=${TMPDIR:-/tmp}/evidence-run
mkdir -p "$work" "$out"
ort_sha=05d548956197b9d01f59b625de740e0d6be3593f874e241a12dc0362650ecdf7
cudnn_sha=2150b4850725d30653ec3e365f0732e3e2e3eb8633cf3bd2d3117628dea8b4f9
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# onnxruntime-gpu 1.31.1, verified, into its own folder (the machine's onnxruntime stays)
wheel=$work/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl
cat "$parts"/ort.part* >"$wheel"
echo "$ort_sha  $wheel" | sha256sum -c - || exit 1
python3 -m pip install --quiet --no-deps --no-index --target "$work/ort" "$wheel" || exit 1
# Creating every provider for the kernel list crashed once the TensorRT provider failed to
# load (no libnvinfer here): without its library, ORT skips it.
trt=$work/ort/onnxruntime/capi/libonnxruntime_providers_tensorrt.so
[ -f "$trt" ] && mv "$trt" "$work/tensorrt-provider.so.off"

# cuDNN 9.13.0.50 as the profile pins it: the machine's own when it is that version
cudnn=$site/nvidia/cudnn/lib
if ls "$parts"/cudnn.part* >/dev/null 2>&1; then
  cwheel=$work/nvidia_cudnn_cu13-9.13.0.50-py3-none-manylinux_2_27_x86_64.whl
  cat "$parts"/cudnn.part* >"$cwheel"
  echo "$cudnn_sha  $cwheel" | sha256sum -c - || exit 1
  python3 -m pip install --quiet --no-deps --no-index --target "$work/cudnnsite" "$cwheel"
  cudnn=$work/cudnnsite/nvidia/cudnn/lib
fi
cuda=$site/nvidia/cu13/lib
export LD_LIBRARY_PATH=$cuda:$cudnn
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -m pip list 2>/dev/null | grep -i -E '^(torch|torchvision|onnx|onnxruntime|nvidia-cudnn-cu13|nvidia-cublas|numpy) '
  ls "$cudnn" | head -20
} >"$out/versions.txt" 2>&1

# 1. the release's kernels and schemas; 2. the configurations of tools/evidence/probe_ops.py
# (on this wheel the kernel list crashes even so: docs/pruning.md; the list then comes from
# ORT's kernel documentation, tools/evidence/kernels_source.py, and the schemas from
# get_all_operator_schema(), which creates no provider)
python3 -m tools.evidence.gpu_matrix kernels --ort-dir "$work/ort" --out "$work/kernels.json" ||
  echo "no kernel list from this build"
PYTHONPATH="$work/ort" python3 -c '
import json, sys, onnxruntime
from onnxruntime.capi import _pybind_state as state
schemas = [{"op": s.name, "domain": s.domain, "since": s.since_version, "deprecated": s.deprecated}
           for s in state.get_all_operator_schema()]
schemas.sort(key=lambda s: (s["domain"], s["op"], s["since"]))
json.dump({"onnxruntime": onnxruntime.__version__, "schemas": schemas}, sys.stdout, indent=0)
' >"$out/schemas.json"
kernels=()
[ -s "$work/kernels.json" ] && kernels=(--kernels "$work/kernels.json")
only=$(python3 -c 'from tools.evidence import probe_ops; print(probe_ops.only_regex())')
python3 -m tools.evidence.gpu_matrix measure --ort-dir "$work/ort" "${kernels[@]}" \
  --only "$only" --jobs 14 --out "$work/matrix-ops.json" || exit 1
# the same machine again on ops of the first run: their rows must come out the same
python3 -m tools.evidence.gpu_matrix measure --ort-dir "$work/ort" "${kernels[@]}" \
  --only '^(Conv|ReduceSum|MatMul|LSTM|com\.microsoft\.Attention|com\.microsoft\.Rfft)__' \
  --jobs 14 --out "$work/matrix-again.json"
mkdir -p "$work/table"
python3 -m tools.evidence.evidence_table manifests/evidence/ort-1.31.1-cuda13.matrix.json.xz \
  --cuda 13 \
  --more manifests/evidence/ort-1.31.1-cuda13.matrix-extra.json.xz "$work/matrix-ops.json" \
  "${kernels[@]}" --out "$work/table/ort-1.31.1-cuda13.toml" || exit 1

# 3. a torchvision ViT-B/16 (random weights, torch's default exporter): its ops and decision
mkdir -p "$work/vit"
python3 - "$work/vit" "$work/table/ort-1.31.1-cuda13.toml" "$parts/plan.json" >"$out/vit_b_16.json" <<'EOF'
import json, sys, time
from pathlib import Path
import torch, torchvision
from bundler.pruning.evidence import load_evidence
from bundler.pruning.onnx_models import read_model_ops
from bundler.closure.plan import plan_from_json
from bundler.pruning.prune import TableSource, decide

folder, table, plan_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
torch.manual_seed(0)
model = torchvision.models.vit_b_16(weights=None).eval()
path = folder / "vit_b_16.onnx"
begin = time.perf_counter()
torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(path))
seconds = time.perf_counter() - begin
ops = read_model_ops(path)
plan_data = json.loads(plan_file.read_text())
plan = plan_from_json(json.dumps(plan_data.get("plan", plan_data)), str(plan_file))
result = {"model": "torchvision.models.vit_b_16(weights=None)", "torch": torch.__version__,
          "torchvision": torchvision.__version__, "export": "torch.onnx.export defaults",
          "seconds": round(seconds, 1), "ops": sorted(ops.ops)}
for name, source in (("before", "manifests/evidence/ort-1.31.1-cuda13.toml"), ("after", table)):
    decision = decide(plan, [ops], TableSource(load_evidence(Path(source))), "")
    result[name] = {"pruned": sorted(i.name for i in decision.pruned), "reason": decision.reason}
entry = {"name": "vit_b_16", "ok": True, "ops": sorted(ops.ops)}
(folder / "models.json").write_text(json.dumps([entry]))
print(json.dumps(result, indent=1))
EOF

# 4. the proofs: each model from a folder of what bundle keeps, then with one library less
for models in "$parts/llm" "$work/vit"; do
  python3 -m tools.evidence.prune_proof --table "$work/table/ort-1.31.1-cuda13.toml" \
    --models "$models" \
    --plan "$parts/plan.json" --ort-dir "$work/ort" --cuda-lib "$cuda" --cudnn-lib "$cudnn" \
    --out "$work/proof/$(basename "$models")"
done
rm -rf "$work"/proof/*/libs-*
[ -s "$work/kernels.json" ] && xz -T0 -c "$work/kernels.json" >"$out/kernels.json.xz"
xz -T0 -c "$work/matrix-ops.json" >"$out/matrix-ops.json.xz"
xz -T0 -c "$work/matrix-again.json" >"$out/matrix-again.json.xz"
tar -C "$work" -cJf "$out/proofs.tar.xz" proof table
