"""Act layer: one measurement, in a fresh process: run one ONNX model once with ONNX Runtime and
record what the process loaded and where each node ran.

The parent (bundler.measure.parent) starts this file as a script (`python -P child.py ...`: the
script's folder stays off sys.path), so the process holds only what the model needs: the
standard library, numpy and onnxruntime, nothing of bundle. It writes its facts to the --result
file as one JSON line, again after every phase, so the parent knows how far a child that died
got. The parent decides what the facts mean (a fallback, a node on another provider).

Phases: `import` (numpy, onnxruntime), `create` (the session, on --provider), `run` (once, with
seeded random inputs), `modules` (every mapped .so on Linux from /proc/self/maps, every module
on Windows from K32EnumProcessModulesEx), `placement` (a second, profiled session: the provider
of each node), `done`. `--about` instead only imports onnxruntime and says its version and
providers: the parent checks the release before measuring anything.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

# ONNX tensor types to numpy dtypes; another type gets float32 (an error the run reports).
NUMPY_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(bool)": "bool",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
}
ERROR_LEVEL = 3  # ORT's log severity: errors only, its warnings would bury the child's stderr
INFO_LEVEL = 1  # where ORT says which nodes it placed on the CPU on purpose
CUDNN_NAMES = ("libcudnn.so.", "cudnn64_")


class Report:
    """The child's facts, written whole to the result file after each phase."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.facts: dict[str, Any] = {"phase": "start", "ok": False, "error": None}

    def phase(self, name: str, **facts: Any) -> None:
        self.facts.update(facts, phase=name)
        self.write()

    def write(self) -> None:
        temporary = self.path.with_name(self.path.name + ".part")
        temporary.write_text(json.dumps(self.facts) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, or say why not in the result file. The exit status means nothing: the parent
    reads the result, whose last phase is `done` only for a measurement that finished."""
    args = _parser().parse_args(argv)
    report = Report(Path(args.result))
    try:
        _search_first(args.libs)
        if args.about:
            _about(report)
        else:
            _measure(report, args)
    except Exception as exc:
        report.phase(report.facts["phase"], error=f"{type(exc).__name__}: {exc}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("model", nargs="?")
    parser.add_argument("--result", required=True, help="where to write the facts (JSON)")
    parser.add_argument("--about", action="store_true", help="only onnxruntime's version")
    parser.add_argument("--provider", default="CPUExecutionProvider")
    parser.add_argument("--option", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--dim", action="append", default=[], help="NAME=N")
    parser.add_argument("--libs", help="a folder searched first for DLLs (Windows)")
    return parser


def _search_first(libs: str | None) -> None:
    """Windows: the --libs folder before every other for the DLLs onnxruntime loads (the
    parent also puts it first on PATH). Linux: the parent's LD_LIBRARY_PATH does it."""
    if libs and sys.platform == "win32":
        os.add_dll_directory(libs)


def _about(report: Report) -> None:
    report.phase("import")
    ort = _import_onnxruntime()
    report.phase(
        "done",
        ok=True,
        ort=ort.__version__,
        ort_path=os.path.dirname(ort.__file__),
        available=list(ort.get_available_providers()),
    )


def _import_onnxruntime() -> Any:
    ort = importlib.import_module("onnxruntime")  # untyped: Any, as it is used
    ort.set_default_logger_severity(ERROR_LEVEL)
    return ort


def _measure(report: Report, args: argparse.Namespace) -> None:
    import numpy as np

    report.phase("import")
    ort = _import_onnxruntime()
    report.phase("create", ort=ort.__version__, available=list(ort.get_available_providers()))
    provider = _provider(args.provider, _pairs(args.option))
    dims = {name: int(value) for name, value in _pairs(args.dim).items()}
    with _captured_stderr() as log:  # ORT says at INFO which nodes it put on the CPU on purpose
        ort.set_default_logger_severity(INFO_LEVEL)
        try:
            options = _options(ort)
            options.log_severity_level = INFO_LEVEL  # the message is the session logger's
            session = ort.InferenceSession(args.model, options, providers=[provider])
        finally:
            ort.set_default_logger_severity(ERROR_LEVEL)
    preferred = cpu_preferred(log.read())
    report.phase("run", providers=list(session.get_providers()), cpu_preferred=preferred)
    session.run(None, feeds(np, session.get_inputs(), dims))
    report.phase("modules")
    modules = loaded_modules()
    report.phase("placement", modules=modules, cudnn=cudnn_version(modules))
    del session
    report.phase("done", ok=True, placement=_placement(ort, np, args.model, provider, dims))


class _Log:
    def __init__(self) -> None:
        self.text = ""

    def read(self) -> str:
        return self.text


@contextlib.contextmanager
def _captured_stderr() -> Iterator[_Log]:
    """What native code writes to file descriptor 2 meanwhile (ORT's default log sink)."""
    log = _Log()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            log.text = sink.read().decode("utf-8", errors="replace")


def cpu_preferred(log: str) -> list[str]:
    """The nodes ORT placed on the CPU on purpose: shape computations it deems faster there
    than a round trip to the GPU (onnxruntime/core/framework/fallback_cpu_capability.cc logs
    "Force fallback to CPU execution for node: NAME" at INFO). Not a fallback for want of a
    kernel."""
    marker = "Force fallback to CPU execution for node: "
    found = []
    for line in log.splitlines():
        if marker in line:
            found.append(line.split(marker, 1)[1].split(" because ")[0].strip())
    return sorted(set(found))


def _pairs(items: Sequence[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def _provider(name: str, options: dict[str, str]) -> str | tuple[str, dict[str, str]]:
    return (name, options) if options else name


def _options(ort: Any, profile_prefix: str | None = None) -> Any:
    """Session options as an app has them (every graph optimization), quiet."""
    options = ort.SessionOptions()
    options.log_severity_level = ERROR_LEVEL
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def feeds(np: Any, inputs: Sequence[Any], dims: dict[str, int]) -> dict[str, Any]:
    """Seeded random inputs: floats in [0.5, 1.5) (Log, Sqrt, Pow stay finite), ints 0 or 1,
    booleans either. A named dynamic dimension is `dims[name]`, else 1; an unnamed one is 1."""
    rng = np.random.default_rng(0)
    fed: dict[str, Any] = {}
    for arg in inputs:
        shape = [_dim(d, dims) for d in arg.shape]
        kind = NUMPY_TYPES.get(arg.type, "float32")
        if kind == "bool":
            value = rng.random(shape) > 0.5
        elif kind.startswith("float"):
            value = (rng.random(shape) + 0.5).astype(kind)
        else:
            value = rng.integers(0, 2, size=shape).astype(kind)
        fed[arg.name] = np.asarray(value)  # a scalar input (shape []) too: ORT takes arrays
    return fed


def _dim(value: Any, dims: dict[str, int]) -> int:
    if isinstance(value, int):
        return value
    return dims.get(value, 1) if isinstance(value, str) else 1


def _placement(ort: Any, np: Any, model: str, provider: Any, dims: dict[str, int]) -> list[Any]:
    """[node, op, provider] for every node that ran: a second session with profiling, one run
    (ORT names the provider of each kernel in its profile, not in its API)."""
    with tempfile.TemporaryDirectory(prefix="bundle-measure-") as folder:
        options = _options(ort, profile_prefix=os.path.join(folder, "profile"))
        session = ort.InferenceSession(model, options, providers=[provider])
        session.run(None, feeds(np, session.get_inputs(), dims))
        with open(session.end_profiling(), encoding="utf-8") as stream:
            events = json.load(stream)
        del session
    placed: dict[str, list[str]] = {}
    for event in events:
        args, name = event.get("args") or {}, str(event.get("name", ""))
        if event.get("cat") == "Node" and "provider" in args and name.endswith("_kernel_time"):
            node = name.removesuffix("_kernel_time")
            placed[node] = [node, str(args.get("op_name", "")), str(args["provider"])]
    return sorted(placed.values())


def loaded_modules() -> list[str]:
    """Full paths of the shared libraries mapped into this process."""
    return _windows_modules() if sys.platform == "win32" else _linux_modules()


def _linux_modules() -> list[str]:
    """Every mapped file of /proc/self/maps whose name ends in .so or holds .so."""
    found: set[str] = set()
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.rstrip("\n").split(maxsplit=5)
            if len(fields) < 6:
                continue
            path = fields[5].removesuffix(" (deleted)")
            base = os.path.basename(path)
            if base.endswith(".so") or ".so." in base:
                found.add(path)
    return sorted(found)


def _windows_modules() -> list[str]:
    """Every module of this process (K32EnumProcessModulesEx, LIST_MODULES_ALL), full paths."""
    if sys.platform != "win32":  # for mypy: ctypes.WinDLL exists on Windows alone
        return []
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    kernel32.K32EnumProcessModulesEx.argtypes = (
        wintypes.HANDLE, ctypes.POINTER(wintypes.HMODULE), wintypes.DWORD,
        ctypes.POINTER(wintypes.DWORD), wintypes.DWORD,
    )  # fmt: skip
    kernel32.GetModuleFileNameW.argtypes = (wintypes.HMODULE, wintypes.LPWSTR, wintypes.DWORD)
    process, needed, count = kernel32.GetCurrentProcess(), wintypes.DWORD(0), 512
    while True:
        handles = (wintypes.HMODULE * count)()
        size = ctypes.sizeof(handles)
        if not kernel32.K32EnumProcessModulesEx(process, handles, size, ctypes.byref(needed), 3):
            raise ctypes.WinError(ctypes.get_last_error())
        if needed.value <= size:
            break
        count = needed.value // ctypes.sizeof(wintypes.HMODULE) + 64
    used = handles[: needed.value // ctypes.sizeof(wintypes.HMODULE)]
    return sorted(_module_path(kernel32.GetModuleFileNameW, handle) for handle in used)


def _module_path(get_name: Callable[..., int], handle: Any) -> str:
    buffer = ctypes.create_unicode_buffer(32768)  # long paths (\\?\) may exceed MAX_PATH
    length = get_name(handle, buffer, len(buffer))
    return buffer.value[:length]


def cudnn_version(modules: Sequence[str]) -> str | None:
    """cuDNN's version (cudnnGetVersion) when the process loaded cuDNN, else None: 91300 is
    9.13.0 (cuDNN 9: major*10000 + minor*100 + patch; cuDNN 8: major*1000 + minor*100 +
    patch)."""
    path = next((p for p in modules if os.path.basename(p).lower().startswith(CUDNN_NAMES)), None)
    if path is None:
        return None
    library = ctypes.CDLL(path)  # already mapped: the loader hands back the same one
    library.cudnnGetVersion.restype = ctypes.c_size_t
    return version_text(int(library.cudnnGetVersion()))


def version_text(number: int) -> str:
    major_unit = 10000 if number >= 90000 else 1000
    major, rest = divmod(number, major_unit)
    return f"{major}.{rest // 100}.{rest % 100}"


if __name__ == "__main__":
    main()
