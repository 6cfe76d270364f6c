"""Decide layer: the one validation step of a command's options, run after the resolver
(bundler.config.options) has picked every value and before any work: a value outside its setting's
choices, two options that contradict each other, an option that would mislead for the chosen
profile. The rules are tables: a new setting with choices is a row of CHOICES, a new pair of
rivals a row of RIVALS. Every refusal names the options involved (the flag, or the bundle.toml
file and key a value came from) and says what to do.

The choice lists live here, in the core, so that the wings that use them (render/iss.py,
render/sign.py, acquire/artifacts.py) and this check read one list; the VC++ runtime's modes
are a profile's values (bundler.target.values), which this check reads too.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bundler.config.options import CONFIG, FLAG, PROFILE, Options
from bundler.errors import ConfigError
from bundler.target.profile_names import LATEST, RELEASE
from bundler.target.values import VC_RUNTIME_MODES

INSTALL_SCOPES = ("machine", "user", "ask")
SIGN_TOOLS = ("signtool", "osslsigncode", "custom")
SOURCE_MODES = ("auto", "url", "pip", "dir")
# Inno Setup's Compression values (its help, "[Setup]: Compression"); lzma2/normal is ours.
_DIGITS = ("", *(f"/{n}" for n in range(1, 10)))
_LEVELS = ("", "/fast", "/normal", "/max", "/ultra", "/ultra64")
COMPRESSIONS = (
    "none",
    *(f"{kind}{level}" for kind in ("zip", "bzip") for level in _DIGITS),
    *(f"{kind}{level}" for kind in ("lzma", "lzma2") for level in _LEVELS),
)


@dataclass(frozen=True)
class Choice:
    """A setting whose value is one of `allowed`: its name in the resolver, what it is, and
    where a user sets it (its flag, its bundle.toml key)."""

    setting: str
    what: str  # with its article: "a VC++ runtime mode"
    allowed: tuple[str, ...]
    flag: str | None = None
    key: str | None = None  # "[build] vc_runtime"
    shown: str = ""  # the allowed values as a message lists them, when they are many

    def listed(self) -> str:
        return self.shown or ", ".join(self.allowed)


CHOICES: dict[str, Choice] = {
    choice.setting: choice
    for choice in (
        Choice(
            "vc_runtime",
            "a VC++ runtime mode",
            VC_RUNTIME_MODES,
            "--vc-runtime",
            "[build] vc_runtime",
        ),
        Choice(
            "iss_compression",
            "an Inno Setup compression",
            COMPRESSIONS,
            "--iss-compression",
            "[render] compression",
            "lzma2/normal (the default), lzma2/fast ... lzma2/ultra64, lzma, zip, zip/1 ... "
            "zip/9, bzip, bzip/1 ... bzip/9, none",
        ),
        Choice("install_scope", "an install scope", INSTALL_SCOPES, key="[render] install_scope"),
        Choice("sign_tool", "a sign tool", SIGN_TOOLS, key="[sign] tool"),
        Choice("source", "an artifact source", SOURCE_MODES, "--source"),
    )
}


@dataclass(frozen=True)
class Rivals:
    """Two flags that must not be given together, and what to give instead."""

    first: str
    second: str
    instead: str


RIVALS = (
    Rivals(
        "--profile",
        "--ort",
        "give one: --profile NAME for a profile, or --ort RELEASE for that release's GPU profile",
    ),
    Rivals("--iss", "--no-iss", "give --iss PATH to write the script there, or --no-iss for none"),
)


@dataclass(frozen=True)
class Target:
    """What the options are checked against: the profile's name and whether it has a GPU
    driver check (its gpu_driver; CPU and DirectML profiles have none)."""

    profile: str
    gpu: bool


def check(
    picked: Options,
    given: Mapping[str, object] | None = None,
    config: Path | None = None,
    target: Callable[[], Target] | None = None,
) -> None:
    """The validation step: `given` holds the flags as typed ({"--ort": "1.30.0"}; None or
    False: not given), `picked` the resolved values, `config` the bundle.toml they may come
    from, `target` the chosen profile, asked for only once the options themselves pass (so a
    contradiction is named before a misspelt profile). A ConfigError names the first problem."""
    refuse_rivals(given or {})
    check_release((given or {}).get("--ort"))
    for name, value in picked.values.items():
        if name in CHOICES and value is not None:
            check_choice(name, value, origin_of(name, picked.origins[name], config))
    refuse_idle(picked, config)
    if target is not None:
        refuse_misleading(picked, target(), config)


def refuse_rivals(given: Mapping[str, object]) -> None:
    for rule in RIVALS:
        first, second = given.get(rule.first), given.get(rule.second)
        if _given(first) and _given(second):
            raise ConfigError(
                f"{_typed(rule.first, first)} and {_typed(rule.second, second)} contradict "
                f"each other; {rule.instead}."
            )


def check_release(ort: object) -> None:
    """--ort takes an ORT release (1.31.1) or `latest`; a profile name belongs to --profile."""
    if ort is None or ort == LATEST or RELEASE.fullmatch(str(ort)):
        return
    raise ConfigError(
        f"--ort {ort}: not an ORT release; give one like 1.31.1, or latest (the newest shipped "
        "GPU profile's). A profile name or .toml file goes to --profile."
    )


def refuse_idle(picked: Options, config: Path | None) -> None:
    """An option that only works with another one that is absent: --evidence prunes for the
    app's models, so without --model (or [build] models) it would be ignored."""
    if picked.values.get("evidence") is not None and not picked.values.get("models"):
        where = _where(picked, "evidence", "--evidence", "[build] evidence", config)
        raise ConfigError(
            f"{where} needs the app's models, and there are none: the evidence decides what "
            "the models never load; add --model M.onnx (or [build] models), or drop it."
        )
    if "eps" in picked.values:  # a build: the packs it ships are known before any work
        shipped = _names(picked.values.get("eps"))
        for name in _names(picked.values.get("require_eps")):
            key = "[render] require_eps"
            where = _where(picked, "require_eps", f"--require-ep {name}", key, config)
            refuse_unshipped_requirement(where, name, shipped)


def refuse_unshipped_requirement(where: str, name: str, shipped: tuple[str, ...]) -> None:
    """A pack the setup must be able to use is one the bundle ships, else a ConfigError."""
    if name in shipped:
        return
    listed = ", ".join(shipped) if shipped else "none"
    raise ConfigError(
        f"{where}: the bundle ships no pack {name} (its packs: {listed}), so the setup has "
        f"nothing to require; add --ep {name} (or [build] eps), or drop the requirement."
    )


def check_choice(name: str, value: object, origin: str) -> None:
    """`value` of setting `name` is one of its choices, else a ConfigError naming `origin`
    (a flag, or a bundle.toml file and key), the valid values and the closest one."""
    choice = CHOICES[name]
    if value in choice.allowed:
        return
    close = difflib.get_close_matches(str(value).lower(), choice.allowed, 1, 0.6)
    shown = f'{origin} "{value}"' if origin.endswith("=") else f"{origin} {value}"
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(f"{shown}: not {choice.what}; use one of: {choice.listed()}{hint}.")


def origin_of(name: str, origin: str, config: Path | None) -> str:
    """Where setting `name` was set, as the user spells it: its flag, or bundle.toml's key."""
    choice = CHOICES.get(name)
    if origin == FLAG and choice and choice.flag:
        return choice.flag
    if origin == CONFIG and choice and choice.key:
        return f"{config or 'bundle.toml'} {choice.key} ="
    if origin == PROFILE:
        return f"the profile's {name}"
    return name


def refuse_misleading(picked: Options, target: Target, config: Path | None) -> None:
    """Options that would promise what this profile cannot keep. `--require-gpu` with a CPU
    or DirectML profile: the installer has no GPU driver check to make fail, so a silent
    install would pass on any machine."""
    if picked.values.get("require_gpu") is True and not target.gpu:
        key = "[render] require_gpu = true"
        where = _where(picked, "require_gpu", "--require-gpu", key, config)
        raise ConfigError(
            f"{where}: profile {target.profile} has no GPU driver check (a CPU or DirectML "
            "profile), so the installer cannot require a GPU; drop it, or choose a GPU "
            "profile (--profile ort-RELEASE-gpu-cudaNN, or --ort RELEASE)."
        )


def _where(picked: Options, name: str, flag: str, key: str, config: Path | None) -> str:
    """A setting's flag when the flag set it, else bundle.toml's file and key."""
    return flag if picked.origins.get(name) == FLAG else f"{config or 'bundle.toml'} {key}"


def _names(value: object) -> tuple[str, ...]:
    """A list setting's names (a tuple or list of str; None: none)."""
    return tuple(str(name) for name in value) if isinstance(value, (tuple, list)) else ()


def _given(value: object) -> bool:
    return value is not None and value is not False and value != ()


def _typed(flag: str, value: object) -> str:
    return flag if value is True else f"{flag} {value}"
