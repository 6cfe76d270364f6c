"""The real GPU bundle of examples/hello as synthetic images: SYNTHETIC_GPU names every file of
the ORT 1.19.2 / CUDA 12.4 / cuDNN 9.1 folder with what it imports and its versions, wired as
docs/field-notes.md#import-graph describes the real DLLs, and `synthetic_gpu` writes it (pefactory
images) into a folder, minus some files or plus others, for the audit's cheap checks."""

from __future__ import annotations

from pathlib import Path

from tests.support.pefactory import PESpec, write_pe

PROVIDER = "onnxruntime_providers_cuda.dll"
MSVC = ("MSVCP140.dll", "VCRUNTIME140.dll", "VCRUNTIME140_1.dll")
VC = {"file_version": (14, 44, 35211, 0), "linker_version": (14, 44)}
ORT = {"file_version": (1, 19, 24, 903), "linker_version": (14, 40)}
CUDNN = {"file_version": (9, 1, 0, 70), "linker_version": (14, 20)}

# The real GPU bundle's import graph (docs/field-notes.md#import-graph), as synthetic images.
SYNTHETIC_GPU: dict[str, PESpec] = {
    "hello.exe": PESpec(dll=False, imports=("onnxruntime.dll", "KERNEL32.dll")),
    "onnxruntime.dll": PESpec(imports=(*MSVC, "MSVCP140_1.dll", "ADVAPI32.dll"), **ORT),
    "onnxruntime_providers_shared.dll": PESpec(imports=("VCRUNTIME140.dll",), **ORT),
    PROVIDER: PESpec(
        imports=(
            "cublasLt64_12.dll",
            "cublas64_12.dll",
            "cudnn64_9.dll",
            "cufft64_11.dll",
            "cudart64_12.dll",
            "onnxruntime_providers_shared.dll",
            *MSVC,
        ),
        linker_version=(14, 40),
    ),
    "cublas64_12.dll": PESpec(imports=("cublasLt64_12.dll",)),
    "cublasLt64_12.dll": PESpec(),
    "cudart64_12.dll": PESpec(),
    "cufft64_11.dll": PESpec(),
    "cudnn64_9.dll": PESpec(**CUDNN),
    "cudnn_graph64_9.dll": PESpec(**CUDNN),
    "cudnn_ops64_9.dll": PESpec(imports=("cudnn_graph64_9.dll",), **CUDNN),
    "cudnn_cnn64_9.dll": PESpec(imports=("cudnn_ops64_9.dll", "cudnn_graph64_9.dll"), **CUDNN),
    "cudnn_adv64_9.dll": PESpec(imports=("cudnn_ops64_9.dll", "cudnn_graph64_9.dll"), **CUDNN),
    "cudnn_engines_precompiled64_9.dll": PESpec(imports=("cudnn_graph64_9.dll",), **CUDNN),
    "cudnn_engines_runtime_compiled64_9.dll": PESpec(imports=("cudnn_graph64_9.dll",), **CUDNN),
    "cudnn_heuristic64_9.dll": PESpec(imports=("cudnn_graph64_9.dll",), **CUDNN),
    "nvrtc64_120_0.dll": PESpec(imports=("USER32.dll", "ADVAPI32.dll")),
    "nvrtc-builtins64_124.dll": PESpec(),
    "msvcp140.dll": PESpec(imports=("VCRUNTIME140.dll", "VCRUNTIME140_1.dll"), **VC),
    "msvcp140_1.dll": PESpec(imports=("MSVCP140.dll", "VCRUNTIME140.dll"), **VC),
    "vcruntime140.dll": PESpec(**VC),
    "vcruntime140_1.dll": PESpec(imports=("VCRUNTIME140.dll",), **VC),
}


def synthetic_gpu(folder: Path, without: tuple[str, ...] = (), **extra: PESpec) -> Path:
    """The synthetic GPU bundle in `folder`, minus `without`, plus `extra` files."""
    for name, spec in {**SYNTHETIC_GPU, **extra}.items():
        if name not in without:
            write_pe(folder / name, spec)
    return folder
