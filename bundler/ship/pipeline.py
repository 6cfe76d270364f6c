"""Act layer: `bundle build`: acquire → resolve → decide → apply, as one short script of calls.

Everything that writes into the output folder happens after every decision has been made and
checked (missing DLLs, VC runtime version, conflicts, --locked): a failed build writes nothing
there. Files go first, the lock file last, so the lock always describes complete files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bundler.acquire.acquired import Acquired
from bundler.acquire.artifacts import AcquireOptions, acquire_profile
from bundler.acquire.cache import Cache, runtime_packs
from bundler.closure.fit import require_fit
from bundler.closure.gpu import parse_target
from bundler.closure.lock import LOCK_NAME, Lock, LockedModel, runtime_pack
from bundler.closure.lockfile import read_lock, require_as_locked, write_lock
from bundler.closure.plan import Plan, Status
from bundler.closure.resolve import read_inputs
from bundler.closure.times import write_times
from bundler.closure.vcruntime import (
    require_vc_redist,
    required_vc_runtime,
    vc_runtime_users,
)
from bundler.config.options import Options
from bundler.disk.files import as_listed
from bundler.eps.choice import chosen_packs
from bundler.errors import ConfigError
from bundler.progress_meter import ProgressFactory
from bundler.pruning.app_evidence import problems, read_app_evidence
from bundler.pruning.evidence import all_evidence, evidence_dirs
from bundler.pruning.onnx_models import ModelOps, read_model_ops
from bundler.pruning.prune import (
    MeasuredSource,
    Pruning,
    TableSource,
    apply_pruning,
    cudnn_version,
    decide,
    evidence_for,
    options_mismatch,
)
from bundler.render.doctor_dat import write_doctor_data
from bundler.render.engine import Templates
from bundler.render.iss import ISS_NAME, IssResult, write_iss
from bundler.render.postbuild import PostbuildResult, write_postbuild
from bundler.render.render_settings import IssSettings, PostbuildSettings
from bundler.render.sbom import SBOM_NAME, write_sbom
from bundler.reporter import Reporter
from bundler.ship.deploy import Deployment, apply, output_lock, plan_deployment
from bundler.ship.doctor import doctor_placement, load_order, with_gpu_code
from bundler.ship.ep_deploy import locked_packs, pack_placements, require_pack_closure, with_packs
from bundler.ship.output_folder import Counters, Placement
from bundler.ship.placements import (
    Placed,
    Source,
    bundled_placements,
    licence_placements,
    locked_files,
    placement_hashes,
    require_complete,
    require_pins,
)
from bundler.ship.shipped import shipped_closure
from bundler.target.profiles import Profile, load_profile, profile_ort_release
from bundler.target.system import load_system_policy

if TYPE_CHECKING:  # bundler.ship.archive (py7zr) is imported only when --archive asks for it
    from bundler.binary.pe import PEInfo
    from bundler.eps.plugins import EpPack
    from bundler.ship.archive import ArchiveResult

VC_REDIST_NAME = "vc_redist.x64.exe"


@dataclass(frozen=True)
class BuildOptions:
    exe: Path
    profile: str
    cache_dir: Path
    out: Path | None = None
    search: tuple[Path, ...] = ()
    vc_runtime: str | None = None
    vc_redist: Path | None = None
    dry_run: bool = False
    clean: bool = False
    force: bool = False
    link: bool = False
    locked: bool = False
    sbom: bool = False
    iss: Path | bool = True  # True: setup.iss in the output folder; False: no script
    installer: IssSettings = field(default_factory=IssSettings)
    archive: Path | None = None
    # postbuild.cmd and postbuild.event.xml in the output folder; None: neither
    postbuild: PostbuildSettings | None = field(default_factory=PostbuildSettings)
    acquire: AcquireOptions = field(default_factory=AcquireOptions)
    options: Options = field(default_factory=Options)  # where each setting came from
    doctor: bool = True  # ship bundle-doctor.exe and bundle-doctor.dat
    gpus: tuple[str, ...] | None = None  # target GPUs; None: the profile's
    models: tuple[Path, ...] = ()  # the app's ONNX models: prune what their ops never load
    cuda_options: Mapping[str, str] = field(default_factory=dict)  # the app's CUDA EP options
    evidence: Path | None = None  # the app's own measurement (bundle measure), for pruning
    eps: tuple[str, ...] = ()  # execution-provider packs (manifests/eps/), each in its folder
    # the folders of load-evidence tables: the command's $BUNDLE_EVIDENCE_DIR, then the shipped
    evidence_tables: tuple[Path, ...] = field(default_factory=lambda: tuple(evidence_dirs()))
    lock_timeout: float | None = None  # the command's $BUNDLE_LOCK_TIMEOUT (None: wait on)

    def gpu_targets(self, profile: Profile) -> tuple[str, ...]:
        return self.gpus if self.gpus is not None else profile.gpus

    def iss_path(self, out: Path) -> Path | None:
        if self.iss is False:
            return None
        return out / ISS_NAME if self.iss is True else Path(self.iss)


@dataclass
class BuildResult:
    out: Path
    plan: Plan
    lock: Lock
    deployment: Deployment
    counters: Counters
    dry_run: bool
    iss: IssResult | None = None
    archive: ArchiveResult | None = None
    postbuild: PostbuildResult | None = None
    settings: dict[str, dict[str, object]] = field(default_factory=dict)  # value and origin
    pruning: Pruning | None = None  # --model: what was left out, or why nothing


@dataclass(frozen=True)
class Preflight:
    """What a build established before any download: its inputs read, its settings checked."""

    profile: Profile
    app: PEInfo
    out: Path
    mode: str  # how the VC++ runtime ships: app-local or installer
    packs: tuple[EpPack, ...]
    models: tuple[ModelOps, ...]


def preflight(options: BuildOptions) -> Preflight:
    """The one validation step of a build: every input it reads (the exe, the models, the
    lock file already there) and every setting it takes (the VC++ runtime, the installer, the
    GPU targets, the archive, the EP packs) fails here, before any download."""
    profile = load_profile(options.profile)
    packs = chosen_packs(
        options.eps,
        profile.name,
        profile.architecture,
        profile_ort_release(profile),
        options.options,
    )
    (app,) = read_inputs([options.exe], profile, options.search)
    out = options.out or options.exe.parent
    mode = options.vc_runtime or profile.vc_runtime
    if options.vc_runtime is None:  # the profile's decides: say so
        options.options.pick("vc_runtime", None, None, profile.vc_runtime)
    if mode == "installer" and options.vc_redist is None:
        require_vc_redist(vc_runtime_users(app, profile, (p.name for p in packs if p.vc_runtime)))
    options.installer.checked(mode)
    for target in options.gpu_targets(profile):
        parse_target(target)  # a misspelt GPU
    if options.archive is not None:
        from bundler.ship.archive import archive_format

        archive_format(options.archive)  # a wrong suffix
    models = tuple(read_model_ops(path) for path in options.models)
    read_lock(out / LOCK_NAME)  # a bad lock (read again to deploy: another build may run)
    return Preflight(profile, app, out, mode, tuple(packs), models)


@dataclass(frozen=True)
class Staged:
    """A build decided and ready to deploy: what goes where, and what it was decided with."""

    options: BuildOptions
    checked: Preflight
    plan: Plan
    placed: list[Placed]
    cache: Cache
    progress: ProgressFactory
    pruning: Pruning | None


def build(options: BuildOptions, report: Reporter, templates: Templates) -> BuildResult:
    """`templates` renders the setup script and the post-build files (the CLI makes it from
    options.cache_dir)."""
    options = replace(options, exe=as_listed(options.exe))  # HELLO.EXE ships as hello.exe
    checked = preflight(options)
    profile, packs, mode, out = checked.profile, checked.packs, checked.mode, checked.out
    cache = Cache(options.cache_dir, report, lock_timeout=options.lock_timeout)
    acquired = acquire_profile(with_packs(profile, packs), cache, options.acquire, report)
    acquired, trees = acquired[: len(profile.artifacts)], acquired[len(profile.artifacts) :]
    plan = shipped_closure(
        [checked.app], profile, acquired, options.search, mode, app_folders_first=False,
        unreadable="error",
    )  # fmt: skip
    require_fit(plan, profile)  # a pin of another version than the DLLs import: exit 21
    require_complete(plan)
    models = list(checked.models)
    pruning = prune_for(plan, profile, models, options) if models else None
    plan = apply_pruning(plan, pruning) if pruning else plan
    if profile.signatures == "verify":
        from bundler.binary.signatures import verify_vendor_signatures

        bundled = plan.with_status(Status.BUNDLED)
        verify_vendor_signatures([(i.name, Path(i.source or "")) for i in bundled], profile)
    require_pack_closure(packs, plan, load_system_policy(), profile, mode)
    placed = placements(plan, profile, acquired, options, out)
    placed += pack_placements(packs, trees, acquired, plan, mode)
    staged = Staged(options, checked, plan, placed, cache, report.progress, pruning)
    if options.dry_run:
        return _deploy(staged)
    # the old lock is read again inside: another build may have run
    with output_lock(out, report.note, options.lock_timeout):
        result = _deploy(staged)
        shipped = with_packs(profile, packs)  # the SBOM names each pack's pin and licence
        _write_views(options, out, shipped, checked.app.name, result, report.progress, templates)
    return result


def prune_for(
    plan: Plan, profile: Profile, models: Sequence[ModelOps], options: BuildOptions
) -> Pruning:
    """The pruning decision for `models` (bundler/pruning/prune.py): from the app's own measurement
    when `options.evidence` names one (refused when it does not fit), else from the evidence
    table measured for this profile's ORT release and cuDNN, when the app runs the CUDA EP with
    the options it was measured with."""
    ort = profile_ort_release(profile)
    if options.evidence is not None:
        source = measured_source(options.evidence, options.cuda_options, models, profile)
        return decide(plan, models, source, "")
    evidence = evidence_for(profile, ort, all_evidence(options.evidence_tables))
    why_none = (
        f"no load evidence measured for ORT {ort} with cuDNN {cudnn_version(profile)} "
        "(manifests/evidence/): nothing is pruned"
    )
    if evidence is not None and (mismatch := options_mismatch(evidence, options.cuda_options)):
        return decide(plan, models, None, mismatch)
    return decide(plan, models, TableSource(evidence) if evidence else None, why_none)


def measured_source(
    path: Path, cuda_options: Mapping[str, str], models: Sequence[ModelOps], profile: Profile
) -> MeasuredSource:
    """The app evidence file at `path` (--evidence), checked against this build: ConfigError
    naming every mismatch (a model changed, another ORT release or cuDNN, other CUDA EP
    options than the app declares)."""
    app = read_app_evidence(path)
    found = problems(app, models, profile_ort_release(profile) or "", cudnn_version(profile))
    if cuda_options and dict(cuda_options) != app.provider_options:
        found.append(
            f"{app.name} was measured with CUDA EP options {app.provider_options}, the app "
            f"declares {dict(cuda_options)}: measure again with its --cuda-option."
        )
    if found:
        raise ConfigError(f"--evidence {path}: " + " ".join(found))
    return MeasuredSource(app)


def _deploy(staged: Staged) -> BuildResult:
    """Decide against the lock file as it is now, then (unless --dry-run) place the files
    and write the lock last, so that the lock always describes complete files."""
    options, plan, placed, cache = staged.options, staged.plan, staged.placed, staged.cache
    profile, mode, out = staged.checked.profile, staged.checked.mode, staged.checked.out
    previous = read_lock(out / LOCK_NAME)
    sizes = {item.name: item.size for item in previous.files} if previous else {}
    deployment = plan_deployment(
        [p for p, _ in placed], out, sizes, options.link, options.force, options.clean
    )
    counters = Counters()
    hashes = placement_hashes(placed, out, previous, cache, counters)
    require_pins(placed, hashes)  # an EP pack's files against their manifest's SHA-256
    lock = with_gpu_code(_lock(plan, profile, mode, placed, hashes, options), placed, previous)
    packs = locked_packs(staged.checked.packs, placed, profile.name)
    lock = replace(with_pruning(lock, staged.pruning), eps=packs)
    lock = replace(lock, runtime_pack=runtime_pack(lock.files))
    if options.locked:
        require_as_locked(out / LOCK_NAME, previous, lock)
    result = BuildResult(out, plan, lock, deployment, counters, options.dry_run)
    result.settings = options.options.report()
    result.pruning = staged.pruning
    if options.dry_run:
        return result
    size = deployment.bytes_to_write
    bar = staged.progress(f"deploying into {out}", size) if size else None
    apply(deployment, counters, bar)
    write_lock(out / LOCK_NAME, lock)
    write_times(out, lock)
    return result


def _write_views(
    options: BuildOptions,
    out: Path,
    profile: Profile,
    app_name: str,
    result: BuildResult,
    progress: ProgressFactory,
    templates: Templates,
) -> None:
    """The SBOM, setup script, post-build files and archive: views of the written lock."""
    lock = result.lock
    if lock.doctor:
        write_doctor_data(lock, out)
    if options.sbom:
        write_sbom(out / SBOM_NAME, lock, profile, app_name)
    script = options.iss_path(out)
    if script is not None:
        packs = runtime_packs(options.cache_dir, lock_timeout=options.lock_timeout)
        result.iss = write_iss(templates, lock, out, script, options.installer.checked(), packs)
    if options.postbuild is not None:
        result.postbuild = write_postbuild(templates, lock, out, out, options.postbuild)
    if options.archive is not None:
        from bundler.ship.archive import write_archive

        total = sum(item.size for item in lock.files)
        packing = progress(f"packing {options.archive}", total)
        result.archive = write_archive(out, lock, options.archive, packing)


def placements(
    plan: Plan,
    profile: Profile,
    acquired: Sequence[Acquired],
    options: BuildOptions,
    out: Path,
) -> list[Placed]:
    """Every file the output folder must hold: the app (when --out is elsewhere), the bundled
    DLLs, the artifacts' licence files, and vc_redist.x64.exe in installer mode."""
    placed: list[Placed] = []
    if options.exe.parent.resolve() != out.resolve():
        app = plan.with_status(Status.APP)[0]
        placed.append((Placement(options.exe.name, options.exe, app.size or 0), Source("app", app)))
    placed += bundled_placements(plan)
    placed += licence_placements(plan, profile, acquired)
    if options.vc_redist is not None and plan.with_status(Status.REDIST):
        size = options.vc_redist.stat().st_size
        placed.append((Placement(VC_REDIST_NAME, options.vc_redist, size), Source("installer")))
    if options.doctor:
        placed.append(doctor_placement())
    return placed


def _lock(
    plan: Plan,
    profile: Profile,
    mode: str,
    placed: Sequence[Placed],
    hashes: dict[str, str],
    options: BuildOptions,
) -> Lock:
    files = locked_files(plan, placed, hashes)
    drivers = tuple(sorted(item.name for item in plan.with_status(Status.DRIVER)))
    app = plan.with_status(Status.APP)[0]
    return Lock(
        plan.profile,
        plan.architecture,
        mode,
        files,
        drivers,
        app=app.name,
        app_file_version=app.file_version,
        app_product_name=app.product_name,
        min_windows=plan.min_windows,
        vc_runtime_min=required_vc_runtime(plan),
        gpu_driver=profile.gpu_driver,
        cuda_ep=profile.cuda_ep,
        ort_version=profile_ort_release(profile),
        gpus=options.gpu_targets(profile),
        loads=load_order(plan) if options.doctor else (),
        doctor=options.doctor,
    )


def with_pruning(lock: Lock, pruning: Pruning | None) -> Lock:
    """The lock with the models and what was pruned for them."""
    if pruning is None:
        return lock
    models = tuple(LockedModel(m.path.name, m.sha256, tuple(sorted(m.ops))) for m in pruning.models)
    return replace(lock, models=models, pruned=pruning.pruned)
