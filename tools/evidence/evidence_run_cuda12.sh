#!/bin/bash
# The GPU run behind manifests/evidence/ort-1.19.2-cuda12.toml (issue 42, item 3): the
# configuration matrix of ORT 1.19.2's CUDA 12 build with cuDNN 9.1.0.70 and the CUDA 12.4
# libraries the ort-1.19.2-gpu-cuda12 profile pins, on a GPU machine with no network:
#
#     bash tools/evidence/evidence_run_cuda12.sh PARTS OUT HALF     (from the repository root)
#
# PARTS holds w12.part* (a tar of the seven Linux wheels below, in parts). HALF is a or b: the
# matrix in two halves by configuration name, one call each (a call may run 10 minutes);
# OUT receives matrix-HALF.json.xz and, with a, versions.txt.
set -uo pipefail
parts=$(realpath "$1")
out=$(realpath "$2")
half=$3
work=${TMPDIR:-/tmp}/evidence-run-cuda12
mkdir -p "$work/wheels" "$out"
if [ ! -d "$work/site" ]; then
  cat "$parts"/w12.part* | tar -x -C "$work/wheels" || exit 1
  (cd "$work/wheels" && sha256sum -c - <<'EOF') || exit 1
554a02a3fac0119707eb87327908afd21c4e6f0fa5bf9a034398f098adc316c5  onnxruntime_gpu-1.19.2-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
165764f44ef8c61fcdfdfdbe769d687e06374059fbb388b6c89ecb0e28793a6f  nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl
2fc8da60df463fdefa81e323eef2e36489e1c94335b5358bcb38360adf75ac9b  nvidia_cublas_cu12-12.4.5.8-py3-none-manylinux2014_x86_64.whl
64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5  nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl
f083fc24912aa410be21fa16d157fed2055dab1cc4b6934a0e03cba69eb242b9  nvidia_cufft_cu12-11.2.1.3-py3-none-manylinux2014_x86_64.whl
99f1a32f1ac2bd134897fc7a203f779303261268a65762a623bf30cc9fe79117  nvidia_curand_cu12-10.3.7.77-py3-none-manylinux2014_x86_64.whl
a178759ebb095827bd30ef56598ec182b85547f1508941a3d560eb7ea1fbf338  nvidia_cuda_nvrtc_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl
EOF
  python3 -m pip install --quiet --no-deps --no-index --target "$work/ort" "$work"/wheels/onnxruntime_gpu-*.whl || exit 1
  python3 -m pip install --quiet --no-deps --no-index --target "$work/site" "$work"/wheels/nvidia_*.whl || exit 1
  rm -rf "$work/wheels"
fi
LD_LIBRARY_PATH=$(printf '%s:' "$work"/site/nvidia/*/lib)
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH%:}
if [ "$half" = a ]; then
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ls "$work"/site/nvidia/*/lib; } >"$out/versions.txt" 2>&1
  only='^[A-Ka-k]'
else
  only="${ONLY:-^[^A-Ka-k]}"  # ONLY: a part of the half (a call of 10 minutes at most)
fi
# every ONNX op of the installed onnx, as the 1.31.1 table was first made (no kernel list)
also=$(python3 -c 'from onnx import defs; print(",".join(sorted({s.name for s in defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")})))')
python3 -m tools.evidence.gpu_matrix measure --ort-dir "$work/ort" --also "$also" \
  --only "$only" --jobs 16 --timeout 60 --out "$work/matrix-$half.json" || exit 1
xz -T0 -c "$work/matrix-$half.json" >"$out/matrix-$half.json.xz"
