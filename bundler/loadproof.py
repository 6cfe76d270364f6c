"""`bundle audit PATH --run`: the load proof. The real loader's verdict beside the audit's.

The audit is a model of the Windows loader; this module asks a real one and compares. Any
disagreement is itself a finding (BA5xx): either the model is wrong about this folder, or the
machine running the proof differs from a clean target in a way that matters.

What runs, and how (under Wine: not Windows, `wine` on PATH):
- The prefix: $WINEPREFIX when set (a prefix the user chose; created by `wineboot -i` if it
  does not exist yet), else a private 64-bit prefix `<cache dir>/wineprefix` (see
  bundler.cache.default_cache_dir), never ~/.wine silently. It is initialised once, under a
  file lock, with a progress note on stderr; Wine Mono and Gecko are not installed into it.
  Before the first run the prefix is warmed up (`wineboot`), so start-up costs are not
  charged to the app's time limit.
- The environment: WINEDEBUG=err+module, so the loader reports every unresolved import;
  WINEPATH is removed and the user's WINEDLLOVERRIDES replaced: the proof measures the folder,
  as the audit does, never an extra search path. Wine has builtins for the VC++ runtime that
  a clean Windows lacks, so every VC++ runtime DLL is forced native (`=n`) - not only the
  ones shipped: a forced name that is absent fails exactly as on Windows, which is the point
  (a missing vcruntime140_1.dll must be reported by the loader too). The one exception is a
  name the Plan marks as installed by vc_redist (--vc-runtime installer): Wine's builtin then
  plays the installed runtime. Other Wine builtins (msvcr120, d3dx9_43, ...) are left alone
  on purpose: forcing every name the audit expects from the folder would make the loader
  repeat the audit's own classification; left alone, a builtin that hides a missing DLL
  shows up as a disagreement (BA502).
- The runs, each with cwd = the folder and a time limit: every app exe of the Plan (status
  APP) with `app_args`; then every runtime root that is present - a DLL the Plan reaches by a
  runtime edge or as a profile root (the ORT providers, cuDNN's sub-libraries, NVRTC) - unless
  the static import closure of an exe or of a larger root already loads it. A root is loaded
  by Wine's `regsvr32 /s /n /i <full Windows path>`: it calls LoadLibraryExW(path,
  LOAD_WITH_ALTERED_SEARCH_PATH) exactly as ORT loads a provider (the DLL's own folder is
  searched first), then only looks up DllInstall; exit 4 means loaded (no DllInstall), 3 that
  LoadLibrary failed. A root that exports DllInstall is not loaded, since regsvr32 would run
  it. Measured with Wine 8 on the real GPU set: a complete onnxruntime_providers_cuda.dll
  gives exit 3 and no import line (its initialisation needs a GPU: error 998), the same DLL
  without cudnn64_9.dll gives the import_dll line for cudnn64_9.dll; every cuDNN sub-library
  and NVRTC loads (exit 4).
- On timeout the run's process group is killed, and for the private prefix its wineserver
  too (`wineserver -k`), so nothing started by the proof keeps running. A user's prefix keeps
  its server: other programs may be using it.

What the loader says: `import_dll` lines, "Library X (which is needed by Y) not found" and
"Loading library X (which is needed by Y) failed (error S)". Each name the loader could not
load is one of: absent (no file of that name in the folder: a root cause), unusable (in the
folder but refused on its own: wrong machine, not a PE image; a root cause too), a cascade
(in the folder, failed because something it imports failed) or a GPU driver DLL (the Plan
says the target's driver provides it; this machine has none).

Agreement: the loader's root causes against the DLLs the audit reports missing within the
static import closures of what the runs loaded (the exes and the roots). A root cause the
audit did not report is an error (BA501); a DLL the audit reports missing that the loader
loaded without complaint is a warning (BA502) - judged only from runs that finished, since a
stopped run's silence proves nothing.

On Windows (os.name == "nt") the exe is started directly (PATH reduced to the system folders,
error dialogs off) and each root is loaded by LoadLibraryExW in a Python subprocess. Windows
names no missing DLL, so there the comparison is per run: "a DLL was not found" against the
audit's expectation for that run. Python's own vcruntime140.dll is already mapped in that
subprocess, so VC++ runtime gaps are proven by the exe runs only. This path is small and not
tested here (the project's CI is Linux).

Act layer: runs programs; writes nothing but the private Wine prefix.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pefile

from bundler.audit import AuditReport, Suppression, suppress
from bundler.cache import default_cache_dir, file_lock
from bundler.errors import LoaderUnavailableError
from bundler.findings import Finding, finding, severity_rank
from bundler.pe import release_image
from bundler.plan import EdgeKind, Plan, Status
from bundler.profiles import dll_key
from bundler.vcruntime import VC_RUNTIME_DLLS

FINDING_CODES = ("BA501", "BA502")  # catalogue codes raised here, by running, not by a check
DEFAULT_TIMEOUT = 30.0  # seconds per run: imports resolve in the first second or two
PREPARE_TIMEOUT = 600.0  # wineboot of a new prefix: about 20 s warm, minutes on a cold disk
LOADER_DEBUG = "err+module"
PRIVATE_PREFIX = "wineprefix"  # under the cache dir
_READY_MARK = ".bundle-ready"  # written into a private prefix once wineboot -i succeeded
# regsvr32 exit codes (Wine's programs/regsvr32/regsvr32.h, as on Windows)
REGSVR32_LOAD_FAILED = 3
REGSVR32_LOADED = frozenset({0, 4, 5})  # DllInstall ran / is absent / failed: the DLL loaded
# NTSTATUS of a process that could not start, and LoadLibrary's error, for "not found"
STATUS_DLL_NOT_FOUND = 0xC0000135
ERROR_MOD_NOT_FOUND = 126

_IMPORT_LINE = re.compile(
    r":err:module:import_dll (?:Library (?P<dll>\S+) \(which is needed by L?\"(?P<by>.*?)\"\)"
    r" not found|Loading library (?P<dll2>\S+) \(which is needed by L?\"(?P<by2>.*?)\"\)"
    r" failed \(error (?P<status>[0-9a-fA-F]+)\))"
)
_WINDOWS_LOAD = (
    "import ctypes, sys\n"
    "kernel32 = ctypes.WinDLL('kernel32', use_last_error=True)\n"
    "kernel32.SetErrorMode(0x8003)\n"
    "kernel32.LoadLibraryExW.restype = ctypes.c_void_p\n"
    "handle = kernel32.LoadLibraryExW(sys.argv[1], None, 0x8)\n"  # ALTERED_SEARCH_PATH
    "sys.exit(0 if handle else ctypes.get_last_error())\n"
)

Note = Callable[[str], None]


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- what the loader said -------------------------------------------------------------------------


@dataclass(frozen=True)
class LoaderLine:
    """One import the loader could not resolve, as it reported it."""

    dll: str  # spelled as in the importer's import table
    importer: str  # file name of the module that imports it
    status: str | None  # None: "not found"; else the NTSTATUS it failed with, e.g. c000007b
    text: str  # the loader's line, verbatim


@dataclass(frozen=True)
class LoaderRun:
    """One program the proof ran: an app started, or a runtime root loaded."""

    target: str  # file name in the folder
    kind: str  # "app" (started) or "dll" (loaded)
    command: tuple[str, ...]
    exit_code: int | None  # None: still running at the time limit, stopped
    lines: tuple[LoaderLine, ...]
    names_known: bool  # the loader names what it could not load (Wine); Windows does not
    dependency_failed: bool  # a DLL it needs could not be loaded: Wine's lines, or Windows'
    # STATUS_DLL_NOT_FOUND (an exe) / ERROR_MOD_NOT_FOUND (a DLL)
    audit_missing: tuple[str, ...]  # what the audit says is missing in target's closure
    verdict: str

    @property
    def finished(self) -> bool:
        return self.exit_code is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kind": self.kind,
            "command": list(self.command),
            "exit_code": self.exit_code,
            "timed_out": not self.finished,
            "verdict": self.verdict,
            "loader_lines": [line.text for line in self.lines],
            "dependency_failed": self.dependency_failed,
            "audit_missing": list(self.audit_missing),
        }


@dataclass(frozen=True)
class LoadProof:
    """The runs and what they prove, set against the audit."""

    loader: str  # "wine" or "windows"
    loader_version: str
    prefix: str | None  # the Wine prefix used
    dll_overrides: str | None  # WINEDLLOVERRIDES of the runs
    runs: tuple[LoaderRun, ...]
    absent: tuple[str, ...]  # root causes: no file of that name in the folder
    unusable: tuple[str, ...]  # root causes: in the folder, refused by the loader on its own
    cascades: tuple[str, ...]  # in the folder, failed because of what they import
    driver: tuple[str, ...]  # GPU driver DLLs this machine lacks (the target must have them)
    audit_missing: tuple[str, ...]  # the audit's missing DLLs within the runs' closures
    loader_only: tuple[str, ...]  # root causes the audit did not report (BA501)
    audit_only: tuple[str, ...]  # reported by the audit, loaded by the loader (BA502)
    skipped: tuple[tuple[str, str], ...] = ()  # (root, why it was not loaded)

    @property
    def agrees(self) -> bool:
        return not (self.loader_only or self.audit_only or self.run_disagreements())

    def run_disagreements(self) -> tuple[LoaderRun, ...]:
        """Runs without names (Windows) whose verdict contradicts the audit's expectation."""
        return tuple(
            run
            for run in self.runs
            if not run.names_known
            and (
                (run.dependency_failed and not run.audit_missing)
                or (run.finished and not run.dependency_failed and run.audit_missing)
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "loader": self.loader,
            "loader_version": self.loader_version,
            "prefix": self.prefix,
            "dll_overrides": self.dll_overrides,
            "runs": [run.to_dict() for run in self.runs],
            "missing": {
                "absent": list(self.absent),
                "unusable": list(self.unusable),
                "cascades": list(self.cascades),
                "driver": list(self.driver),
            },
            "audit_missing": list(self.audit_missing),
            "agrees": self.agrees,
            "loader_only": list(self.loader_only),
            "audit_only": list(self.audit_only),
            "skipped": [{"file": name, "reason": why} for name, why in self.skipped],
        }

    def summary_lines(self) -> list[str]:
        """What the text table prints under the findings."""
        where = f", prefix {self.prefix}" if self.prefix else ""
        lines = [f"Load proof (--run) with {self.loader_version}{where}:"]
        lines += [f"  {run.target}: {run.verdict}" for run in self.runs]
        lines += [f"  {name}: not loaded, {why}" for name, why in self.skipped]
        found = [
            ("absent from the folder", self.absent),
            ("in the folder but refused", self.unusable),
            ("failed because of their imports", self.cascades),
            ("GPU driver, not on this machine (the target must have it)", self.driver),
        ]
        for label, names in found:
            if names:
                lines.append(f"  loader could not load, {label}: {', '.join(names)}")
        if self.agrees:
            confirmed = ", ".join((*self.absent, *self.unusable)) or "nothing missing"
            lines.append(f"  the loader agrees with the audit: {confirmed}")
        else:
            lines.append("  the loader DISAGREES with the audit: see BA501/BA502 above")
        if not all(run.finished for run in self.runs):
            lines.append("  (a run stopped at the time limit proves only what it reported)")
        return lines


def parse_lines(stderr: str) -> tuple[LoaderLine, ...]:
    """The loader's unresolved imports, in the order reported (the first of duplicates)."""
    found: dict[tuple[str, str], LoaderLine] = {}
    for text in stderr.splitlines():
        match = _IMPORT_LINE.search(text)
        if not match:
            continue
        dll = match["dll"] or match["dll2"]
        importer = _file_name(match["by"] if match["dll"] else match["by2"])
        line = LoaderLine(dll, importer, match["status"], text.strip())
        found.setdefault((dll_key(dll), dll_key(importer)), line)
    return tuple(found.values())


def _file_name(path: str) -> str:
    """The last component of a path as Wine prints it (backslashes doubled)."""
    return re.split(r"[\\/]+", path)[-1]


# --- deciding what to run and what it proves (no I/O) ---------------------------------------------


def app_exes(plan: Plan) -> list[str]:
    """The app exes the audit resolved (not an installer, not another machine's exe)."""
    return [
        item.name
        for key in plan.roots
        if (item := plan.file(key)) and item.status is Status.APP and key.endswith(".exe")
    ]


def runtime_roots(plan: Plan, exes: Iterable[str]) -> list[str]:
    """Present DLLs reached by a runtime edge or as a profile root, minus those the static
    closure of an exe or of a larger root already loads; largest closure first, so one load
    proves as much as it can."""
    covered: set[str] = set()
    for exe in exes:
        covered |= plan.import_closure(exe).keys()
    wanted = {EdgeKind.RUNTIME, EdgeKind.PROFILE_ROOT}
    candidates = {
        edge.child
        for edge in plan.edges
        if edge.kind in wanted
        and (item := plan.file(edge.child))
        and item.status is Status.BUNDLED
        and not edge.child.endswith(".exe")
    }
    closures = {key: plan.import_closure(key).keys() for key in candidates}
    chosen: list[str] = []
    for key in sorted(candidates, key=lambda key: (-len(closures[key]), key)):
        if key not in covered:
            chosen.append(_name(plan, key))
            covered |= closures[key]
    return chosen


def native_vc_runtime(plan: Plan) -> str | None:
    """WINEDLLOVERRIDES forcing the shipped (native) VC++ runtime: every VC++ runtime name but
    those the Plan says vc_redist installs."""
    redist = {item.key for item in plan.with_status(Status.REDIST)}
    names = sorted(key.removesuffix(".dll") for key in VC_RUNTIME_DLLS - redist)
    return f"{','.join(names)}=n" if names else None


def audit_missing(plan: Plan, target: str) -> tuple[str, ...]:
    """What the audit says is missing in `target`'s static import closure."""
    return tuple(
        sorted(
            (_name(plan, key) for key in plan.import_closure(target) if _missing(plan, key)),
            key=str.lower,
        )
    )


def _name(plan: Plan, key: str) -> str:
    item = plan.file(key)
    return item.name if item else key


def _missing(plan: Plan, key: str) -> bool:
    item = plan.file(key)
    return item is not None and item.status is Status.MISSING


def judge(
    plan: Plan,
    folder_names: Iterable[str],
    runs: Sequence[LoaderRun],
    *,
    loader: str,
    loader_version: str,
    prefix: str | None = None,
    dll_overrides: str | None = None,
    skipped: tuple[tuple[str, str], ...] = (),
) -> LoadProof:
    """Classify what the loader could not load (absent, unusable, cascade, driver) and set
    its root causes against what the audit reports missing for the same loads."""
    present = {dll_key(name) for name in folder_names}
    spelled: dict[str, str] = {}
    importers: set[str] = set()
    for run in runs:
        for line in run.lines:
            spelled.setdefault(dll_key(line.dll), line.dll)
            importers.add(dll_key(line.importer))
    driver = {key for key in spelled if (item := plan.file(key)) and item.status is Status.DRIVER}
    failed = set(spelled) - driver
    absent = failed - present
    cascades = failed & present & importers
    roots = failed - cascades
    named = [run for run in runs if run.names_known]
    expected_any = {dll_key(name) for run in named for name in run.audit_missing}
    expected_done = {dll_key(name) for run in named if run.finished for name in run.audit_missing}
    names = {**{key: _name(plan, key) for key in expected_any}, **spelled}

    def shown(keys: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted((names[key] for key in keys), key=str.lower))

    return LoadProof(
        loader=loader,
        loader_version=loader_version,
        prefix=prefix,
        dll_overrides=dll_overrides,
        skipped=skipped,
        runs=tuple(runs),
        absent=shown(absent),
        unusable=shown(roots - absent),
        cascades=shown(cascades),
        driver=shown(driver),
        audit_missing=shown(expected_any),
        loader_only=shown(roots - expected_any),
        audit_only=shown(expected_done - set(spelled)),
    )


def proof_findings(proof: LoadProof, plan: Plan) -> list[Finding]:
    """BA501 for what the loader could not load and the audit did not report, BA502 for what
    the audit reports missing and the loader loaded."""
    found: list[Finding] = []
    for name in proof.loader_only:
        item = plan.file(name)
        if item is not None and item.status in (Status.SYSTEM, Status.API_SET):
            why = "the audit counts it as part of Windows; this loader lacks it"
        elif item is not None and item.status is Status.BUNDLED:
            why = "the audit found the folder's copy usable"
        else:
            why = "the audit did not report it missing"
        message = f"the loader ({proof.loader}) could not load {name}: {why}"
        found.append(finding("BA501", (name,), message, _lines_naming(proof, name)))
    for name in proof.audit_only:
        message = (
            f"the audit reports {name} missing from the folder, but the loader ({proof.loader}) "
            "loaded it from elsewhere: it works on this machine and fails on a clean one"
        )
        found.append(finding("BA502", (name,), message))
    for run in proof.run_disagreements():
        if run.dependency_failed:
            message = (
                f"{proof.loader} could not {_verb(run)} {run.target}: a DLL it needs was not "
                "found, and the audit found its closure complete"
            )
            found.append(finding("BA501", (run.target,), message, (run.verdict,)))
        else:
            missing = ", ".join(run.audit_missing)
            message = (
                f"the audit reports {missing} missing for {run.target}, but {proof.loader} "
                f"could {_verb(run)} it: it found them outside the folder"
            )
            found.append(finding("BA502", run.audit_missing, message))
    return found


def _verb(run: LoaderRun) -> str:
    return "start" if run.kind == "app" else "load"


def _lines_naming(proof: LoadProof, name: str) -> tuple[str, ...]:
    key = dll_key(name)
    return tuple(line.text for run in proof.runs for line in run.lines if dll_key(line.dll) == key)


# --- running programs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    exit_code: int | None  # None: stopped at the time limit
    stdout: str
    stderr: str


def _run(command: Sequence[str], cwd: Path | None, env: dict[str, str], timeout: float) -> _Outcome:
    """Run with output to temporary files, not pipes: a process the run starts (Wine's
    services) may keep a pipe open long after the run itself ended. On timeout the whole
    process group is killed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=os.name != "nt",
        )
        try:
            code: int | None = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(process)
            code = None
        out.seek(0)
        err.seek(0)
        return _Outcome(code, _text(out.read()), _text(err.read()))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _kill(process: subprocess.Popen[bytes]) -> None:
    if os.name == "nt":
        process.kill()
    else:
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class WineLoader:
    """Wine in one prefix: prepares it, starts apps, loads DLLs, and cleans up after a run
    that ran out of time."""

    name = "wine"

    def __init__(self, prefix: Path, owned: bool, overrides: str | None, note: Note) -> None:
        self.prefix = prefix
        self.owned = owned  # the private prefix: bundle starts and stops its wineserver
        self.overrides = overrides
        self.note = note
        self.version = "wine"
        self._warm = False

    def env(self, debug: str = LOADER_DEBUG, overrides: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in {"WINEPATH", "WINEDLLOVERRIDES"}}
        env.update(WINEPREFIX=str(self.prefix), WINEDEBUG=debug)
        if self.owned:
            env["WINEARCH"] = "win64"
        if overrides:
            env["WINEDLLOVERRIDES"] = overrides
        return env

    def prepare(self) -> None:
        """Create the prefix if needed (once, under a lock), then warm it up."""
        version = _run(["wine", "--version"], None, self.env("-all"), PREPARE_TIMEOUT)
        self.version = version.stdout.strip() or "wine"
        if self.owned:
            self.prefix.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(self.prefix.with_name(self.prefix.name + ".lock"), "the Wine prefix"):
                if not (self.prefix / _READY_MARK).is_file():
                    self._initialise()
                    (self.prefix / _READY_MARK).write_text("wineboot -i done\n")
        elif not (self.prefix / "system.reg").is_file():
            self._initialise()
        self._warm_up()

    def _initialise(self) -> None:
        self.note(
            f"bundle: setting up the Wine prefix {self.prefix} for --run "
            "(once; this takes a minute)"
        )
        self._boot("-i")

    def _warm_up(self) -> None:
        if not self._warm:
            self._boot()
            self._warm = True

    def _boot(self, *args: str) -> None:
        """wineboot; Mono and Gecko stay out (their installers would want a screen)."""
        env = self.env("-all", "mscoree,mshtml=")
        done = _run(["wineboot", *args], None, env, PREPARE_TIMEOUT)
        if done.exit_code != 0:
            self._stop()
            what = "timed out" if done.exit_code is None else f"failed (exit {done.exit_code})"
            tail = " / ".join(done.stderr.strip().splitlines()[-3:])
            raise LoaderUnavailableError(
                f"{self.prefix}: wineboot {' '.join(args)} {what}: {tail or 'no output'}; "
                "check the Wine installation (wine --version), or remove the prefix folder "
                "to have it set up again."
            )

    def windows_path(self, folder: Path) -> str:
        done = _run(["winepath", "-w", str(folder)], folder, self.env("-all"), PREPARE_TIMEOUT)
        path = done.stdout.strip()
        if done.exit_code != 0 or not path:
            raise LoaderUnavailableError(
                f"{folder}: winepath could not map it into the Wine prefix {self.prefix}; "
                "make sure the prefix has a drive for it (Z: maps / by default)."
            )
        return path.rstrip("\\")

    def run(self, command: Sequence[str], cwd: Path, timeout: float) -> _Outcome:
        """One run with the loader's settings; past the time limit, the prefix is cleaned up."""
        self._warm_up()
        outcome = _run(command, cwd, self.env(overrides=self.overrides), timeout)
        if outcome.exit_code is None:
            self._stop()
        return outcome

    def _stop(self) -> None:
        """Kill the private prefix's wineserver and what still runs in it; a user's prefix
        keeps its server (only the run's own processes were killed)."""
        self._warm = False
        if self.owned and shutil.which("wineserver"):
            for flag in ("-k", "-w"):
                _run(["wineserver", flag], None, self.env("-all"), PREPARE_TIMEOUT)


def _wine_runs(
    loader: WineLoader, plan: Plan, folder: Path, app_args: Sequence[str], timeout: float
) -> tuple[list[LoaderRun], list[tuple[str, str]]]:
    loader.prepare()
    runs: list[LoaderRun] = []
    exes = app_exes(plan)
    for exe in exes:
        command = ("wine", str(folder / exe), *app_args)
        outcome = loader.run(command, folder, timeout)
        runs.append(_wine_run(plan, exe, "app", command, outcome, timeout))
    skipped: list[tuple[str, str]] = []
    roots = runtime_roots(plan, exes)
    windows_folder = loader.windows_path(folder) if roots else ""
    for root in roots:
        if _exports_dll_install(folder / root):
            skipped.append((root, "it exports DllInstall, which regsvr32 would run"))
            continue
        command = ("wine", "regsvr32", "/s", "/n", "/i", f"{windows_folder}\\{root}")
        outcome = loader.run(command, folder, timeout)
        runs.append(_wine_run(plan, root, "dll", command, outcome, timeout))
    return runs, skipped


def _wine_run(
    plan: Plan, target: str, kind: str, command: tuple[str, ...], outcome: _Outcome, limit: float
) -> LoaderRun:
    lines = parse_lines(outcome.stderr)
    missing = audit_missing(plan, target)
    verdict = _wine_verdict(kind, outcome.exit_code, lines, limit)
    return LoaderRun(
        target, kind, command, outcome.exit_code, lines, True, bool(lines), missing, verdict
    )


def _wine_verdict(kind: str, code: int | None, lines: Sequence[LoaderLine], limit: float) -> str:
    if lines:
        names = ", ".join(dict.fromkeys(line.dll for line in lines))
        return f"could not load: {names} (exit {code})"
    if code is None:
        return f"still running after {limit:g} s, stopped; no DLL reported missing by then"
    if kind == "app":
        return f"started, no DLL missing (exit {code})"
    if code in REGSVR32_LOADED:
        return "loaded"
    if code == REGSVR32_LOAD_FAILED:
        return "every import found; LoadLibrary failed in its initialisation (no GPU here?)"
    return f"regsvr32 exit {code}"


def _exports_dll_install(path: Path) -> bool:
    """Whether the DLL exports DllInstall (names only, the export directory alone)."""
    try:
        image = pefile.PE(str(path), fast_load=True)
    except (pefile.PEFormatError, OSError):
        return False
    try:
        image.parse_data_directories([pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"]])
        exports = getattr(image, "DIRECTORY_ENTRY_EXPORT", None)
        symbols = exports.symbols if exports is not None else []
        return any(symbol.name == b"DllInstall" for symbol in symbols)
    finally:
        release_image(image)


def _windows_runs(
    plan: Plan, folder: Path, app_args: Sequence[str], timeout: float
) -> list[LoaderRun]:
    """Windows: the exes directly, the roots by LoadLibraryExW in a Python subprocess."""
    root = os.environ.get("SYSTEMROOT", r"C:\Windows")
    env = {**os.environ, "PATH": rf"{root}\System32;{root};{root}\System32\Wbem"}
    if sys.platform == "win32":
        import ctypes

        ctypes.windll.kernel32.SetErrorMode(0x8003)  # no dialogs; inherited by the children
    runs: list[LoaderRun] = []
    exes = app_exes(plan)
    for exe in exes:
        command = (str(folder / exe), *app_args)
        outcome = _run(command, folder, env, timeout)
        not_found = outcome.exit_code is not None and (outcome.exit_code & 0xFFFFFFFF) == (
            STATUS_DLL_NOT_FOUND
        )
        runs.append(_windows_run(plan, exe, "app", command, outcome.exit_code, not_found))
    for dll in runtime_roots(plan, exes):
        command = (sys.executable, "-c", _WINDOWS_LOAD, str(folder / dll))
        outcome = _run(command, folder, env, timeout)
        not_found = outcome.exit_code == ERROR_MOD_NOT_FOUND
        runs.append(_windows_run(plan, dll, "dll", command, outcome.exit_code, not_found))
    return runs


def _windows_run(
    plan: Plan, target: str, kind: str, command: tuple[str, ...], code: int | None, lost: bool
) -> LoaderRun:
    if code is None:
        verdict = "still running at the time limit, stopped"
    elif lost:
        verdict = f"a DLL it needs was not found (exit {code:#x})"
    elif kind == "app":
        verdict = f"started (exit {code:#x})"
    else:
        verdict = "loaded" if code == 0 else f"LoadLibraryExW failed (error {code})"
    missing = audit_missing(plan, target)
    return LoaderRun(target, kind, command, code, (), False, lost, missing, verdict)


# --- the entry point ------------------------------------------------------------------------------


def prove_load(
    report: AuditReport,
    app_args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    *,
    ignore: Sequence[Suppression] = (),
    cache_dir: Path | None = None,
    note: Note = _to_stderr,
) -> AuditReport:
    """The report with the loader's verdict (`load_proof`) and the disagreements as findings
    (those matching an `ignore` rule go to `suppressed`). Raises LoaderUnavailableError where
    no Windows loader can run."""
    plan, folder = report.plan, report.folder.resolve()  # the runs use cwd = folder
    names = [entry.name for entry in os.scandir(folder) if entry.is_file()]
    if os.name == "nt":
        runs = _windows_runs(plan, folder, app_args, timeout)
        proof = judge(plan, names, runs, loader="windows", loader_version="Windows")
    else:
        loader = _wine_loader(plan, cache_dir, note)
        wine_runs, skipped = _wine_runs(loader, plan, folder, app_args, timeout)
        proof = judge(
            plan,
            names,
            wine_runs,
            loader="wine",
            loader_version=loader.version,
            prefix=str(loader.prefix),
            dll_overrides=loader.overrides,
            skipped=tuple(skipped),
        )
    kept, suppressed = suppress(proof_findings(proof, plan), ignore)
    findings = sorted(
        (*report.findings, *kept), key=lambda f: (severity_rank(f.severity), f.code, f.files)
    )
    return replace(
        report,
        findings=tuple(findings),
        suppressed=(*report.suppressed, *suppressed),
        load_proof=proof,
    )


def _wine_loader(plan: Plan, cache_dir: Path | None, note: Note) -> WineLoader:
    if shutil.which("wine") is None:
        raise LoaderUnavailableError(
            "bundle audit --run needs a Windows loader to start the app: Windows itself, or "
            "Wine here (no `wine` on PATH; e.g. apt-get install wine wine64); "
            "run the audit without --run, or on a machine that has one."
        )
    configured = os.environ.get("WINEPREFIX")
    if configured:
        return WineLoader(Path(configured), False, native_vc_runtime(plan), note)
    prefix = (cache_dir or default_cache_dir()) / PRIVATE_PREFIX
    return WineLoader(prefix, True, native_vc_runtime(plan), note)
