"""Talk layer: the views of `bundle profiles` (list, show, check, outdated, new), for people and
as JSON. Pure: they return strings; the CLI prints."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.cli.sizes import human_size
from bundler.errors import ExitCode

if TYPE_CHECKING:  # type hints only: importing views must not import every command's modules
    from bundler.eps.plugins import EpPack
    from bundler.rules.derive import Derived
    from bundler.rules.derive.catalogue import Entry
    from bundler.rules.derive.outdated import EpPack as OutdatedPack
    from bundler.rules.derive.outdated import Outdated
    from bundler.rules.drift import DriftReport
    from bundler.target.profiles import Profile


def profile_table(entries: list[Entry], default: str, packs: Sequence[EpPack] = ()) -> str:
    """One line a profile, newest release first: release, flavour, CUDA, cuDNN, the size of
    its DLLs (recorded in [[files]]) and the name to pass to --profile; then the packs."""
    table = _profile_rows(entries, default)
    return f"{table}\n\n{pack_table(packs)}" if packs else table


def pack_table(packs: Sequence[EpPack]) -> str:
    """One line a pack: its --ep name, its wheel, the ORT it needs, its size and hardware."""
    rows = [("pack (--ep)", "package", "ORT", "size", "needs")]
    for pack in packs:
        pin = f"{pack.source.pip.package}=={pack.source.pip.version}"
        rows.append(
            (pack.name, pin, f">= {pack.min_ort}", human_size(pack.size), pack.hardware.needs)
        )
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = ["Execution-provider packs, each in ep/<pack>/ beside the exe (docs/ep-packs.md):"]
    lines += [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[4]])
        for row in rows
    ]
    return "\n".join(lines)


def _profile_rows(entries: list[Entry], default: str) -> str:
    rows = [("release", "flavour", "CUDA", "cuDNN", "size", "profile")]
    for item in sorted(entries, key=_newest_first):
        flavour = item.name.removeprefix(f"ort-{item.release}-")
        if item.name == default:
            flavour += " (default)"
        size = human_size(item.size) if item.size else "-"
        rows.append((item.release, flavour, item.cuda or "-", item.cudnn or "-", size, item.name))
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[5]])
        for row in rows
    )


def _newest_first(item: Entry) -> tuple[tuple[int, ...], str]:
    parts = tuple(-int(part) for part in item.release.split(".") if part.isdigit())
    return parts, item.name


def outdated_text(report: Outdated) -> str:
    """The releases seen, what the catalogue misses, the EP packs, and the verdict last."""
    lines = [f"Releases on {report.index_url} against the shipped profiles:"]
    for package, releases in report.checked.items():
        lines.append(f"  {package}: {', '.join(releases) or 'none'}")
    if report.missing:
        lines += ["", f"MISSING PROFILES ({len(report.missing)}):"]
        lines += [f"  {m.package} {m.release}: {m.command}" for m in report.missing]
    if report.components:
        lines += ["", f"NEWER COMPONENT RELEASES ({len(report.components)}):"]
        lines += [
            f"  {c.package} {c.newest} (flavour {c.flavour} pins {c.pinned} at most): add a "
            "component set"
            for c in report.components
        ]
    if report.frozen:
        lines += ["", "FROZEN (no more releases; the catalogue follows the package after it):"]
        lines += [
            f"  {item.package}: frozen at {item.last} ({item.why}); the catalogue carries its "
            f"line on with {item.successor}"
            for item in report.frozen
        ]
    if report.ep_packs:
        lines += ["", "EP PACKS (bundle build --ep):"]
        lines += [f"  {pack.package}: {_ep_pack_state(pack)}" for pack in report.ep_packs]
    return "\n".join([*lines, "", outdated_verdict(report)])


def _ep_pack_state(pack: OutdatedPack) -> str:
    newest = pack.newest or "no Windows wheel" if pack.listed else "not on this index"
    if pack.pinned is None:
        return f"{newest}; no pack ships it"
    shipped = f"--ep {pack.pack} pins {pack.pinned}"
    if pack.behind:
        return f"{newest} is newer: {shipped}; update manifests/eps/{pack.pack}.toml"
    return f"{newest}; {shipped}"


def outdated_verdict(report: Outdated) -> str:
    """One line: current (exit 0) or behind (ExitCode.CATALOGUE_BEHIND, and what to do)."""
    if report.current:
        return (
            "the catalogue is current: every ORT release since 1.19 on the index has its "
            "profile, and every flavour pins the newest CUDA/cuDNN release of its major"
        )
    releases = f"{report.behind} release{'s' if report.behind != 1 else ''}"
    todo = ["derive each missing profile with its command"] if report.missing else []
    todo += ["add a component set for each newer component"] if report.components else []
    todo += ["update the pin of each newer EP pack"] if report.newer_packs else []
    packs = f", {len(report.newer_packs)} EP pack" if report.newer_packs else ""
    return (
        f"the catalogue is behind: {releases} not covered ({len(report.missing)} ORT, "
        f"{len(report.components)} CUDA/cuDNN component{packs}); {' and '.join(todo)} "
        f"(exit {ExitCode.CATALOGUE_BEHIND:d})"
    )


def outdated_json(report: Outdated) -> str:
    return json.dumps(report.to_dict(), indent=2)


def profile_new_json(derived: Derived, out: Path | None) -> str:
    """`bundle profiles new --json`: the profile derived (its TOML text), and where it was
    written (null: nowhere, the text is the output)."""
    data = {
        "schema_version": 1,
        "name": derived.name,
        "path": None if out is None else str(out),
        "roots": list(derived.profile.roots),
        "artifacts": [
            {"name": item.name, "version": item.version, "provides": list(item.provides)}
            for item in derived.profile.artifacts
        ],
        "profile_toml": derived.text,
    }
    return json.dumps(data, indent=2)


def profile_list_json(entries: list[Entry], default: str, packs: Sequence[EpPack] = ()) -> str:
    rows = [{**dataclasses.asdict(item), "default": item.name == default} for item in entries]
    listed = [
        {
            "name": pack.name,
            "package": pack.source.pip.package,
            "version": pack.source.pip.version,
            "min_ort": pack.min_ort,
            "size": pack.size,
            "needs": pack.hardware.needs,
        }
        for pack in packs
    ]
    return json.dumps({"schema_version": 1, "profiles": rows, "packs": listed}, indent=2)


def profile_json(profile: Profile) -> str:
    data = dataclasses.asdict(profile)
    data["path"] = str(profile.path)
    return json.dumps({"schema_version": 1, **data}, indent=2)


def profile_detail(profile: Profile) -> str:
    lines = [
        f"{profile.name}: {profile.description}",
        f"  file:         {profile.path}",
        f"  architecture: {profile.architecture}",
        f"  min Windows:  {'.'.join(str(p) for p in profile.min_windows)}",
        f"  VC runtime:   {profile.vc_runtime}",
        f"  roots:        {', '.join(profile.roots)}",
        f"  driver DLLs:  {', '.join(profile.driver_dlls) or 'none'}",
    ]
    if profile.cuda_ep is not None:
        lines.append(f"  CUDA EP:      {profile.cuda_ep.describe()}")
    lines.append("  runtime rules (LoadLibrary at run time):")
    for rule in profile.runtime_rules:
        lines.append(f"    {rule.trigger} -> {', '.join(rule.loads)}")
        lines.append(f"      why: {rule.why}")
    lines.append("  artifacts:")
    for artifact in profile.artifacts:
        kinds = ", ".join(source.kind for source in artifact.sources)
        lines.append(
            f"    {artifact.name} {artifact.version} [{kinds}]: {', '.join(artifact.provides)}"
        )
    return "\n".join(lines)


def drift_table(report: DriftReport) -> str:
    lines = [f"Runtime rules of {report.profile} against {len(report.scanned)} scanned DLLs"]
    for item in report.drifts:
        lines.append(f"  {item.kind.value}: {item.trigger} -> {item.name}")
        lines.append(f"      {item.detail}")
    failures = len(report.failures)
    verdict = "agree" if not failures else f"disagree in {failures} place(s)"
    lines.append(f"the rules and the binaries {verdict}")
    return "\n".join(lines)


def drift_json(report: DriftReport) -> str:
    return json.dumps({"schema_version": 1, **report.to_dict()}, indent=2)
