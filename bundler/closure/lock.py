"""Decide layer: bundle.lock.json's content: what a build put next to the exe, and why — a view
of the Plan.

Every file with its SHA-256, size, file version, where it came from (artifact, the URL / wheel /
folder, the archive's SHA-256 and the member inside it) and the shortest chain that needs it.
The next build reads it to know which files it owns (--clean, overwrite rules), to skip hashing
unchanged files, and `--locked` compares a new result against it. Here the lock is data (its
JSON text, its digest, what `--locked` compares); bundler.closure.lockfile reads and writes the
file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

from bundler import __version__
from bundler.target.profiles import CudaEp, GpuDriver

LOCK_NAME = "bundle.lock.json"
DOCTOR_EXE = "bundle-doctor.exe"
DOCTOR_DATA = "bundle-doctor.dat"  # rendered from the lock (bundler/render/doctor_dat.py)
# What an installer installed, one name a line, in {app}: the next version's installer removes
# what it lists and the new payload lacks, and nothing else (docs/building.md, "Upgrades").
INSTALLED_LIST = "bundle-installed.txt"
# The lock's format. 2: `packs` became `eps` and `pack` became `runtime_pack` (issue 39). The
# rule from 2 on: a new optional key needs no new version (a reader ignores what it does not
# know of the lock's top level); a renamed or removed key, or a changed meaning, does; and the
# reader accepts the version before its own (READABLE), so a lock written by the previous
# release audits and rebuilds without a rebuild first.
SCHEMA_VERSION = 2
READABLE = (1, 2)
# What must be equal for --locked: identity and content, not where a mirror served it from.
_COMPARED = ("kind", "sha256", "size", "artifact", "archive_sha256", "member")


@dataclass(frozen=True)
class LockedFile:
    name: str  # relative to the output folder, posix
    kind: str  # app, bundled, license, installer, sdk (a header, an import library), ep (a pack)
    sha256: str
    size: int
    file_version: str | None = None
    artifact: str | None = None
    origin: str | None = None
    archive_sha256: str | None = None
    member: str | None = None
    why: str | None = None
    # A bundled DLL's import tables (API sets left out): what it loads stays known to the audit
    # when the file is gone. None in locks written before they were recorded.
    imports: tuple[str, ...] | None = None
    delay_imports: tuple[str, ...] | None = None
    # The placed file's time, for the audit's cheap check (BA404), in locks written before
    # bundle.times.json took it (bundler/closure/times.py): a build now writes null here, the key
    # kept so a previous release reads the lock as one written before times were recorded
    mtime_ns: int | None = None
    # The CUDA code in a bundled DLL's fat binaries (bundler/binary/fatbin.py): SASS architectures
    # and
    # PTX targets, e.g. ("sm_80", "sm_90a"); () for none. None: not read (a lock written before).
    sass: tuple[str, ...] | None = None
    ptx: tuple[str, ...] | None = None


@dataclass(frozen=True)
class LockedModel:
    """A model the build was given (--model): the bundle keeps what its ops load."""

    name: str  # the file name
    sha256: str
    ops: tuple[str, ...]


@dataclass(frozen=True)
class PrunedFile:
    """A DLL the profile ships that this bundle leaves out (bundler/pruning/prune.py), and why."""

    name: str
    size: int
    why: str


@dataclass(frozen=True)
class LockedEp:
    """An execution-provider pack the bundle carries (bundle build --ep): what the app
    registers, under which name, and from which file relative to the exe's folder."""

    name: str  # the pack (manifests/eps/<name>.toml)
    package: str  # its wheel's package and version
    version: str
    ep_name: str  # the EP name its factory reports
    registration_name: str  # the name to register the library under
    plugin: str  # the plugin DLL, relative to the bundle folder (posix)
    min_ort: str  # the oldest ORT release it registers with
    size: int  # bytes of its files in the bundle folder
    # What the target needs, for bundle-doctor.exe and the setup (manifests/eps/ [hardware])
    probe: str = ""  # nvidia-cuda, intel or d3d12 (bundler.eps.plugins.PROBES)
    needs: str = ""
    min_compute_capability: str | None = None
    min_driver: str | None = None
    # The pack x core proof of this pack with the profile's onnxruntime.dll
    # (manifests/ep-matrix.toml): "registered", "not-run" or "" (no row: a profile of the
    # user's own); proof_note says why where it is not "registered".
    proof: str = ""
    proof_note: str = ""

    @property
    def folder(self) -> str:
        """The pack's folder, relative to the bundle folder (posix)."""
        return self.plugin.rsplit("/", 1)[0]


# The kinds of file the runtime pack holds: what the profile's artifacts provide (ORT, CUDA,
# cuDNN, the VC++ runtime DLLs, EP packs) and their licences; the app, the doctor and its data,
# the lock and a redistributable that runs from {tmp} stay with the app (docs/runtime-pack.md).
RUNTIME_KINDS = frozenset({"bundled", "license", "ep"})
# In an installed app folder, the content hash of the runtime pack it holds (one line).
PACK_MARKER = "bundle-pack.txt"


@dataclass(frozen=True)
class RuntimePack:
    """The runtime part of a bundle, apart from the app: identified by the content hash of its
    files, so every build with the same runtime has the same pack."""

    sha256: str  # of the sorted "name<TAB>sha256<LF>" lines of its files: its identity
    files: tuple[str, ...]  # relative to the bundle folder, posix, sorted
    size: int  # bytes of those files

    @property
    def short(self) -> str:
        """The first 16 hex digits: the pack's name in files and URLs."""
        return self.sha256[:16]


def runtime_pack(files: tuple[LockedFile, ...]) -> RuntimePack | None:
    """The runtime pack of a lock's files; None when the bundle has no runtime files."""
    chosen = sorted((item for item in files if item.kind in RUNTIME_KINDS), key=lambda f: f.name)
    if not chosen:
        return None
    lines = "".join(f"{item.name}\t{item.sha256}\n" for item in chosen)
    return RuntimePack(
        hashlib.sha256(lines.encode("utf-8")).hexdigest(),
        tuple(item.name for item in chosen),
        sum(item.size for item in chosen),
    )


@dataclass(frozen=True)
class PayloadFile:
    """One file of a bundle, relative to the bundle folder (posix)."""

    name: str
    kind: str  # a LockedFile kind, or "app" for an exe built in place, or "lock"
    sha256: str | None  # None where the lock holds no hash (an in-place exe, the lock itself)


@dataclass(frozen=True)
class Lock:
    """bundle.lock.json: every file a build wrote with its hash and origin, and what the target
    machine must provide (driver, VC++ runtime). `bundle build --locked` and `audit` read it."""

    profile: str
    architecture: str
    vc_runtime: str
    files: tuple[LockedFile, ...]
    driver_requirements: tuple[str, ...] = ()
    app: str | None = None  # the exe's name in the output folder (listed in files only with --out)
    app_file_version: str | None = None  # the exe's VS_VERSIONINFO FileVersion, if it has one
    app_product_name: str | None = None  # and its ProductName
    min_windows: str | None = None
    vc_runtime_min: str | None = None  # newest MSVC linker among the runtime's users, "14.40"
    gpu_driver: GpuDriver | None = None
    ort_version: str | None = None  # the ORT release the profile pins (the doctor compares it)
    gpus: tuple[str, ...] = ()  # target GPUs the profile or bundle.toml declares, e.g. "sm_86"
    loads: tuple[str, ...] = ()  # what ORT loads by path at run time, in load order (the doctor)
    doctor: bool = False  # bundle-doctor.exe and its data file ship with the bundle
    models: tuple[LockedModel, ...] = ()  # --model: what the pruning was decided for
    pruned: tuple[PrunedFile, ...] = ()  # left out for those models, each with its reason
    eps: tuple[LockedEp, ...] = ()  # execution-provider packs (--ep); () in older locks
    runtime_pack: RuntimePack | None = None  # None: no runtime files, or an older lock
    # The CUDA provider's modes, from the profile's [cuda_ep] (measured on the pinned DLLs):
    # None without a CUDA provider, or in a lock written before it was recorded
    cuda_ep: CudaEp | None = None
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION

    def by_name(self) -> dict[str, LockedFile]:
        return {item.name: item for item in self.files}

    def payload(self) -> list[PayloadFile]:
        """What ships: the app, every file the build placed, and the lock file itself, sorted
        by name. Generated views (setup script, SBOM, archives) are not part of it."""
        entries = {item.name: PayloadFile(item.name, item.kind, item.sha256) for item in self.files}
        if self.app and self.app not in entries:
            entries[self.app] = PayloadFile(self.app, "app", None)
        entries[LOCK_NAME] = PayloadFile(LOCK_NAME, "lock", None)
        if self.doctor:
            entries[DOCTOR_DATA] = PayloadFile(DOCTOR_DATA, "doctor-data", None)
        return sorted(entries.values(), key=lambda entry: entry.name)

    def to_json(self) -> str:
        data = asdict(self)
        body = {"schema_version": data.pop("schema_version"), **data}
        return json.dumps({**body, "digest": content_digest(body)}, indent=2) + "\n"


def content_digest(body: dict[str, Any]) -> str:
    """The SHA-256 of the lock's content (every key but `digest`, canonical JSON). The next
    build trusts the lock's hashes for files whose size and time are unchanged, so a hand edit
    must not pass: a lock whose digest does not match is refused."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def is_inside(name: str) -> bool:
    """A relative posix path that stays inside its folder (no '..', drive, backslash)."""
    path = PurePosixPath(name)
    return (
        bool(name)
        and not path.is_absolute()
        and ".." not in path.parts
        and not any(char in name for char in "\\:")
    )


def differences(old: Lock, new: Lock) -> list[str]:
    """Human-readable differences that matter for --locked."""
    changes = []
    if old.profile != new.profile:
        changes.append(f"profile {old.profile} -> {new.profile}")
    before, after = old.by_name(), new.by_name()
    for name in sorted(before.keys() - after.keys()):
        changes.append(f"{name}: no longer part of the bundle")
    for name in sorted(after.keys() - before.keys()):
        changes.append(f"{name}: new in the bundle")
    if {m.sha256 for m in old.models} != {m.sha256 for m in new.models}:
        changes.append("the models (--model) differ")
    for name in sorted(before.keys() & after.keys()):
        for key in _COMPARED:
            a, b = getattr(before[name], key), getattr(after[name], key)
            if a != b:
                changes.append(f"{name}: {key} {a} -> {b}")
    return changes
