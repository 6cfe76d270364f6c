"""Turn the raw output of the load probe into the evidence table bundle reads
(manifests/evidence/ort-<release>-cuda<major>.toml, beside the raw JSON it came from).

    python3 -m tools.evidence.evidence_table RAW --kernels KERNELS --cuda 13 [--out TABLE]

RAW is `tools.evidence.gpu_matrix measure`'s output (every op in a matrix of configurations)
or, for a release measured before the matrix existed, `tools.evidence.gpu_probe measure`'s (one
model per op). KERNELS is `tools.evidence.gpu_matrix kernels`'s list of the release's kernels
and schemas.

- A measured row is the union, over the op's configurations that ran with the CUDA EP's default
  options, of the libraries the process mapped beyond what `import onnxruntime` had mapped, by
  their Windows DLL names (libcudnn_ops.so.9 is cudnn_ops64_9.dll). It records how many
  configurations it covers and whether they loaded different libraries (`config_dependent`).
  A configuration that failed counts for nothing; an op all of whose configurations failed has
  no row, so bundle prunes nothing for a model using it.
- Derived rows say so in `basis`: an op of the ONNX or com.microsoft domain that has no CUDA
  kernel in the release and is not an ONNX function runs on the CPU EP and loads nothing
  (`cpu-only`); `Constant` becomes an initializer when ORT loads the graph (`folded`). An ONNX
  function without a CUDA kernel runs as its body (ORT inlines it): it gets no derived row
  unless it was measured.
- Configurations run with other provider options are compared with the defaults, and the ops
  whose loads they change are listed in the table's comments: the table is for the defaults.
Standard library and bundle's own name mapping (bundler.measure.names).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bundler.measure.names import windows_name

APP_MODELS = ("transformer", "conv")  # the old probe's app-like models: proofs, not op rows
CUDA = "CUDAExecutionProvider"
DOMAINS = ("", "com.microsoft")
FOLDED = {"Constant": "ORT turns Constant nodes into initializers when it loads the graph"}


def cudnn_text(version: Any) -> str:
    """9.13.0 for cudnnGetVersion()'s 91300 (major * 10000 + minor * 100 + patch)."""
    if not isinstance(version, int):
        return str(version)
    return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"


def loads(result: dict[str, Any]) -> list[str]:
    """The Windows names of what the result's process mapped beyond `before`."""
    before = set(result.get("before") or ())
    mapped = [path for path in result.get("all") or () if path not in before]
    return sorted({name for path in mapped if (name := windows_name(path))})


def op_of(result: dict[str, Any]) -> str:
    return str(result.get("op") or result["model"])


def op_key(domain: str, op: str) -> str:
    return op if domain in ("", "ai.onnx") else f"{domain}:{op}"


def measured_rows(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """op -> {loads, configurations, config_dependent, model, failed} over default options."""
    rows: dict[str, dict[str, Any]] = {}
    for result in results:
        if result.get("options") or result["model"] in APP_MODELS:
            continue
        row = rows.setdefault(op_of(result), {"sets": [], "failed": 0, "models": [], "cpu": []})
        if result["ok"]:
            kind = str((result.get("settings") or {}).get("type", "float"))
            row.setdefault("types", {}).setdefault(kind, set()).update(loads(result))
            row["sets"].append(frozenset(loads(result)))
            row["models"].append(result["model"])
            row["cpu"].append(result.get("op_on_provider") is False)
        else:
            row["failed"] += 1
    return {op: _row(row) for op, row in rows.items() if row["sets"]}


def _row(row: dict[str, Any]) -> dict[str, Any]:
    sets = row["sets"]
    union = sorted(frozenset().union(*sets))
    model = row["models"][0] if len(sets) == 1 else f"{len(sets)} configurations"
    return {
        "loads": union,
        "configurations": len(sets),
        "config_dependent": len(set(sets)) > 1,
        "model": model,
        "failed": row["failed"],
        "cpu_only": all(row["cpu"]) and bool(row["cpu"]),
        "by_type": {kind: sorted(found) for kind, found in sorted(row.get("types", {}).items())},
    }


def option_effects(results: list[dict[str, Any]]) -> list[str]:
    """One comment line per (options, op): what its configurations loaded with those options
    beyond, or short of, the same configurations with the defaults."""
    default = {
        (op_of(r), json.dumps(r.get("settings"), sort_keys=True)): set(loads(r))
        for r in results
        if not r.get("options") and r["ok"]
    }
    more: dict[tuple[str, str], set[str]] = {}
    less: dict[tuple[str, str], set[str]] = {}
    for result in results:
        key = (op_of(result), json.dumps(result.get("settings"), sort_keys=True))
        if not result.get("options") or not result["ok"] or key not in default:
            continue
        options = ", ".join(f"{k}={v}" for k, v in sorted(result["options"].items()))
        now = set(loads(result))
        more.setdefault((options, key[0]), set()).update(now - default[key])
        less.setdefault((options, key[0]), set()).update(default[key] - now)
    lines = []
    for options, op in sorted(more):
        added, dropped = sorted(more[options, op]), sorted(less[options, op])
        if added or dropped:
            lines.append(
                f"#   {options}: {op} loads {added or 'nothing'} more, {dropped or 'nothing'} less"
            )
    return lines


def cuda_ops(kernels: dict[str, Any]) -> set[str]:
    return {op_key(k["domain"], k["op"]) for k in kernels["kernels"] if k["provider"] == CUDA}


def documented(kernels: dict[str, Any]) -> dict[str, Any]:
    """`kernels` with `documented`, the op keys its source lists for any provider, where the
    list was read from ORT's documentation (tools/evidence/kernels_source.py: `documented_ops`)."""
    if "documented_ops" in kernels:
        found = {
            op_key(domain, op) for domain, ops in kernels["documented_ops"].items() for op in ops
        }
        kernels = {**kernels, "documented": found | cuda_ops(kernels)}
    return kernels


def derived_rows(kernels: dict[str, Any], measured: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Rows for ops the measurement did not run: folded, or no CUDA kernel and no function."""
    with_cuda, done = cuda_ops(kernels), set(measured)
    rows: dict[str, dict[str, Any]] = {}
    for op, note in FOLDED.items():
        rows[op] = {"basis": "folded", "note": note}
    for schema in kernels["schemas"]:
        key = op_key(schema["domain"], schema["op"])
        if schema["domain"] not in DOMAINS or key in with_cuda or key in done or key in rows:
            continue
        if schema["domain"] == "" and _is_function(schema["op"]):
            continue
        if "documented" in kernels and key not in kernels["documented"]:
            continue  # newer than the documentation the list comes from: unknown (unmeasured)
        note = f"no CUDA kernel in ONNX Runtime {kernels['onnxruntime']}: runs on the CPU EP"
        source = kernels.get("kernels_from")
        if source:  # a list read from ORT's documentation, not from the release itself
            note = (
                f"no CUDA kernel in ORT's {source['path']} at {source['commit'][:12]}: "
                "runs on the CPU EP"
            )
        rows[key] = {"basis": "cpu-only", "note": note}
    return rows


def folded_rows(measured: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    done = set(measured)
    for op, note in FOLDED.items():
        if op not in done:
            yield op, {"basis": "folded", "note": note}


def _is_function(op: str) -> bool:
    """Whether some version of the ONNX op is a function (ORT inlines it where no EP has a
    kernel, and its body's ops may run on the GPU)."""
    from onnx import defs

    for version in range(1, defs.onnx_opset_version() + 1):
        try:
            schema = defs.get_schema(op, version)
        except Exception:  # no schema of that version (or none at all)
            continue
        if schema.has_function or schema.has_context_dependent_function:
            return True
    return False


def table(raw: dict[str, Any], kernels: dict[str, Any] | None, raw_name: str, cuda: str) -> str:
    results = raw["results"]
    rows = measured_rows(results)
    every = set.intersection(*(set(r["loads"]) for r in rows.values())) if rows else set()
    derived = derived_rows(kernels, rows) if kernels else dict(folded_rows(rows))
    matrix = any("op" in r for r in results)
    lines = _header(raw, kernels, raw_name, cuda, rows, every, matrix)
    for op in sorted(rows):
        row = rows[op]
        own = [name for name in row["loads"] if name not in every]  # every session's: above
        lines += ["", "[[ops]]", f"op = {json.dumps(op)}", f"loads = {json.dumps(own)}"]
        lines += [f"model = {json.dumps(row['model'])}"]
        lines += [f"configurations = {row['configurations']}"]
        by_type = {k: [n for n in v if n not in every] for k, v in row["by_type"].items()}
        if len({json.dumps(v) for v in by_type.values()}) > 1:  # the types load differently
            shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in by_type.items())
            lines.append(f"by_type = {{ {shown} }}")
        if row["config_dependent"]:
            lines.append("config_dependent = true")
        notes = []
        if row.get("cpu_only"):
            notes.append("its node ran on the CPU EP in every configuration (no CUDA kernel)")
        if row["failed"]:
            notes.append(f"{row['failed']} configuration(s) failed and count for nothing")
        if notes:
            lines.append(f"note = {json.dumps('; '.join(notes))}")
    for op in sorted(derived):
        row = derived[op]
        lines += ["", "[[ops]]", f"op = {json.dumps(op)}", "loads = []", "configurations = 0"]
        lines += [f'basis = "{row["basis"]}"', f"note = {json.dumps(row['note'])}"]
    if kernels:
        for op, reason in sorted(unmeasured(raw, kernels, set(rows) | set(derived)).items()):
            lines += ["", "[[unmeasured]]", f"op = {json.dumps(op)}"]
            lines += [f"reason = {json.dumps(reason)}"]
    return "\n".join(lines) + "\n"


def wanted_ops(kernels: dict[str, Any]) -> set[str]:
    """The ops a table owes a row or a reason: every op of the installed onnx package's schema
    set, every ONNX and com.microsoft op with a CUDA kernel in the release, and, where the
    kernel list comes from ORT's documentation, every ONNX and com.microsoft op of the release
    that documentation does not know (it may have a CUDA kernel)."""
    from onnx import defs

    onnx_ops = {s.name for s in defs.get_all_schemas_with_history() if s.domain in DOMAINS}
    ours = {op for op in cuda_ops(kernels) if ":" not in op or op.startswith("com.microsoft:")}
    unknown = set()
    if "documented" in kernels:  # ops of the release the documentation does not know
        release = {
            op_key(s["domain"], s["op"]) for s in kernels["schemas"] if s["domain"] in DOMAINS
        }
        unknown = release - kernels["documented"]
    return onnx_ops | ours | unknown


# the folder before a model file's name in an error: the probe's temporary folder on the GPU
# machine, which means nothing anywhere else
MODEL_FOLDER = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s/\\]+)+[/\\](?=[^\s/\\]+\.onnx\b)")


def model_names_only(error: object) -> str:
    """`error` with each model file's folder left out (Load model from X.onnx failed)."""
    return MODEL_FOLDER.sub("", str(error))


def unmeasured(raw: dict[str, Any], kernels: dict[str, Any], done: set[str]) -> dict[str, str]:
    """op -> why it has no row: the first error of its configurations (a model onnx or the
    probe could not build, or one ORT refused), else that no probe model exists for it."""
    known = {op_key(s["domain"], s["op"]) for s in kernels["schemas"]}
    errors: dict[str, str] = {}
    for item in [*raw.get("unbuilt", ()), *(r for r in raw["results"] if not r["ok"])]:
        errors.setdefault(op_of(item), f"{item['model']}: {model_names_only(item.get('error'))}")
    reasons = {}
    release = kernels["onnxruntime"]
    for op in sorted(wanted_ops(kernels) - done):
        if op in errors:
            reasons[op] = f"every configuration failed; the first: {errors[op]}"[:400]
        elif op not in known:
            reasons[op] = f"ONNX Runtime {release} has no schema for it (a newer ONNX op)"
        elif "documented" in kernels and op not in kernels["documented"]:
            source = kernels["kernels_from"]
            reasons[op] = (
                f"ONNX Runtime {release} knows it, ORT's {source['path']} at "
                f"{source['commit'][:12]} lists no kernel of it: whether the release has a CUDA "
                "kernel is not known, and it was not measured"
            )
        else:
            reasons[op] = (
                "no probe model builds it "
                "(tools/evidence/probe_matrix.py, tools/evidence/probe_ops.py)"
            )
    return reasons


def _header(
    raw: dict[str, Any],
    kernels: dict[str, Any] | None,
    raw_name: str,
    cuda: str,
    rows: dict[str, Any],
    every: set[str],
    matrix: bool,
) -> list[str]:
    gpu = (raw.get("gpu") or "unknown GPU").strip()
    probe = (
        "tools/evidence/gpu_matrix.py (the configuration matrix)"
        if matrix
        else (
            "tools/evidence/gpu_probe.py (one model per op, before the matrix existed: each row "
            "is ONE configuration, and the matrix's rows are unmeasured, so nothing is pruned "
            "for them)"
        )
    )
    defaults = sum(1 for r in raw["results"] if not r.get("options"))
    lines = [
        "# Which run-time-loaded libraries ONNX Runtime's CUDA EP loads, per op: the union over",
        "# the op's configurations, each a tiny model run once in a fresh process, by Windows DLL",
        f"# names. Written by tools/evidence/evidence_table.py from {raw_name} (beside this file).",
        *(f"# Measured later, beside this file: {name}." for name in raw.get("more", ())),
        "# An op without a row makes bundle prune nothing; `basis` says how a row was made;",
        "# [[unmeasured]] says why an op of the release has none.",
        f"# Measured with {probe}.",
        "# Measured with the CUDA EP's default options. Other options measured, where they change",
        "# what an op loads:",
        *(option_effects(raw["results"]) or ["#   (none changed anything)"]),
        "schema_version = 1",
        f'ort = "{raw["onnxruntime"]}"',
        f'cuda = "{cuda}"',
        f'cudnn = "{cudnn_text(raw.get("cudnn_version"))}"',
        'platform = "linux-x86_64"  # the Windows DLL names are those of the same libraries',
        f"gpu = {json.dumps(gpu)}",
        f'measured = "{raw["started"][:10]}"',
        f'raw = "{raw_name}"',
        f"probe = {json.dumps(probe.split(' ')[0])}",
        f"configurations = {defaults}",
        "provider_options = {}",
        f"every_session = {json.dumps(sorted(every))}",
    ]
    if kernels:
        lines += [f"kernels = {json.dumps(kernels.get('file', 'kernels.json'))}"]
    return lines


def read_text(path: Path) -> str:
    """A raw file, xz-compressed (`.xz`: the matrix's raw output is large) or not."""
    if path.suffix == ".xz":
        import lzma

        return lzma.decompress(path.read_bytes()).decode("utf-8")
    return path.read_text(encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="the probe's raw JSON (in manifests/evidence/)")
    parser.add_argument("--more", type=Path, nargs="*", default=[], help="more raw files")
    parser.add_argument("--kernels", type=Path, help="tools.evidence.gpu_matrix kernels' output")
    parser.add_argument("--cuda", required=True, help="the CUDA major of the ORT build, e.g. 13")
    parser.add_argument("--out", type=Path, help="the table (default: beside RAW)")
    args = parser.parse_args()
    raw = json.loads(read_text(args.raw))
    for more in args.more:  # later measurements of some configurations: theirs replace
        later = json.loads(read_text(more))
        extra = later["results"]
        again = {result["model"] for result in extra}
        raw.setdefault("more", []).append(more.name)
        raw["results"] = [r for r in raw["results"] if r["model"] not in again] + extra
        tried = {op_of(item) for item in [*extra, *later.get("unbuilt", ())]}
        kept = [item for item in raw.get("unbuilt", ()) if op_of(item) not in tried]
        raw["unbuilt"] = kept + later.get("unbuilt", [])
    kernels = documented(json.loads(read_text(args.kernels))) if args.kernels else None
    if kernels is not None:
        kernels["file"] = args.kernels.name
    target = args.out or args.raw.with_name(
        re.sub(r"\.(raw|matrix)\.json(\.xz)?$", ".toml", args.raw.name)
    )
    target.write_text(table(raw, kernels, args.raw.name, args.cuda), encoding="utf-8", newline="\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
