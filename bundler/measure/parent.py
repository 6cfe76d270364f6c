"""Act layer: `bundle measure`'s parent: each model in a fresh child process (child.py), the
facts judged, and the app evidence file written (bundler.pruning.app_evidence reads it).

Order: read every model (bundler.pruning.onnx_models: a missing or broken file stops before
anything runs),
ask a child which onnxruntime it imports (another release than asked, or none: ConfigError),
then one child per model, `timeout` seconds each. A model fails when its session came up on
another provider than asked, when a node ran on another provider (ORT's Memcpy nodes aside),
or when its child raised, died or timed out: then no file is written (MeasurementError). The
file is written whole or not at all (a temporary file beside it, then a rename).

The child's search path: `libs` first. Linux: LD_LIBRARY_PATH in the child's environment (the
loader reads it once, at start, so it cannot be set from inside); Windows: first on PATH, and
os.add_dll_directory in the child.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundler import __version__
from bundler.config import environment
from bundler.disk.files import remove, replace
from bundler.errors import ConfigError, MeasurementError, OutputError
from bundler.measure import DEFAULT_TIMEOUT
from bundler.measure.names import windows_name
from bundler.pruning.app_evidence import SCHEMA_VERSION
from bundler.pruning.onnx_models import ModelOps, read_model_ops
from bundler.reporter import Note

CHILD = Path(__file__).with_name("child.py")
PROVIDERS = {"cuda": "CUDAExecutionProvider", "cpu": "CPUExecutionProvider"}
PACKAGES = {"CUDAExecutionProvider": "onnxruntime-gpu", "CPUExecutionProvider": "onnxruntime"}
ABOUT_TIMEOUT = 60.0  # seconds for the import check, whatever the models may take
_STDERR_LINES = 3  # of a failed child's stderr, in the message


@dataclass(frozen=True)
class Setup:
    """What to measure with: the ORT release the child must import, the provider (its ORT
    name) and options, the values of named dynamic dimensions, the folder searched first."""

    ort: str
    provider: str = PROVIDERS["cuda"]
    provider_options: dict[str, str] = field(default_factory=dict)
    dims: dict[str, int] = field(default_factory=dict)
    libs: Path | None = None
    timeout: float = DEFAULT_TIMEOUT

    @property
    def install(self) -> str:
        return f"pip install {PACKAGES.get(self.provider, 'onnxruntime-gpu')}=={self.ort}"


@dataclass(frozen=True)
class Outcome:
    """One model's measurement: what its process loaded and where its nodes ran, or why it
    failed."""

    model: ModelOps
    failure: str | None
    modules: tuple[str, ...] = ()
    nodes: int = 0
    providers: tuple[str, ...] = ()
    cudnn: str | None = None
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.model.path.name

    @property
    def loaded(self) -> tuple[str, ...]:
        """The Windows DLL names of the CUDA and cuDNN libraries it loaded."""
        return tuple(sorted({name for path in self.modules if (name := windows_name(path))}))


@dataclass(frozen=True)
class Measurement:
    setup: Setup
    outcomes: tuple[Outcome, ...]
    measured: str  # UTC, ISO 8601
    platform: str
    gpu: str | None

    @property
    def failures(self) -> tuple[Outcome, ...]:
        return tuple(outcome for outcome in self.outcomes if outcome.failure)

    @property
    def cudnn(self) -> str | None:
        return next((outcome.cudnn for outcome in self.outcomes if outcome.cudnn), None)


def measure(paths: Sequence[Path], setup: Setup, note: Note) -> Measurement:
    """Every model of `paths` in its own child (see the module docstring)."""
    models = [read_model_ops(path) for path in paths]
    _require_distinct_names(models)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with tempfile.TemporaryDirectory(
        prefix="bundle-measure-", ignore_cleanup_errors=True
    ) as scratch:
        check_onnxruntime(setup, Path(scratch))
        outcomes = []
        for index, model in enumerate(models, 1):
            outcome = measure_model(model, setup, Path(scratch) / f"{index}.json")
            note(_progress(index, len(models), outcome))
            outcomes.append(outcome)
    return Measurement(setup, tuple(outcomes), started, machine(), gpu_name())


def _require_distinct_names(models: Sequence[ModelOps]) -> None:
    """The file names models by file name (as a build matches them), folded as Windows does."""
    seen: dict[str, Path] = {}
    for model in models:
        other = seen.setdefault(model.path.name.lower(), model.path)
        if other != model.path:
            raise ConfigError(
                f"{other} and {model.path} have one file name, and the evidence file names "
                "models by file name (as a build matches them); rename one of them."
            )


def require_success(measurement: Measurement) -> None:
    """MeasurementError naming every model that failed and why, in one line."""
    failed = measurement.failures
    if failed:
        reasons = "; ".join(f"{outcome.name}: {outcome.failure}" for outcome in failed)
        raise MeasurementError(
            f"{len(failed)} of {len(measurement.outcomes)} models did not run as asked on "
            f"{measurement.setup.provider} ({reasons}); nothing was written."
        )


def require_cudnn(measurement: Measurement, expected: str | None, profile: str) -> None:
    """ConfigError when the models loaded another cuDNN major.minor than `profile` ships
    (`expected`): the libraries found were not the profile's, so the file would be refused."""
    found = measurement.cudnn
    if expected is None or measurement.setup.provider != PROVIDERS["cuda"]:
        return
    if found is None or found.split(".")[:2] != expected.split(".")[:2]:
        seen = f"cuDNN {found}" if found else "no cuDNN"
        raise ConfigError(
            f"the models loaded {seen}, profile {profile} ships cuDNN {expected}; give --libs "
            "the folder holding the profile's CUDA and cuDNN libraries."
        )


def check_onnxruntime(setup: Setup, scratch: Path) -> None:
    """ConfigError when the child's python cannot import onnxruntime, or imports another
    release than `setup.ort`."""
    about = max(setup.timeout, ABOUT_TIMEOUT)
    facts, stderr, timed_out = _run_child(["--about"], setup, scratch / "about.json", about)
    if facts.get("phase") != "done":
        died = f"timed out after {about:g} s" if timed_out else "the child process died"
        why = facts.get("error") or _tail(stderr) or died
        raise ConfigError(f"{sys.executable} cannot import onnxruntime ({why}); {setup.install}.")
    if facts.get("ort") != setup.ort:
        raise ConfigError(
            f"onnxruntime {facts.get('ort')} is installed ({facts.get('ort_path')}), the "
            f"measurement is for ORT {setup.ort}; {setup.install}."
        )


def measure_model(model: ModelOps, setup: Setup, result: Path) -> Outcome:
    """One model in a fresh child; a failure is an Outcome with the reason."""
    args = [str(model.path), "--provider", setup.provider]
    args += [f"--option={key}={value}" for key, value in setup.provider_options.items()]
    args += [f"--dim={name}={value}" for name, value in setup.dims.items()]
    start = time.perf_counter()
    facts, stderr, timed_out = _run_child(args, setup, result)
    seconds = time.perf_counter() - start
    placement = [tuple(item) for item in facts.get("placement", [])]
    failure = _failure(facts, stderr, timed_out, setup, placement)
    failure = " ".join(failure.split()) if failure else None  # one line, whatever ORT said
    return Outcome(
        model=model,
        failure=failure,
        modules=tuple(facts.get("modules", ())),
        nodes=len([node for node in placement if not _copy(node)]),
        providers=tuple(sorted({node[2] for node in placement if not _copy(node)})),
        cudnn=facts.get("cudnn"),
        seconds=seconds,
    )


def _run_child(
    args: list[str], setup: Setup, result: Path, timeout: float | None = None
) -> tuple[dict[str, Any], str, bool]:
    """The child's facts (whatever it wrote last), its stderr, and whether it timed out
    (after `timeout` seconds, else the setup's)."""
    command = [sys.executable, "-P", str(CHILD), *args, "--result", str(result)]
    command += ["--libs", str(setup.libs.absolute())] if setup.libs else []
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout or setup.timeout,
            env=child_environment(setup.libs),
        )
        stderr, timed_out = proc.stderr, False
    except subprocess.TimeoutExpired as exc:
        stderr, timed_out = _text(exc.stderr), True
    return _facts(result), stderr, timed_out


def child_environment(libs: Path | None) -> dict[str, str]:
    """This process's environment with `libs` first on the loader's search path."""
    env = environment.child_environment()
    if libs is None:
        return env
    key = "PATH" if sys.platform == "win32" else "LD_LIBRARY_PATH"
    first = str(libs.absolute())  # the loaders want it whole (os.add_dll_directory too)
    env[key] = os.pathsep.join(part for part in (first, env.get(key, "")) if part)
    return env


def _facts(result: Path) -> dict[str, Any]:
    try:
        facts = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return facts if isinstance(facts, dict) else {}


def _failure(
    facts: dict[str, Any],
    stderr: str,
    timed_out: bool,
    setup: Setup,
    placement: list[tuple[str, ...]],
) -> str | None:
    """Why the measurement is no evidence, or None."""
    phase = facts.get("phase", "start")
    if timed_out:
        return _with_stderr(f"timed out after {setup.timeout:g} s in phase {phase}", stderr)
    if phase != "done":
        why = facts.get("error") or "the child process died"
        return _with_stderr(f"{why} (phase {phase})", stderr)
    ran_on = facts.get("providers") or ["no provider"]
    if ran_on[0] != setup.provider:
        return _fell_back(ran_on[0], facts.get("available", []), setup, stderr)
    on_purpose = set(facts.get("cpu_preferred") or ())  # ORT's shape computations on the CPU
    elsewhere = [
        node
        for node in placement
        if node[2] != setup.provider and not _copy(node) and node[0] not in on_purpose
    ]
    if elsewhere:
        shown = ", ".join(f"{node} ({op}) on {provider}" for node, op, provider in elsewhere[:5])
        return f"{len(elsewhere)} nodes ran on another provider: {shown}"
    return None


def _fell_back(ran_on: str, available: list[str], setup: Setup, stderr: str) -> str:
    said = f"the session fell back to {ran_on}"
    if setup.provider not in available:
        offered = ", ".join(available) or "none"
        return f"{said}: this onnxruntime offers {offered}, not {setup.provider}; {setup.install}"
    where = f"in {setup.libs}" if setup.libs else "with --libs"
    return _with_stderr(
        f"{said}: {setup.provider} did not load; give its CUDA and cuDNN libraries {where}",
        stderr,
    )


def _copy(node: tuple[str, ...]) -> bool:
    """ORT's copies between devices (MemcpyFromHost, MemcpyToHost) run where they must."""
    return node[1].startswith("Memcpy")


def _with_stderr(reason: str, stderr: str) -> str:
    tail = _tail(stderr)
    return f"{reason}; stderr: {tail}" if tail else reason


def _tail(stderr: str) -> str:
    return " | ".join(line.strip() for line in stderr.strip().splitlines()[-_STDERR_LINES:])


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data or ""


def _progress(index: int, total: int, outcome: Outcome) -> str:
    status = f"FAILED: {outcome.failure}" if outcome.failure else f"ok, {outcome.nodes} nodes"
    return f"[{index}/{total}] {outcome.name}: {status} ({outcome.seconds:.1f} s)"


def machine() -> str:
    """linux-x86_64, windows-amd64, ..."""
    return f"{platform.system().lower()}-{platform.machine().lower()}"


def gpu_name() -> str | None:
    """The GPUs' names and driver versions as nvidia-smi says them, or None without one."""
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        proc = subprocess.run(query, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    return "; ".join(lines) if proc.returncode == 0 and lines else None


def evidence_document(measurement: Measurement) -> dict[str, Any]:
    """The app evidence file's content (bundler.pruning.app_evidence describes it)."""
    setup = measurement.setup
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": f"bundle measure {__version__}",
        "measured": measurement.measured,
        "platform": measurement.platform,
        "gpu": measurement.gpu,
        "ort": setup.ort,
        "cudnn": measurement.cudnn,
        "provider": setup.provider,
        "provider_options": dict(setup.provider_options),
        "dims": dict(setup.dims),
        "models": [_model_entry(outcome) for outcome in measurement.outcomes],
    }


def _model_entry(outcome: Outcome) -> dict[str, Any]:
    return {
        "name": outcome.name,
        "sha256": outcome.model.sha256,
        "loaded": list(outcome.loaded),
        "modules": list(outcome.modules),
        "nodes": outcome.nodes,
        "providers": list(outcome.providers),
    }


def evidence_text(document: dict[str, Any]) -> str:
    """JSON, sorted keys, LF line ends, one trailing newline."""
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_evidence(document: dict[str, Any], out: Path) -> None:
    """Write the file whole or not at all: a temporary file in `out`'s folder, then renamed
    over `out`; the temporary file is gone either way. OutputError when it cannot be written."""
    data = evidence_text(document).encode("utf-8")
    temporary: Path | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "wb", dir=out.parent, prefix=f".{out.name}.", suffix=".part", delete=False
        ) as stream:
            temporary = Path(stream.name)
            stream.write(data)
        replace(temporary, out)
    except OSError as exc:
        raise OutputError(f"{out}: cannot be written ({exc}); choose another --out.") from exc
    finally:
        if temporary is not None:
            remove(temporary)  # renamed already, unless something failed
