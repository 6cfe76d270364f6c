"""Decide layer: the catalogue of audit findings: one stable code per kind of problem, as data.

A code never changes meaning once released (CI suppressions and docs point at it); a new kind of
problem gets a new code. Every view of an audit (the table, --json, JUnit, HTML, the doctor) and
the docs' findings table read titles, severities and fixes from here: written once.

Code ranges: BA0xx the folder could not be read, BA1xx a DLL will fail to load, BA2xx builds or
versions that do not go together, BA3xx what should not ship, BA4xx the folder no longer matches
its lock, BA5xx the real loader disagrees (`audit --run`, bundler.audit.loadproof), BA6xx supply
chain (`audit --signatures`), BA7xx CUDA code and target GPUs, BA8xx found by bundle-doctor.exe.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """error: the app or a provider fails on the customer's machine; warning: wasted or risky,
    fails the audit only with --strict; info: worth knowing, never fails it."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SEVERITY_ORDER = (Severity.ERROR, Severity.WARNING, Severity.INFO)


@dataclass(frozen=True)
class Check:
    """One catalogue entry. `fix` is a template filled from a finding's `fields`."""

    code: str
    name: str  # a stable slug, e.g. "missing-dll", for people who prefer names to numbers
    severity: Severity
    title: str
    fix: str


@dataclass(frozen=True)
class Finding:
    """One problem found in one folder: the check's code and severity, the files involved
    (names relative to the folder, display spelling), a one-line message, a one-line fix, and
    detail lines (e.g. every chain that needs a missing DLL)."""

    code: str
    severity: Severity
    files: tuple[str, ...]
    message: str
    fix: str
    details: tuple[str, ...] = ()
    # Where the audit took a need it could not read in the folder (a DLL on the way is absent,
    # or a rule's pattern): "the lock file" and/or "the profile"; empty when nothing is inferred.
    inferred: tuple[str, ...] = ()

    @property
    def check(self) -> Check:
        return CATALOGUE[self.code]


_CHECKS = (
    Check(
        "BA001",
        "unreadable-file",
        Severity.ERROR,
        "A DLL or EXE in the folder cannot be read (corrupt, truncated, not a PE file)",
        "copy {file} again from its source (or rebuild the bundle)",
    ),
    Check(
        "BA101",
        "missing-dll",
        Severity.ERROR,
        "A DLL the loader needs at start-up is missing",
        "put {file} next to the app (bundle build does; bundle deps --why {file} shows the chain)",
    ),
    Check(
        "BA102",
        "missing-runtime-dll",
        Severity.ERROR,
        "A DLL loaded later (LoadLibrary, delay import) is missing: no import table shows it",
        "put {file} next to the app: it fails at the first operation that loads it",
    ),
    Check(
        "BA103",
        "provider-fails-126",
        Severity.ERROR,
        "An execution provider will fail with error 126 and ORT falls back to the CPU",
        "put the missing DLLs next to {file} (bundle build with the provider's profile)",
    ),
    Check(
        "BA104",
        "providers-shared-missing",
        Severity.ERROR,
        "onnxruntime_providers_shared.dll is missing: no execution provider DLL can load",
        "ship onnxruntime_providers_shared.dll from the same ORT release as onnxruntime.dll",
    ),
    Check(
        "BA105",
        "vc-runtime-part-missing",
        Severity.ERROR,
        "vcruntime140_1.dll or msvcp140_1.dll is missing (the often forgotten VC++ runtime parts)",
        "ship {file} from the same VC++ runtime as vcruntime140.dll, or use --vc-runtime installer",
    ),
    Check(
        "BA201",
        "cuda-version-mismatch",
        Severity.ERROR,
        "A CUDA or cuDNN DLL of another version than the one the provider was built for",
        "replace {file} with {wanted} (the profile's pinned CUDA/cuDNN artifacts)",
    ),
    Check(
        "BA202",
        "vc-runtime-too-old",
        Severity.ERROR,
        "The VC++ runtime is older than the newest MSVC linker among the binaries using it",
        "ship a VC++ runtime >= {needed} (the profile's msvc-runtime artifact), or use "
        "--vc-runtime installer",
    ),
    Check(
        "BA203",
        "cudnn-mixed-builds",
        Severity.ERROR,
        "cuDNN libraries from different builds (their file versions differ)",
        "ship every cuDNN DLL from one cuDNN release (the profile's cudnn artifact)",
    ),
    Check(
        "BA204",
        "debug-crt",
        Severity.ERROR,
        "A binary imports the debug C/C++ runtime, which is not redistributable",
        "rebuild {file} in Release (/MD, not /MDd)",
    ),
    Check(
        "BA205",
        "wrong-machine",
        Severity.ERROR,
        "A DLL or EXE is built for another machine type than the profile's",
        "replace {file} with its {architecture} build",
    ),
    Check(
        "BA206",
        "ep-ort-too-old",
        Severity.ERROR,
        "An execution-provider pack sits beside an ORT older than the pack's minimum: its "
        "factory refuses to register",
        "rebuild with a profile of ORT {minimum} or newer, or drop the pack {file}",
    ),
    Check(
        "BA207",
        "ort-release-mismatch",
        Severity.ERROR,
        "ORT DLLs of another release: onnxruntime.dll than the profile's, or a provider than ORT's",
        "ship {file} of ORT {release}, or audit with the folder's own profile (see the message)",
    ),
    Check(
        "BA301",
        "driver-dll-shipped",
        Severity.ERROR,
        "A GPU driver DLL is shipped: it must come from the installed driver, never the app",
        "remove {file} from the folder (the NVIDIA driver installs it in System32)",
    ),
    Check(
        "BA302",
        "os-component-shipped",
        Severity.WARNING,
        "An API-set, UCRT or KnownDLL copy is shipped: Windows never loads it from the app folder",
        "remove {file} from the folder (Windows 10 and later provide it)",
    ),
    Check(
        "BA303",
        "unreferenced-dll",
        Severity.WARNING,
        "A DLL nothing references (not the app, the profile's roots or runtime rules)",
        "remove {file}, or audit with the profile that uses it",
    ),
    Check(
        "BA304",
        "case-clash",
        Severity.ERROR,
        "Two files whose names differ only by case: on Windows one overwrites the other",
        "keep one of {file}",
    ),
    Check(
        "BA305",
        "system32-shadowing",
        Severity.INFO,
        "A shipped DLL that some Windows builds also carry in System32 (another version)",
        "load {file} from the app folder: import it from the exe beside it, or LoadLibraryExW "
        "it by full path before anything else loads it; never rely on PATH",
    ),
    Check(
        "BA401",
        "hash-mismatch",
        Severity.ERROR,
        "A file's SHA-256 no longer matches bundle.lock.json",
        "rebuild the bundle, or restore {file} from its pinned source",
    ),
    Check(
        "BA402",
        "file-removed",
        Severity.ERROR,
        "A file listed in bundle.lock.json is absent",
        "restore {file} (bundle build puts it back)",
    ),
    Check(
        "BA403",
        "file-added",
        Severity.WARNING,
        "A DLL or EXE that bundle.lock.json does not list was added after the build",
        "remove {file}, or rebuild so the lock file describes it",
    ),
    Check(
        "BA404",
        "file-changed",
        Severity.WARNING,
        "A file's time stamp differs from the one the build left (bundle.times.json; its "
        "bytes are hashed only with --verify)",
        "audit with --verify to check {file}'s hash (copy bundles with their times kept: "
        "xcopy, robocopy, cp -p)",
    ),
    Check(
        "BA405",
        "ep-pack-left-out",
        Severity.INFO,
        "An execution-provider pack of the lock was left out by the setup: its component was "
        "not selected (bundle-installed.txt does not list it)",
        "nothing to do unless this machine should use it: then run the setup again and select "
        "the pack",
    ),
    Check(
        "BA406",
        "runtime-pack-mismatch",
        Severity.ERROR,
        "The installed runtime pack is not the lock's (bundle-pack.txt names another pack)",
        "install the app's setup again: it replaces the pack with the one its lock names",
    ),
    Check(
        "BA501",
        "loader-missing-unreported",
        Severity.ERROR,
        "The real loader (--run) could not load a DLL that the audit did not report missing",
        "ship {file} next to the app unless Windows provides it; if it does, this loader lacks it "
        "(Wine does not implement every Windows DLL): prove the load on Windows",
    ),
    Check(
        "BA502",
        "loader-found-elsewhere",
        Severity.WARNING,
        "The audit reports a DLL missing that the real loader (--run) found outside the folder",
        "ship {file} next to the app: this machine has it (a Wine builtin, System32, an installed "
        "runtime), a clean target does not",
    ),
    Check(
        "BA503",
        "app-failed",
        Severity.ERROR,
        "The app started with every DLL it imports, then exited with a failure code (--run)",
        "run {file} by hand to see why it fails (with --run-arg for the arguments it needs)",
    ),
    Check(
        "BA601",
        "signature-invalid",
        Severity.ERROR,
        "A signed DLL whose Authenticode signature no longer verifies (changed after signing)",
        "restore {file} from its pinned source (bundle build puts it back); never patch a signed "
        "vendor DLL",
    ),
    Check(
        "BA602",
        "signature-missing",
        Severity.WARNING,
        "An unsigned DLL under a name whose vendor signs it (the profile's pinned build is signed)",
        "replace {file} with the vendor's signed build from the profile's pinned source",
    ),
    Check(
        "BA701",
        "gpu-unserved",
        Severity.ERROR,
        "A GPU the bundle targets (or the machine has) for which a DLL carries neither SASS "
        "for its compute capability nor PTX the driver can compile for it",
        "use an ORT build whose CUDA code covers {gpu} (bundle audit lists what each DLL carries), "
        "or drop {gpu} from the targets",
    ),
    Check(
        "BA702",
        "gpu-jit-only",
        Severity.WARNING,
        "A GPU the bundle serves only through PTX compiled by the driver at first use (a slow "
        "first start; the driver's JIT cache keeps the result)",
        "expect a slow first start on {gpu}; raise CUDA_CACHE_MAXSIZE if the JIT cache is evicted, "
        "or use an ORT build with SASS for {gpu}",
    ),
    Check(
        "BA801",
        "no-driver",
        Severity.ERROR,
        "No NVIDIA driver: nvcuda.dll is not installed (bundle-doctor on the target)",
        "install an NVIDIA driver of version {min_version} or newer",
    ),
    Check(
        "BA802",
        "driver-too-old",
        Severity.ERROR,
        "The NVIDIA driver is older than the bundle's CUDA release needs (bundle-doctor)",
        "update the NVIDIA driver to {min_version} or newer",
    ),
    Check(
        "BA803",
        "no-gpu",
        Severity.ERROR,
        "The NVIDIA driver reports no usable GPU (bundle-doctor)",
        "check the GPU in Device Manager; the app can only use the CPU here",
    ),
    Check(
        "BA804",
        "shadowed-dll",
        Severity.WARNING,
        "A DLL of the bundle also exists in System32, KnownDLLs or on PATH in another version "
        "(bundle-doctor)",
        "remove or update the other copy of {file}, or check that the app loads its own",
    ),
    Check(
        "BA805",
        "target-vc-runtime-too-old",
        Severity.ERROR,
        "The VC++ runtime on the target is older than the bundle's binaries need (bundle-doctor)",
        "install the current VC++ redistributable (vc_redist.x64.exe)",
    ),
    Check(
        "BA806",
        "load-failed",
        Severity.ERROR,
        "A DLL of the bundle fails to load by its full path on the target (bundle-doctor)",
        "restore the file the message names (bundle build puts it back), then run the doctor again",
    ),
    Check(
        "BA807",
        "ort-version-mismatch",
        Severity.ERROR,
        "The ONNX Runtime that loads is not the release the bundle was built with (bundle-doctor)",
        "remove the other onnxruntime.dll the message names, or restore the bundle's copy",
    ),
    Check(
        "BA808",
        "pruned-dll-shadowed",
        Severity.WARNING,
        "A DLL the bundle left out for its models is on PATH or in System32 (bundle-doctor)",
        "if the app may load it after all, rebuild without --model; else remove that copy "
        "from PATH, since a foreign cuDNN sub-library mixes versions",
    ),
    Check(
        "BA811",
        "ep-pack-usable",
        Severity.INFO,
        "An execution-provider pack of the bundle can run on this machine (bundle-doctor)",
        "nothing to do: the app can register {file}",
    ),
    Check(
        "BA812",
        "ep-pack-unusable",
        Severity.WARNING,
        "An execution-provider pack of the bundle has no device it can run on here (bundle-doctor)",
        "the app falls back to another execution provider; the message names what the pack "
        "needs (docs/ep-packs.md)",
    ),
    Check(
        "BA813",
        "ep-pack-not-installed",
        Severity.INFO,
        "An execution-provider pack of the bundle was not installed: its setup component was "
        "not selected (bundle-doctor)",
        "run the setup again and select the pack's component if this machine should use it",
    ),
)

CATALOGUE: dict[str, Check] = {check.code: check for check in _CHECKS}
# BA8xx: found only on the target machine, by bundle-doctor.exe (doctor/); no check in the audit.
DOCTOR_CODES = tuple(code for code in CATALOGUE if code.startswith("BA8"))


def finding(
    code: str,
    files: tuple[str, ...],
    message: str,
    details: tuple[str, ...] = (),
    inferred: tuple[str, ...] = (),
    **fields: str,
) -> Finding:
    """A finding of catalogue entry `code`; the fix template gets `file` (the files, joined,
    unless given) and any other `fields`."""
    check = CATALOGUE[code]
    fix = check.fix.format_map({"file": ", ".join(files), **fields})
    return Finding(code, check.severity, files, message, fix, details, inferred)


def severity_rank(severity: Severity) -> int:
    return SEVERITY_ORDER.index(severity)
