"""Talk layer: `bundle measure`, the app's own measurement: its ONNX models run with ONNX Runtime
on this machine, and the app evidence file `bundle build --evidence` prunes from
(docs/measuring.md)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Module level: only what the option defaults need. Every command imports its modules itself,
# so starting the CLI costs what the command uses (benchmarks/, P3).
from bundler.cli.app import JsonOption, app
from bundler.errors import ConfigError
from bundler.measure import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from bundler.measure.parent import Measurement, Setup


class ProviderChoice(StrEnum):
    cuda = "cuda"
    cpu = "cpu"


@app.command()
def measure(
    models: Annotated[
        list[Path], typer.Argument(metavar="MODEL...", help="The ONNX models the app runs.")
    ],
    out: Annotated[Path, typer.Option("--out", help="The app evidence file to write (JSON).")],
    ort: Annotated[
        str | None,
        typer.Option("--ort", help="The ORT release the bundle ships, e.g. 1.31.1."),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            "-p",
            help="Instead of --ort: the bundle's profile (its ORT release; its cuDNN version "
            "is checked against the one the models load).",
        ),
    ] = None,
    libs: Annotated[
        Path | None,
        typer.Option(
            "--libs",
            help="The folder holding the profile's CUDA and cuDNN libraries, searched first "
            "(Windows: the built bundle folder; Linux: a folder of libcudnn*.so.9, "
            "libcudart.so.13, ...).",
        ),
    ] = None,
    provider: Annotated[
        ProviderChoice,
        typer.Option("--provider", help="The execution provider to measure on."),
    ] = ProviderChoice.cuda,
    cuda_options: Annotated[
        list[str] | None,
        typer.Option(
            "--cuda-option",
            metavar="KEY=VALUE",
            help="A CUDA provider option, as the app sets it (repeatable), e.g. device_id=0.",
        ),
    ] = None,
    dims: Annotated[
        list[str] | None,
        typer.Option(
            "--dim",
            metavar="NAME=N",
            help="The size of a named dynamic dimension (repeatable; default 1).",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds each model may take.", min=1)
    ] = DEFAULT_TIMEOUT,
    as_json: JsonOption = False,
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
    setup = _setup(release, provider, cuda_options or [], dims or [], libs, timeout)
    measurement = run_measure(models, setup, lambda line: typer.echo(line, err=True))
    if not as_json:
        typer.echo(report(measurement))
    require_success(measurement)
    require_cudnn(measurement, cudnn, profile or "")
    document = evidence_document(measurement)
    write_evidence(document, out)
    typer.echo(evidence_text(document).rstrip("\n") if as_json else f"wrote {out}")


def _setup(
    release: str,
    provider: ProviderChoice,
    cuda_options: list[str],
    dims: list[str],
    libs: Path | None,
    timeout: float,
) -> Setup:
    from bundler.measure.parent import PROVIDERS, Setup

    if cuda_options and provider is ProviderChoice.cpu:
        raise ConfigError("--cuda-option needs --provider cuda.")
    if libs is not None and not libs.is_dir():
        raise ConfigError(f"--libs {libs}: no such folder; give the folder holding the libraries.")
    return Setup(
        ort=release,
        provider=PROVIDERS[provider.value],
        provider_options=_pairs(cuda_options, "--cuda-option", "KEY=VALUE"),
        dims={name: _size(name, value) for name, value in _pairs(dims, "--dim").items()},
        libs=libs,
        timeout=timeout,
    )


def _release(ort: str | None, profile: str | None) -> tuple[str, str | None]:
    """(ORT release, the profile's cuDNN version or None): from --ort as given, or from the
    profile --profile names, read as `bundle build --profile` reads it; --ort latest: the
    newest release with a shipped GPU profile."""
    from bundler.options import Options
    from bundler.profile_names import LATEST
    from bundler.profiles import latest_gpu_release
    from bundler.validate import check

    check(Options(), {"--profile": profile, "--ort": ort})
    if ort:
        return (latest_gpu_release() if ort == LATEST else ort), None
    if not profile:
        raise ConfigError("give the bundle's ORT release with --ort (or its --profile).")
    from bundler.profiles import load_profile
    from bundler.prune import cudnn_version
    from bundler.ship.doctor import ort_version

    chosen = load_profile(profile)
    release = ort_version(chosen)
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
