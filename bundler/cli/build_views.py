"""Talk layer: the views of the commands that write a bundle: `bundle build` (its deployment,
--model's pruning, the Inno Setup script, the post-build step), `bundle render` and `bundle
msbuild`, as text for people and as JSON. Pure: they return strings; the CLI prints."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.cli.compile_views import compile_part, compiles, iscc_line, iscc_line_powershell
from bundler.cli.dry_run_views import settings_part
from bundler.cli.sizes import human_size
from bundler.closure.lock import LOCK_NAME
from bundler.closure.plan import Status
from bundler.render.postbuild import PLACEHOLDER

if TYPE_CHECKING:  # type hints only: importing views must not import every command's modules
    from bundler.config.options import Options
    from bundler.pruning.prune import Pruning
    from bundler.render.iss import IssResult
    from bundler.render.postbuild import PostbuildResult
    from bundler.ship.msbuild import MsbuildResult
    from bundler.ship.output_folder import Counters
    from bundler.ship.pipeline import BuildResult


def counters_lines(c: Counters) -> list[str]:
    """What a deployment did: bytes copied, files cloned (no bytes written) or hard-linked,
    and --link's fall-back to copies, which the user asked not to get."""
    cloned = f", cloned {c.cloned} (blocks shared, no bytes written)" if c.cloned else ""
    lines = [
        f"  copied {c.copied} ({human_size(c.bytes_written)}){cloned}, linked {c.linked}, "
        f"unchanged {c.skipped}, removed {c.removed}; hashed {c.hashed} files"
    ]
    if c.link_fallbacks:
        lines.append(
            f"  --link: {c.link_fallbacks} files copied instead of linked: the cache is on "
            "another volume than the output folder (or its filesystem has no hard links)"
        )
    return lines


def build_report(result: BuildResult) -> str:
    c = result.counters
    verb = "Would deploy" if result.dry_run else "Deployed"
    lines = [
        f"{verb} {len(result.deployment.steps)} files for {result.plan.profile} into {result.out}"
    ]
    if result.dry_run:
        for step in result.deployment.steps:
            reason = f" ({step.reason})" if step.reason else ""
            lines.append(f"  {step.action:<7} {step.placement.name}{reason}")
        lines += [f"  remove  {name} (--clean)" for name in result.deployment.removals]
    else:
        lines += counters_lines(c)
        lines.append(f"  lock file: {result.out / LOCK_NAME}")
    if result.deployment.stale:
        names = ", ".join(result.deployment.stale)
        lines.append(
            f"  no longer needed (an earlier build wrote them; --clean removes them): {names}"
        )
    drivers = result.lock.driver_requirements
    if drivers:
        lines.append(f"  required on the target, never shipped: {', '.join(drivers)} (GPU driver)")
    lines += pack_lines(result)
    redist = result.plan.with_status(Status.REDIST)
    if redist:
        lines.append(f"  installed by vc_redist.x64.exe: {', '.join(i.name for i in redist)}")
    if result.pruning is not None:
        lines += pruning_lines(result.pruning, result.dry_run)
    if result.iss is not None:
        lines += ["  " + line for line in iss_report(result.iss).splitlines()]
    if result.postbuild is not None:
        lines += ["  " + line for line in postbuild_report(result.postbuild).splitlines()]
    if result.archive is not None:
        archive = result.archive
        lines.append(
            f"  archive: {archive.path} ({archive.members} files, "
            f"{human_size(archive.archive_size)}, sha256 {archive.sha256})"
        )
    return "\n".join(lines)


def build_json(result: BuildResult) -> str:
    data = {
        "schema_version": 1,
        "out": str(result.out),
        "dry_run": result.dry_run,
        "counters": dataclasses.asdict(result.counters),
        "steps": [
            {"name": s.placement.name, "action": s.action, "reason": s.reason}
            for s in result.deployment.steps
        ],
        "removed_by_clean": list(result.deployment.removals),
        "stale": list(result.deployment.stale),
        "lock": json.loads(result.lock.to_json()),
        "iss": dataclasses.asdict(result.iss) | compile_part(result.iss) if result.iss else None,
        "archive": dataclasses.asdict(result.archive) if result.archive else None,
        "postbuild": dataclasses.asdict(result.postbuild) if result.postbuild else None,
        "settings": result.settings,
        "pruning": pruning_json(result.pruning),
        "eps": [dataclasses.asdict(ep) for ep in result.lock.eps],
        "plan": result.plan.to_dict(),
    }
    data["packs"] = data["eps"]  # the name before "eps" (issue 39), kept for readers
    return json.dumps(data, indent=2, default=str)


def pruning_lines(pruning: Pruning, dry_run: bool) -> list[str]:
    """--model: what was left out and the size saved, or why nothing was."""
    models = ", ".join(model.path.name for model in pruning.models)
    if not pruning.pruned:
        return [f"  models {models}: nothing pruned ({pruning.reason})"]
    verb = "would leave out" if dry_run else "left out"
    names = ", ".join(item.name for item in pruning.pruned)
    lines = [f"  models {models}: {verb} {names}, saving {human_size(pruning.saved)}"]
    if pruning.kept:
        lines.append(f"  kept, their ops load them: {', '.join(pruning.kept)}")
    if pruning.evidence is not None:
        lines.append(f"  evidence: {pruning.evidence} (docs/pruning.md)")
    return lines


def pack_lines(result: BuildResult) -> list[str]:
    """Each execution-provider pack: where it goes, its size, what the app registers, and a
    note where the pack x core proof has not registered it with this ORT."""
    verb = "would add" if result.dry_run else "added"
    lines = []
    for pack in result.lock.eps:
        lines.append(
            f"  EP pack {pack.name} ({pack.package} {pack.version}) {verb} "
            f"{pack.plugin.rsplit('/', 1)[0]}/, {human_size(pack.size)}: register {pack.plugin} "
            f'as "{pack.registration_name}" (ORT >= {pack.min_ort})'
        )
        if pack.proof != "registered":
            lines.append(
                f"  note: {pack.name} has not been registered with this profile's ORT under "
                f"Wine ({pack.proof_note}); the pack x core proof is manifests/ep-matrix.toml"
            )
    return lines


def pruning_json(pruning: Pruning | None) -> dict[str, object] | None:
    if pruning is None:
        return None
    return {
        "models": [
            {"name": m.path.name, "sha256": m.sha256, "ops": sorted(m.ops)} for m in pruning.models
        ],
        "evidence": pruning.evidence,
        "pruned": [dataclasses.asdict(item) for item in pruning.pruned],
        "kept": list(pruning.kept),
        "unknown_ops": list(pruning.unknown_ops),
        "saved_bytes": pruning.saved,
        "reason": pruning.reason or None,
    }


def iss_report(result: IssResult) -> str:
    spanning = ", split into slices (DiskSpanning)" if result.disk_spanning else ""
    lines = [f"Inno Setup script: {result.path} ({result.files} files{spanning})"]
    if result.app_version is None:
        lines.append(
            "  note: the app has no version resource and none was given (--app-version or "
            "[render] app_version in bundle.toml): the setup shows no version"
        )
    lines += compile_lines(result)
    return "\n".join(lines)


def compile_lines(result: IssResult) -> list[str]:
    """How each setup compiles (bundler.cli.compile_views), on Windows PowerShell's line beside
    cmd's, which PowerShell would read otherwise."""
    lines = []
    for setup in compiles(result):
        web = setup.kind == "web"
        what = "web setup (downloads the runtime pack)" if web else "compile it with"
        lines.append(f"  {what}: {iscc_line(setup)}")
        if os.name == "nt" and setup.args:
            lines.append(f"  in PowerShell: {iscc_line_powershell(setup)}")
        if setup.sign_file is not None and not web:
            lines.append(f"  signed with the command in {setup.sign_file}")
    return lines


def iss_json(result: IssResult, picked: Options | None = None) -> str:
    """`bundle render iss --json`: the script written, and how each setup compiles
    (bundler.cli.compile_views: `setups`, and `iscc_args`, ISCC's arguments before the script,
    for the first); `settings`: those the command resolved, each with its origin (`render
    iss`: the cache folder)."""
    data = {"schema_version": 1, **_paths(dataclasses.asdict(result))}
    return json.dumps(data | compile_part(result) | settings_part(picked), indent=2)


def postbuild_report(result: PostbuildResult) -> str:
    """Where the post-build step is, how to run it, and what the event still needs."""
    lines = [
        f"post-build step: {result.script} ({result.dlls} DLLs; {result.licenses} licence "
        "files with /LICENSES)",
        f'  run it as: "{result.script}" TARGET_DIR [/LICENSES]',
        f"  MSBuild post-build event: {result.event}",
    ]
    if not result.project_relative:
        lines += [
            f"  note: replace {PLACEHOLDER} in the event with this folder's path relative to "
            "your project,",
            "    or give bundle the project's folder ([render] project_dir, or bundle render "
            "postbuild --project-dir)",
        ]
    return "\n".join(lines)


def postbuild_json(result: PostbuildResult, picked: Options | None = None) -> str:
    """`bundle render postbuild --json`: both files written, what the event still needs, and
    the settings resolved with their origins (the cache folder)."""
    data = {"schema_version": 1, **_paths(dataclasses.asdict(result))}
    placeholder = None if result.project_relative else PLACEHOLDER
    return json.dumps(data | {"placeholder": placeholder} | settings_part(picked), indent=2)


def msbuild_report(result: MsbuildResult) -> str:
    """What the folder holds, what this run did, and how a project uses it."""
    files, c = result.lock.files, result.counters
    dlls = sum(1 for item in files if item.kind == "bundled")
    headers = sum(1 for item in files if item.kind == "sdk" and item.name.startswith("include/"))
    libraries = [item.name for item in files if item.kind == "sdk" and item.name.startswith("lib/")]
    props, targets = (path.name for path in result.files.paths)
    lines = [
        f"Laid out {result.out} for {result.plan.profile}: {dlls} DLLs in bin/, {headers} "
        f"headers in include/, {', '.join(libraries)}",
        *counters_lines(c),
        f"  lock file: {result.out / LOCK_NAME}",
        f"  MSBuild: {props}, {targets} ({len(result.files.changed)} written, "
        f"{len(result.files.paths) - len(result.files.changed)} unchanged)",
        f"  in a .vcxproj: import {props} near the top and {targets} near the end",
        f"  or a post-build event: {result.postbuild.event.name} calls "
        f"{result.postbuild.script.name} ({result.postbuild.dlls} DLLs)",
    ]
    drivers = result.lock.driver_requirements
    if drivers:
        lines.append(f"  required on the target, never shipped: {', '.join(drivers)} (GPU driver)")
    return "\n".join(lines)


def msbuild_json(result: MsbuildResult) -> str:
    """`bundle msbuild --json`: what msbuild_report says, and the lock file in full."""
    data = {
        "schema_version": 1,
        "out": str(result.out),
        "profile": result.plan.profile,
        "counters": dataclasses.asdict(result.counters),
        "removed": list(result.removed),
        "lock_file": str(result.out / LOCK_NAME),
        "msbuild_files": [str(path) for path in result.files.paths],
        "changed": [str(path) for path in result.files.changed],
        "postbuild": _paths(dataclasses.asdict(result.postbuild)),
        "driver_requirements": list(result.lock.driver_requirements),
        "lock": json.loads(result.lock.to_json()),
    }
    return json.dumps(data, indent=2)


def _paths(data: dict[str, object]) -> dict[str, object]:
    """A result's fields with its paths as the strings the text view prints."""
    return {key: str(value) if isinstance(value, Path) else value for key, value in data.items()}
