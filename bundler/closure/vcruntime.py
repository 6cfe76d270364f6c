"""Decide layer: the Visual C++ runtime policy.

app-local: ship exactly the runtime DLLs the closure imports (the resolver already did that), and
check their FileVersion is at least the newest MSVC linker version among the binaries that use
them: ORT 1.19.2 is linked with 14.40 and crashes with an older msvcp140 (onnxruntime#26599).
installer: ship none of them; vc_redist.x64.exe installs them on the target. Where nothing the
build ships imports the runtime (onnxruntime-windowsml links the CRT statically, and an app built
without MSVC imports none), there is nothing to install: installer mode then needs no
--vc-redist, and ships none (docs/building.md, "The VC++ runtime").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from bundler.binary.pe import PEInfo
from bundler.closure.plan import Plan, PlanFile, Status
from bundler.errors import ConfigError, VcRuntimeError
from bundler.target.profiles import Profile, dll_key

# The v14x runtime DLLs of Microsoft.VC14x.CRT (+ OpenMP, C++ AMP, C++/CX), as redistributed.
VC_RUNTIME_DLLS = frozenset(
    {
        "msvcp140.dll",
        "msvcp140_1.dll",
        "msvcp140_2.dll",
        "msvcp140_atomic_wait.dll",
        "msvcp140_codecvt_ids.dll",
        "vcruntime140.dll",
        "vcruntime140_1.dll",
        "vcruntime140_threads.dll",
        "concrt140.dll",
        "vcomp140.dll",
        "vcamp140.dll",
        "vccorlib140.dll",
    }
)

# The debug builds of the same DLLs (Microsoft.VC14x.DebugCRT, in VS's debug_nonredist folder)
# and the debug UCRT from the Windows SDK: "Debug versions of an application are not
# redistributable" (Microsoft Learn, "Redistributing Visual C++ Files"); no user machine has them.
DEBUG_CRT_DLLS = frozenset(
    {
        "msvcp140d.dll",
        "msvcp140_1d.dll",
        "msvcp140_2d.dll",
        "msvcp140d_atomic_wait.dll",
        "msvcp140d_codecvt_ids.dll",
        "vcruntime140d.dll",
        "vcruntime140_1d.dll",
        "vcruntime140_threadsd.dll",
        "concrt140d.dll",
        "vcomp140d.dll",
        "vcamp140d.dll",
        "vccorlib140d.dll",
        "ucrtbased.dll",
    }
)


def vc_runtime_users(app: PEInfo, profile: Profile, packs: Iterable[str]) -> list[str]:
    """Who may import the VC++ runtime, as far as is known before any download: the app, each
    DLL the profile records (the runtime's own DLLs left out), and each chosen EP pack that
    imports it (`packs`: their names). A profile that records no DLLs is taken to need it."""
    users = [app.name] if any(dll_key(name) in VC_RUNTIME_DLLS for name in app.imports) else []
    if not profile.files:
        return [*users, f"profile {profile.name} (it records no import tables)"]
    for item in profile.files:
        if dll_key(item.name) not in VC_RUNTIME_DLLS and any(
            dll_key(name) in VC_RUNTIME_DLLS for name in item.imports
        ):
            users.append(item.name)
    return [*users, *packs]


def require_vc_redist(users: list[str]) -> None:
    """Installer mode without --vc-redist: refused when something imports the runtime."""
    if users:
        verb = "imports" if len(users) == 1 else "import"
        raise ConfigError(
            "--vc-runtime installer needs --vc-redist PATH (the vc_redist.x64.exe to ship): "
            f"{', '.join(users[:3])} {verb} the VC++ runtime."
        )


def apply_vc_runtime_policy(plan: Plan, mode: str) -> Plan:
    if mode == "installer":
        files = tuple(_as_redist(item) for item in plan.files)
        return replace(plan, files=files)
    _check_versions(plan)
    return plan


def _as_redist(item: PlanFile) -> PlanFile:
    if item.key in VC_RUNTIME_DLLS and item.status is Status.BUNDLED:
        return replace(item, status=Status.REDIST, note="installed by vc_redist.x64.exe")
    return item


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")) if text else ()


def newest_linker(plan: Plan) -> PlanFile | None:
    """The binary with the newest MSVC linker among those importing the VC++ runtime: the
    runtime must be at least that version (major.minor)."""
    users = {e.parent for e in plan.edges if e.child in VC_RUNTIME_DLLS and e.parent}
    linked = [
        item
        for item in plan.files
        if item.key in users and item.key not in VC_RUNTIME_DLLS and item.linker_version
    ]
    return max(linked, key=lambda item: _version(item.linker_version)) if linked else None


def required_vc_runtime(plan: Plan) -> str | None:
    """ "14.40" for ORT 1.19.2: what an installed or shipped VC++ runtime must at least be."""
    newest = newest_linker(plan)
    return ".".join(str(part) for part in _version(newest.linker_version)[:2]) if newest else None


def outdated_runtimes(plan: Plan) -> list[tuple[PlanFile, PlanFile]]:
    """Every shipped VC++ runtime DLL older (major.minor) than the newest MSVC linker among
    its users, each with that newest user: build refuses them, audit reports them."""
    newest = newest_linker(plan)
    if newest is None:
        return []
    needed = _version(newest.linker_version)[:2]
    return [
        (runtime, newest)
        for runtime in plan.with_status(Status.BUNDLED)
        if runtime.key in VC_RUNTIME_DLLS and _version(runtime.file_version)[:2] < needed
    ]


def _check_versions(plan: Plan) -> None:
    outdated = outdated_runtimes(plan)
    if outdated:
        runtime, newest = outdated[0]
        raise VcRuntimeError(
            f"{runtime.source}: VC++ runtime {runtime.file_version or 'without a version'} "
            f"is older than {newest.name}'s MSVC linker {newest.linker_version}; ship a "
            f"runtime >= {newest.linker_version} (the profile's msvc-runtime artifact, or "
            "--search a newer VCToolsRedistDir), or use --vc-runtime installer."
        )
