"""Decide layer: the one error hierarchy of `bundle`, and the exit-code table a CI job can gate on.

Library code raises these; only the CLI turns them into a message and an exit code.
Every message says what failed, which file or name, and what to do about it.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented exit codes (README, "Exit codes"). Never renumber: pipelines depend on them."""

    OK = 0
    INTERNAL = 1  # a bug in bundle: please report it with --debug output
    USAGE = 2  # bad command line (typer/click use 2 as well)
    MISSING = 3  # the closure is incomplete: at least one DLL could not be found
    INPUT = 4  # an input file is absent, unreadable, not a PE file, truncated or corrupt
    MACHINE = 5  # an input file is built for another machine type than the profile
    PROFILE = 6  # unknown profile, or a manifest in manifests/ is invalid
    PLAN = 7  # a plan document cannot be read (wrong schema_version, invalid JSON)
    FETCH = 8  # an artifact could not be acquired (unreachable, HTTP error, timeout, offline)
    INTEGRITY = 9  # a download or cached file does not match its pinned hash or size
    ARCHIVE = 10  # an archive is corrupt or unsafe (absolute path, "..", symlink, size lie)
    VC_RUNTIME = 11  # the VC++ runtime available is older than a bundled binary needs
    CONFLICT = 12  # a different file the user put there would be overwritten (use --force)
    LOCKED = 13  # --locked: the result would differ from bundle.lock.json
    CONFIG = 14  # bundle.toml is invalid, or the command line lacks what it needs
    OUTPUT = 15  # the output folder, an output file or the cache cannot be written
    SDK = 16  # ORT's C/C++ SDK (headers, import library) is not available: no release zip
    AUDIT_ERRORS = 17  # bundle audit: at least one finding of severity error
    AUDIT_WARNINGS = 18  # bundle audit --strict: warnings, and no errors
    NO_LOADER = 19  # bundle audit --run: no Windows loader here (neither Windows nor Wine)
    BUSY = 20  # another bundle process held a lock longer than $BUNDLE_LOCK_TIMEOUT
    BUILD_MISMATCH = 21  # a profile or flavour does not fit the ORT build (CUDA major, imports)
    DOCTOR_DATA = 22  # bundle-doctor.exe: its data file is missing, truncated or edited
    MEASURE_FAILED = 23  # bundle measure: a model failed, crashed, timed out or left the provider
    CATALOGUE_BEHIND = 24  # bundle profiles outdated: the index has releases no profile covers
    EP_ORT_TOO_OLD = 25  # an execution-provider pack (--ep) needs a newer ORT than the profile's
    VERIFY_FAILED = 26  # bundle verify: a file, subject or dependency differs from the release


class BundleError(Exception):
    """Base class: a failure the user can act on. `exit_code` is its row in ExitCode."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputFileError(BundleError):
    """An input file is missing, unreadable or not a valid PE image."""

    exit_code = ExitCode.INPUT


class BuildMismatchError(BundleError):
    """A flavour or profile does not fit the ORT build it is for: another CUDA major than the
    build's version_info says, or pinned DLLs under other names than the DLLs import."""

    exit_code = ExitCode.BUILD_MISMATCH


class MachineMismatchError(BundleError):
    """A root file is built for another machine type than the target profile."""

    exit_code = ExitCode.MACHINE


class ProfileError(BundleError):
    """A profile name is unknown, or a manifest fails validation."""

    exit_code = ExitCode.PROFILE


class PlanFormatError(BundleError):
    """A plan document cannot be loaded."""

    exit_code = ExitCode.PLAN


class MissingDependenciesError(BundleError):
    """The resolved closure has DLLs that no search folder provides."""

    exit_code = ExitCode.MISSING


class FetchError(BundleError):
    """A download failed, or no allowed source could provide an artifact."""

    exit_code = ExitCode.FETCH


class IntegrityError(BundleError):
    """Bytes that do not match their pin: wrong SHA-256/SHA-512 or size."""

    exit_code = ExitCode.INTEGRITY


class ArchiveError(BundleError):
    """An archive that is corrupt, or unsafe to extract."""

    exit_code = ExitCode.ARCHIVE


class VcRuntimeError(BundleError):
    """The VC++ runtime DLLs are older than the newest MSVC linker among the binaries."""

    exit_code = ExitCode.VC_RUNTIME


class ConflictError(BundleError):
    """Deploying would overwrite a file bundle did not write."""

    exit_code = ExitCode.CONFLICT


class LockMismatchError(BundleError):
    """The build result differs from the committed lock file."""

    exit_code = ExitCode.LOCKED


class ConfigError(BundleError):
    """bundle.toml or the options are invalid or incomplete."""

    exit_code = ExitCode.CONFIG


class OutputError(BundleError):
    """A rendered file or archive cannot be written where it was asked for."""

    exit_code = ExitCode.OUTPUT


class FileInUseError(OutputError):
    """Windows kept refusing to replace or remove a file: another program holds it open (the
    app that loads the DLL, a debugger, a service). The message names the file."""


class SdkMissingError(BundleError):
    """The C/C++ headers and import libraries are needed, and no source that has them (ORT's
    release zip) could provide them: the PyPI wheels carry only the DLLs."""

    exit_code = ExitCode.SDK


class LoaderUnavailableError(BundleError):
    """`bundle audit --run` needs a real Windows loader: Windows itself, or Wine (with a
    usable prefix) elsewhere."""

    exit_code = ExitCode.NO_LOADER


class BusyError(BundleError):
    """Another bundle process held a cache or output-folder lock past $BUNDLE_LOCK_TIMEOUT."""

    exit_code = ExitCode.BUSY


class MeasurementError(BundleError):
    """`bundle measure`: a model did not run as asked: its session fell back to another
    provider, a node ran on another provider, it raised, crashed or timed out. No evidence file
    is written: what the machine measured is no evidence for the provider asked for."""

    exit_code = ExitCode.MEASURE_FAILED


class EpOrtTooOldError(BundleError):
    """An execution-provider pack was asked for beside an ORT release older than the oldest its
    factory accepts (the pack's min_ort): ORT would refuse to register it on the target."""

    exit_code = ExitCode.EP_ORT_TOO_OLD


class EpPairFailedError(EpOrtTooOldError):
    """An execution-provider pack was asked for beside a profile whose onnxruntime.dll refused
    it, or crashed, when the pack x core proof registered the two under Wine
    (manifests/ep-matrix.toml): the target would fail the same way."""


class VerifyError(BundleError):
    """`bundle verify`: a downloaded file's SHA-256 differs from SHA256SUMS, the provenance
    statement's subjects differ from SHA256SUMS, or its dependencies from the lock's pins. The
    message names the file, the subject or the artifact."""

    exit_code = ExitCode.VERIFY_FAILED
