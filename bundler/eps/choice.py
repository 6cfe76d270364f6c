"""Decide layer: which execution-provider packs a build ships (`bundle build --ep NAME`, or
bundle.toml's `[build] eps`), checked before any work: every name a shipped pack (exit 14, with
the closest name), the profile's ORT release at or above each pack's minimum (exit 25: ORT
would refuse to register the pack on the target), the pair not recorded as refused or crashed by
the pack x core proof (manifests/ep-matrix.toml, exit 25 with the recorded reason), and the
profile's machine the pack's (exit 5).
A refusal names where the pack was asked for: its flag or bundle.toml's key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bundler.config.options import CONFIG, Options
from bundler.errors import ConfigError, EpOrtTooOldError, EpPairFailedError, MachineMismatchError

if TYPE_CHECKING:  # the packs' manifests are read only when a build asks for a pack
    from bundler.eps.plugins import EpPack

# The pack wheels' platform tag and the profile architecture it serves.
_PLATFORMS = {"win_amd64": "x64", "win_arm64": "arm64", "win32": "x86"}


def chosen_packs(
    names: Sequence[str], profile: str, architecture: str, ort: str | None, picked: Options
) -> tuple[EpPack, ...]:
    """The packs `names` asks for, in the order asked, each once; a ConfigError,
    EpOrtTooOldError or MachineMismatchError for the first that cannot ship with `profile`."""
    if not names:
        return ()
    from bundler.eps.plugins import load_pack

    packs: list[EpPack] = []
    for name in dict.fromkeys(names):
        where = _asked(picked, name)
        try:
            pack = load_pack(name)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc.message}") from None
        _check_machine(pack, where, profile, architecture)
        _check_ort(pack, where, profile, ort)
        _check_proof(pack, where, profile)
        packs.append(pack)
    return tuple(packs)


def _asked(picked: Options, name: str) -> str:
    if picked.origins.get("eps") == CONFIG:
        return f'bundle.toml [build] eps "{name}"'
    return f"--ep {name}"


def _check_ort(pack: EpPack, where: str, profile: str, ort: str | None) -> None:
    if ort is None:
        raise EpOrtTooOldError(
            f"{where}: the pack needs ONNX Runtime {pack.min_ort} or newer, and profile "
            f"{profile} pins no onnxruntime.dll to compare; use a profile that ships ORT, or "
            "drop the pack."
        )
    if not pack.supports(ort):
        raise EpOrtTooOldError(
            f"{where}: the pack needs ONNX Runtime {pack.min_ort} or newer, and the profile "
            f"{profile} pins {ort}; its factory would refuse to register. Build with a profile "
            f"of ORT {pack.min_ort} or newer (bundle profiles lists them), or drop the pack. "
            "Nothing was written."
        )


def _check_proof(pack: EpPack, where: str, profile: str) -> None:
    from bundler.eps.matrix import pair_proof

    proof = pair_proof(profile, pack.name)
    if proof is not None and proof.failed:
        happened = "was refused" if proof.outcome == "refused" else "crashed"
        raise EpPairFailedError(
            f"{where}: registering the pack with profile {profile}'s onnxruntime.dll (ORT "
            f"{proof.ort}) under Wine {happened}: {proof.message} (the pack x core proof, "
            "manifests/ep-matrix.toml); the target would fail the same way. Build with another "
            "profile (bundle profiles lists them), or drop the pack. Nothing was written."
        )


def _check_machine(pack: EpPack, where: str, profile: str, architecture: str) -> None:
    platform = pack.source.pip.wheel.removesuffix(".whl").rsplit("-", 1)[-1]
    machine = _PLATFORMS.get(platform)
    if machine != architecture:
        raise MachineMismatchError(
            f"{where}: the pack ({pack.source.pip.wheel}) is built for {machine or platform}, and "
            f"profile {profile} is {architecture}; drop the pack, or use an {machine} profile."
        )
