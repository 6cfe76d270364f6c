"""Measure the configuration matrix (tools/evidence/probe_matrix.py) on the GPU machine: which
libraries ONNX Runtime's CUDA EP maps for every configuration of every op, and which kernels the
release registers.

    python3 -m tools.evidence.gpu_matrix kernels --ort-dir DIR --out kernels.json
    python3 -m tools.evidence.gpu_matrix measure --ort-dir DIR --kernels kernels.json \\
        --jobs 12 --out ort-1.31.1-cuda13-cudnn9.13.matrix.json

`kernels` lists every kernel definition the release registers, per provider (op, domain, version
range, type constraints: onnxruntime's own `get_all_opkernel_def`, which creates each provider
of the build, so it needs the GPU), and every operator schema it knows (ONNX, `com.microsoft`,
...). `measure` builds the matrix for those kernels and runs each model in a fresh process,
`--jobs` at a time, with tools/evidence/gpu_probe.py's child (the same measurement as
`tools.evidence.gpu_probe measure`: /proc/self/maps before the session, after creating it and
after one run, then a profiled session for where each node ran). A configuration with provider
options runs with them (CUDA EP options as `$GPU_PROBE_OPTIONS`). Each result carries its op,
settings, options and source; a model that could not be built is listed under `unbuilt` with the
reason. Standard library, onnx, numpy and onnxruntime only, like the probe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.evidence import gpu_probe, probe_matrix
from tools.evidence.probe_model import Config

MODULE = __spec__.name  # what the `_kernels` child runs


def child_kernels() -> dict[str, Any]:
    """The `_kernels` subcommand: the release's kernel definitions and operator schemas."""
    import onnxruntime
    from onnxruntime.capi import _pybind_state as state

    kernels = [
        {
            "op": k.op_name,
            "domain": k.domain,
            "provider": k.provider,
            "since": k.version_range[0],
            "until": k.version_range[1],
            "types": {name: sorted(types) for name, types in k.type_constraints.items()},
        }
        for k in state.get_all_opkernel_def()
    ]
    schemas = [
        {"op": s.name, "domain": s.domain, "since": s.since_version, "deprecated": s.deprecated}
        for s in state.get_all_operator_schema()
    ]
    kernels.sort(key=lambda k: (k["provider"], k["domain"], k["op"], k["since"]))
    schemas.sort(key=lambda s: (s["domain"], s["op"], s["since"]))
    return {
        "onnxruntime": onnxruntime.__version__,
        "providers": onnxruntime.get_available_providers(),
        "kernels": kernels,
        "schemas": schemas,
    }


def cmd_kernels(args: argparse.Namespace) -> int:
    command = [sys.executable, "-m", MODULE, "_kernels"]
    command += ["--ort-dir", args.ort_dir] if args.ort_dir else []
    import subprocess

    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    data = json.loads(done.stdout)
    data["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data["gpu"] = gpu_probe._gpu()
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    count = {p: sum(k["provider"] == p for k in data["kernels"]) for p in data["providers"]}
    print(f"kernels per provider: {count}; {len(data['schemas'])} schemas", file=sys.stderr)
    return 0


def cuda_kernels(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [k for k in data["kernels"] if k["provider"] == gpu_probe.CUDA]


def cmd_measure(args: argparse.Namespace) -> int:
    kernels = cuda_kernels(json.loads(Path(args.kernels).read_text())) if args.kernels else None
    also = args.also.split(",") if args.also else ()
    configs = probe_matrix.matrix(kernels, also) + base_configs()
    if args.only:
        import re

        configs = [c for c in configs if re.search(args.only, c.name)]
    versions = gpu_probe._spawn(["_versions"], args.timeout)
    versions.pop("_failure", None)
    raw = gpu_probe._header(args, versions)
    raw["probe"] = "tools/evidence/gpu_matrix.py"
    raw["unbuilt"] = []
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-matrix-") as tmp:
        paths = _write_models(configs, Path(tmp), raw["unbuilt"])
        built = [c for c in configs if c.name in paths]
        print(f"{len(built)} models built, {len(raw['unbuilt'])} not", file=sys.stderr)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            jobs = [pool.submit(_measure, c, paths[c.name], args) for c in built]
            for index, job in enumerate(jobs, 1):
                raw["results"].append(job.result())
                if index % 50 == 0 or index == len(jobs):
                    elapsed = time.perf_counter() - begin
                    print(f"[{index}/{len(jobs)}] {elapsed:.0f} s", file=sys.stderr)
    first = next((r for r in raw["results"] if r.get("onnxruntime")), {})
    raw["onnxruntime"] = first.get("onnxruntime")
    raw["onnxruntime_path"] = first.get("onnxruntime_path")
    raw["elapsed_s"] = round(time.perf_counter() - begin, 1)
    Path(args.out).write_text(json.dumps(raw, indent=1) + "\n", encoding="utf-8")
    failed = [r["model"] for r in raw["results"] if not r["ok"]]
    print(f"{len(raw['results']) - len(failed)}/{len(raw['results'])} ok", file=sys.stderr)
    return 0


def base_configs() -> list[Config]:
    """The probe's 78 one-op models (tools/evidence/gpu_probe.py), float32, as configurations."""
    built: dict[str, Any] = {}
    for builder in gpu_probe.BUILDERS:
        built |= builder()
    return [
        Config(op, {"type": "float", "model": "base"}, lambda m=model: m)
        for op, model in sorted(built.items())
    ]


def _write_models(
    configs: list[Config], folder: Path, unbuilt: list[dict[str, str]]
) -> dict[str, Path]:
    import onnx

    paths = {}
    for config in configs:
        try:
            model = config.build()
        except Exception as exc:
            unbuilt.append({"model": config.name, "op": config.op, "error": _why(exc)})
            continue
        path = folder / f"{config.name}.onnx"
        onnx.save(model, path)
        paths[config.name] = path
    return paths


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _measure(config: Config, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if config.options:
        env[gpu_probe.OPTIONS_ENV] = json.dumps(config.options)
    record = gpu_probe.measure_one(path, config.name, args, env)
    record |= {"op": config.op, "settings": config.settings, "options": config.options}
    record["source"] = config.source
    return record


def parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    top = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description=__doc__, formatter_class=raw
    )
    sub = top.add_subparsers(dest="command", required=True)
    kernels = sub.add_parser("kernels", help="list the release's kernels and schemas")
    kernels.add_argument("--ort-dir", metavar="DIR")
    kernels.add_argument("--out", required=True, metavar="FILE")
    measure = sub.add_parser("measure", help="measure the configuration matrix")
    measure.add_argument("--ort-dir", metavar="DIR")
    measure.add_argument("--kernels", metavar="FILE", help="the output of `kernels`")
    measure.add_argument("--jobs", type=int, default=8, metavar="N")
    measure.add_argument("--also", metavar="OP,...", help="ops to measure too (real models')")
    measure.add_argument("--only", metavar="REGEX", help="only configurations matching REGEX")
    measure.add_argument("--provider", default=gpu_probe.CUDA)
    measure.add_argument("--timeout", type=float, default=gpu_probe.CHILD_TIMEOUT_S)
    measure.add_argument("--no-placement", dest="placement", action="store_false")
    measure.add_argument("--out", required=True, metavar="FILE")
    hidden = sub.add_parser("_kernels")
    hidden.add_argument("--ort-dir")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "_kernels":
        if args.ort_dir:
            sys.path.insert(0, os.path.abspath(args.ort_dir))
        print(json.dumps(child_kernels()))
        return 0
    args.optimization = "disable"
    commands = {"kernels": cmd_kernels, "measure": cmd_measure}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
