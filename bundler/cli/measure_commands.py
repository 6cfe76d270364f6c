"""Talk layer: `bundle measure`, the app's own measurement: its ONNX models run with ONNX Runtime
on this machine, and the app evidence file `bundle build --evidence` prunes from
(docs/measuring.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler.cli import session
from bundler.cli.app import app
from bundler.cli.flags import grouped, option
from bundler.cli.groups import takes
from bundler.errors import ConfigError
from bundler.measure import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from bundler.measure.parent import Measurement, Setup


class ProviderChoice(StrEnum):
    cuda = "cuda"
    cpu = "cpu"


@dataclass(frozen=True)
class ModelRun:
    """How each model runs: on which provider, with which of its options, the dynamic
    dimensions' sizes, the libraries found first and the time each may take."""

    panel: ClassVar[str] = "How each model runs"
    libs: Path | None = grouped("libs", None)
    provider: ProviderChoice = grouped("provider", ProviderChoice.cuda)
    cuda_options: list[str] | None = grouped("cuda-option", None)
    dims: list[str] | None = grouped("dim", None)
    timeout: float = grouped("timeout", DEFAULT_TIMEOUT)

    def setup(self, release: str) -> Setup:
        """The measuring processes' setup for ORT `release`; a contradiction or a missing
        --libs folder is refused here, before any model runs."""
        from bundler.measure.parent import PROVIDERS, Setup

        if self.cuda_options and self.provider is ProviderChoice.cpu:
            raise ConfigError("--cuda-option needs --provider cuda.")
        if self.libs is not None and not self.libs.is_dir():
            message = "no such folder; give the folder holding the libraries."
            raise ConfigError(f"--libs {self.libs}: {message}")
        dims = _pairs(self.dims or [], "--dim")
        return Setup(
            ort=release,
            provider=PROVIDERS[self.provider.value],
            provider_options=_pairs(self.cuda_options or [], "--cuda-option", "KEY=VALUE"),
            dims={name: _size(name, value) for name, value in dims.items()},
            libs=self.libs,
            timeout=self.timeout,
        )


AS_GIVEN = ModelRun()


@app.command()
@takes
def measure(
    ctx: typer.Context,
    models: Annotated[
        list[Path], typer.Argument(metavar="MODEL...", help="The ONNX models the app runs.")
    ],
    out: Annotated[Path, option("out", "evidence")],
    ort: Annotated[str | None, option("ort", "measure")] = None,
    profile: Annotated[str | None, option("profile", "measure")] = None,
    run: ModelRun = AS_GIVEN,
    as_json: Annotated[bool, option("json")] = False,
) -> None:
    """Run each MODEL once with ONNX Runtime on this machine, each in a fresh process, and
    write the app evidence file: which CUDA and cuDNN libraries each model loaded, for
    `bundle build --model M --evidence FILE`. Exit 23 when a model did not run on the provider
    asked (docs/measuring.md)."""
    from bundler.measure.parent import (
        evidence_document,
        evidence_text,
        require_cudnn,
        require_success,
        write_evidence,
    )
    from bundler.measure.parent import measure as run_measure

    release, cudnn = _release(ort, profile)
    setup = run.setup(release)
    measurement = run_measure(models, setup, session.of(ctx).reporter.note)
    if not as_json:
        typer.echo(report(measurement))
    require_success(measurement)
    require_cudnn(measurement, cudnn, profile or "")
    document = evidence_document(measurement)
    write_evidence(document, out)
    typer.echo(evidence_text(document).rstrip("\n") if as_json else f"wrote {out}")


def _release(ort: str | None, profile: str | None) -> tuple[str, str | None]:
    """(ORT release, the profile's cuDNN version or None): from --ort as given, or from the
    profile --profile names, read as `bundle build --profile` reads it; --ort latest: the
    newest release with a shipped GPU profile."""
    from bundler.config.options import Options
    from bundler.config.validate import check
    from bundler.target.profile_names import LATEST
    from bundler.target.profiles import latest_gpu_release

    check(Options(), {"--profile": profile, "--ort": ort})
    if ort:
        return (latest_gpu_release() if ort == LATEST else ort), None
    if not profile:
        raise ConfigError("give the bundle's ORT release with --ort (or its --profile).")
    from bundler.pruning.prune import cudnn_version
    from bundler.target.profiles import load_profile, profile_ort_release

    chosen = load_profile(profile)
    release = profile_ort_release(chosen)
    if release is None:
        raise ConfigError(f"profile {chosen.name} ships no onnxruntime.dll; give --ort.")
    return release, cudnn_version(chosen)


def _pairs(items: list[str], option: str, form: str = "NAME=N") -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not (sep and key):
            raise typer.BadParameter(f"{item!r} is not {form}.", param_hint=option)
        pairs[key] = value
    return pairs


def _size(name: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise typer.BadParameter(
            f"{name}={value}: N must be a whole number > 0.", param_hint="--dim"
        )
    return int(value)


def report(measurement: Measurement) -> str:
    """One line per model: ok or failed, how many nodes ran, the watched DLLs it loaded."""
    lines = []
    for outcome in measurement.outcomes:
        status = "FAILED" if outcome.failure else "ok"
        loaded = ", ".join(outcome.loaded) or "no CUDA or cuDNN library"
        lines.append(f"{outcome.name}: {status}, {outcome.nodes} nodes, loaded {loaded}")
    return "\n".join(lines)
