"""The closure of examples/hello on the real ORT 1.19.2 / CUDA 12.4 / cuDNN 9.1 / MSVC DLLs, as
docs/field-notes.md#import-graph and the issue's acceptance list write it out (not copied from
bundle's output): the wheels that hold the GPU set (GPU_WHEELS), its VC++ runtime and cuDNN
DLLs, and the whole set the GPU profile bundles (GPU_BUNDLE)."""

from __future__ import annotations

GPU_WHEELS = (
    "onnxruntime-gpu",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cublas-cu12",
    "nvidia-cufft-cu12",
    "nvidia-cuda-nvrtc-cu12",
    "nvidia-cudnn-cu12",
    "msvc-runtime",
)
VC_RUNTIME = {"msvcp140.dll", "msvcp140_1.dll", "vcruntime140.dll", "vcruntime140_1.dll"}
CUDNN = {
    "cudnn64_9.dll",
    "cudnn_graph64_9.dll",
    "cudnn_ops64_9.dll",
    "cudnn_cnn64_9.dll",
    "cudnn_adv64_9.dll",
    "cudnn_engines_precompiled64_9.dll",
    "cudnn_engines_runtime_compiled64_9.dll",
    "cudnn_heuristic64_9.dll",
}
GPU_BUNDLE = (
    {
        "onnxruntime.dll",
        "onnxruntime_providers_shared.dll",
        "onnxruntime_providers_cuda.dll",
        "cudart64_12.dll",
        "cublas64_12.dll",
        "cublaslt64_12.dll",
        "cufft64_11.dll",
        "nvrtc64_120_0.dll",
        "nvrtc-builtins64_124.dll",
    }
    | CUDNN
    | VC_RUNTIME
)
