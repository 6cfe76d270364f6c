"""Act layer: the execution-provider packs of a build (`bundle build --ep NAME`): each pack's
wheel acquired as one more artifact of the profile (pinned, cached, hash-checked like every
other), its files placed in `<out>/<folder>/` with their [[files]] SHA-256 as pins, the VC++
runtime DLLs it must carry taken from the profile's own VC++ runtime archive, its licences in
licenses/<pack>/, and its closure checked before anything is written.

Why a pack's folder must be complete: ORT loads a plugin EP with LOAD_WITH_ALTERED_SEARCH_PATH,
so the loader searches the plugin's folder instead of the exe's for what it imports. A DLL that
onnxruntime.dll already loaded is reused by name (the VC++ runtime beside the exe); every other
import must be in the pack's folder, a Windows DLL, or a driver DLL the target provides.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.acquire.acquired import Acquired
from bundler.closure.lock import LockedEp
from bundler.closure.plan import EdgeKind, Plan
from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.errors import IntegrityError, MissingDependenciesError
from bundler.ship.output_folder import Placement
from bundler.ship.placements import LICENSES_DIR, Placed, Source
from bundler.target.profiles import Artifact, Profile, dll_key
from bundler.target.system import SystemPolicy

if TYPE_CHECKING:
    from bundler.eps.matrix import PairProof
    from bundler.eps.plugins import EpPack

ORT_DLL = "onnxruntime.dll"
EP_KIND = "ep"


def with_packs(profile: Profile, packs: Sequence[EpPack]) -> Profile:
    """The profile with each pack's wheel as one more artifact, acquired with the others."""
    return replace(profile, artifacts=(*profile.artifacts, *(p.artifact() for p in packs)))


def pack_placements(
    packs: Sequence[EpPack],
    trees: Sequence[Acquired],
    acquired: Sequence[Acquired],
    plan: Plan,
    mode: str,
) -> list[Placed]:
    """Every file the packs put into the bundle folder; `trees` are the packs' acquired wheels
    (in pack order), `acquired` the profile's artifacts (the VC++ runtime comes from there;
    with `mode` installer the redistributable puts it into System32 instead)."""
    placed: list[Placed] = []
    for pack, tree in zip(packs, trees, strict=True):
        artifact = pack.artifact()
        for item in pack.shipped():
            path = _member(tree, item.path, pack)
            source = Source(
                EP_KIND, None, artifact, tree.sha256, item.path, item.sha256, tree.pinned
            )
            placed.append((Placement(f"{pack.folder}/{item.name}", path, item.size), source))
        for name in pack.vc_runtime_in_pack if mode != "installer" else ():
            placed.append(_vc_runtime(pack, name, acquired, plan))
        for item in pack.licence_files():
            path = _member(tree, item.path, pack)
            source = Source(
                "license", None, artifact, tree.sha256, item.path, item.sha256, tree.pinned
            )
            target = f"{LICENSES_DIR}/{pack.name}/{item.name}"
            placed.append((Placement(target, path, item.size), source))
    return placed


def _member(tree: Acquired, member: str, pack: EpPack) -> Path:
    path = tree.folder / member
    if not path.is_file():
        raise IntegrityError(
            f"{tree.filename}: {member} is not in the extracted wheel ({tree.folder}), and "
            f"{pack.path} lists it; run bundle cache clean and build again."
        )
    return path


def _vc_runtime(pack: EpPack, name: str, acquired: Sequence[Acquired], plan: Plan) -> Placed:
    """`name` from the archive of the profile's VC++ runtime (the artifact that provides
    vcruntime140.dll): the same pinned wheel, which carries the whole runtime even where the
    profile lists only the DLLs onnxruntime.dll imports."""
    runtime = next((item for item in plan.files if item.key == "vcruntime140.dll"), None)
    holder = next((a for a in acquired if runtime and a.artifact == runtime.artifact), None)
    found = _find(holder, name) if holder else None
    if holder is None or found is None:
        raise MissingDependenciesError(
            f"--ep {pack.name}: the pack needs {name} in {pack.folder}/ (ORT does not load it), "
            "and the profile's VC++ runtime archive does not carry it; nothing was written. "
            "Use a profile with an app-local VC++ runtime from the msvc-runtime wheel."
        )
    member = found.relative_to(holder.folder).as_posix()
    artifact = Artifact(holder.artifact, holder.version, (name,), (), ())
    source = Source(EP_KIND, None, artifact, holder.sha256, member, origin=holder.pinned)
    return Placement(f"{pack.folder}/{name}", found, found.stat().st_size), source


def _find(holder: Acquired, name: str) -> Path | None:
    """The first `name` in the DLL folders of `holder`, else anywhere in its tree."""
    for folder in holder.dll_folders:
        for entry in sorted(os.listdir(folder)):
            if dll_key(entry) == dll_key(name):
                return folder / entry
    for where, _, names in sorted(os.walk(holder.folder)):
        for entry in sorted(names):
            if dll_key(entry) == dll_key(name):
                return Path(where) / entry
    return None


def require_pack_closure(
    packs: Sequence[EpPack], plan: Plan, policy: SystemPolicy, profile: Profile, mode: str
) -> None:
    """Every import and delay import of each shipped DLL of each pack is found on the target:
    in the pack's folder, Windows, a driver DLL, or a VC++ runtime DLL onnxruntime.dll loads
    (the loader reuses it by name). Else MissingDependenciesError naming the DLL and who needs
    it, before anything is written."""
    ort_loads = {
        edge.child
        for edge in plan.children(ORT_DLL)
        if edge.kind in (EdgeKind.IMPORT, EdgeKind.DELAY_IMPORT)
    }
    installed = mode == "installer"
    missing = []
    for pack in packs:
        own = {dll_key(item.name) for item in pack.shipped()} | {
            dll_key(name) for name in pack.vc_runtime_in_pack
        }
        drivers = {dll_key(name) for name in pack.driver_dlls}
        for item in pack.shipped():
            for name in (*item.imports, *item.delay_imports):
                key = dll_key(name)
                if key in own or key in drivers or policy.is_api_set(key):
                    continue
                if policy.is_system(key, profile.min_windows):
                    continue
                if key in VC_RUNTIME_DLLS and (installed or key in ort_loads):
                    continue
                missing.append(f"{name} (needed by {pack.folder}/{item.name})")
    if missing:
        raise MissingDependenciesError(
            f"the execution-provider packs' closure is incomplete, nothing was written: "
            f"missing {'; '.join(missing)}. A pack's DLL searches its own folder, not the "
            "exe's: the pack manifest (manifests/eps/) must ship it or name it a driver DLL."
        )


def locked_packs(
    packs: Sequence[EpPack], placed: Sequence[Placed], profile: str
) -> tuple[LockedEp, ...]:
    """The lock's record of each pack: what the app registers, where, its size here, and what
    the pack x core proof recorded for it beside `profile`'s ORT."""
    from bundler.eps.matrix import pair_proof

    sizes: dict[str, int] = {}
    for placement, source in placed:
        if source.kind == EP_KIND:
            folder = placement.name.rsplit("/", 1)[0]
            sizes[folder] = sizes.get(folder, 0) + placement.size
    return tuple(
        LockedEp(
            name=pack.name,
            package=pack.source.pip.package,
            version=pack.source.pip.version,
            ep_name=pack.ep_name,
            registration_name=pack.registration_name,
            plugin=f"{pack.folder}/{pack.plugin}",
            min_ort=pack.min_ort,
            size=sizes.get(pack.folder, 0),
            probe=pack.hardware.probe,
            needs=pack.hardware.needs,
            min_compute_capability=pack.hardware.min_compute_capability,
            min_driver=pack.hardware.min_driver,
            **_proof(pair_proof(profile, pack.name)),
        )
        for pack in packs
    )


def _proof(proof: PairProof | None) -> dict[str, str]:
    if proof is None:
        return {"proof": "", "proof_note": "no row in manifests/ep-matrix.toml"}
    note = "" if proof.outcome == "registered" else proof.message
    return {"proof": proof.outcome, "proof_note": note}
