"""Act layer: `bundle audit PATH --run`: running the load proof, under Wine or on Windows.

bundler.audit.loadproof decides what to run and what the runs prove; this module runs the programs
and returns the audit report with the loader's verdict and its findings (prove_load).

How it runs (under Wine: not Windows, `wine` on PATH):
- The prefix: $WINEPREFIX when set (a prefix the user chose; created by `wineboot -i` if it
  does not exist yet), else a private 64-bit prefix `<cache dir>/wineprefix` (prove_load's
  `cache_dir`, the command's; without one the platform's cache folder), never ~/.wine silently.
  It is initialised once, under a file lock, with a progress note on stderr; Wine Mono and Gecko
  are not installed into it. Before the first run the prefix is warmed up (`wineboot`), so
  start-up costs are not charged to the app's time limit.
- The environment: WINEDEBUG=err+module, so the loader reports every unresolved import;
  WINEPATH is removed and the user's WINEDLLOVERRIDES replaced by the VC++ runtime overrides
  bundler.audit.loadproof decides (native_vc_runtime): the proof measures the folder, as the audit
  does, never an extra search path.
- The runs, each with cwd = the folder and a time limit: every app exe with `app_args`, then
  every runtime root (bundler.audit.loadproof's app_exes and runtime_roots). A root is loaded by
  Wine's `regsvr32 /s /n /i <full Windows path>`: it calls LoadLibraryExW(path,
  LOAD_WITH_ALTERED_SEARCH_PATH) exactly as ORT loads a provider (the DLL's own folder is
  searched first), then only looks up DllInstall; exit 4 means loaded (no DllInstall), 3 that
  LoadLibrary failed. A root that exports DllInstall is not loaded, since regsvr32 would run
  it. Measured with Wine 8 on the real GPU set: a complete onnxruntime_providers_cuda.dll
  gives exit 3 and no import line (its initialisation needs a GPU: error 998), the same DLL
  without cudnn64_9.dll gives the import_dll line for cudnn64_9.dll; every cuDNN sub-library
  and NVRTC loads (exit 4).
- On timeout the run's whole process tree is killed (bundler.audit.programs: the process group
  on Linux, a job object on Windows), and for the private prefix its wineserver
  too (`wineserver -k`), so nothing started by the proof keeps running. A user's prefix keeps
  its server: other programs may be using it.

On Windows (os.name == "nt") the exe is started directly (PATH reduced to the system folders,
error dialogs off) and each root is loaded by LoadLibraryExW in a Python subprocess. Python's
own vcruntime140.dll is already mapped in that subprocess, so VC++ runtime gaps are proven by
the exe runs only. The tests' Windows tier runs this path under the official CPython for Windows
(docs/windows.md).

Act layer: runs programs; writes nothing but the private Wine prefix.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pefile

from bundler.audit.loader_output import LoaderLine, LoaderRun, app_verdict, parse_lines
from bundler.audit.loadproof import (
    app_exes,
    audit_missing,
    judge,
    native_vc_runtime,
    proof_findings,
    runtime_roots,
)
from bundler.audit.programs import Outcome
from bundler.audit.programs import run as run_program
from bundler.audit.report import AuditReport
from bundler.audit.suppressions import Suppression, suppress
from bundler.binary.pe import release_image
from bundler.closure.lock import DOCTOR_DATA, DOCTOR_EXE
from bundler.closure.plan import Plan
from bundler.config.cache_root import platform_cache_dir
from bundler.config.environment import child_environment, system_root, wine_prefix
from bundler.disk.process_locks import file_lock
from bundler.errors import LoaderUnavailableError
from bundler.findings import severity_rank
from bundler.reporter import SILENT, Note

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

_WINDOWS_LOAD = (
    "import ctypes, sys\n"
    "kernel32 = ctypes.WinDLL('kernel32', use_last_error=True)\n"
    "kernel32.SetErrorMode(0x8003)\n"
    "kernel32.LoadLibraryExW.restype = ctypes.c_void_p\n"
    "handle = kernel32.LoadLibraryExW(sys.argv[1], None, 0x8)\n"  # ALTERED_SEARCH_PATH
    "sys.exit(0 if handle else ctypes.get_last_error())\n"
)


class WineLoader:
    """Wine in one prefix: prepares it, starts apps, loads DLLs, and cleans up after a run
    that ran out of time."""

    name = "wine"

    def __init__(
        self, prefix: Path, owned: bool, overrides: str | None, note: Note, wait: float | None
    ) -> None:
        self.prefix = prefix
        self.wait = wait  # for another process's set-up of the prefix: $BUNDLE_LOCK_TIMEOUT
        self.owned = owned  # the private prefix: bundle starts and stops its wineserver
        self.overrides = overrides
        self.note = note
        self.version = "wine"
        self._warm = False

    def env(self, debug: str = LOADER_DEBUG, overrides: str | None = None) -> dict[str, str]:
        env = child_environment(drop=("WINEPATH", "WINEDLLOVERRIDES"))
        env.update(WINEPREFIX=str(self.prefix), WINEDEBUG=debug)
        if self.owned:
            env["WINEARCH"] = "win64"
        if overrides:
            env["WINEDLLOVERRIDES"] = overrides
        return env

    def prepare(self) -> None:
        """Create the prefix if needed (once, under a lock), then warm it up."""
        version = run_program(["wine", "--version"], None, self.env("-all"), PREPARE_TIMEOUT)
        self.version = version.stdout.strip() or "wine"
        if self.owned:
            self.prefix.parent.mkdir(parents=True, exist_ok=True)
            lock = self.prefix.with_name(self.prefix.name + ".lock")
            with file_lock(lock, "the Wine prefix", self.note, limit=self.wait):
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
        done = run_program(["wineboot", *args], None, env, PREPARE_TIMEOUT)
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
        done = run_program(
            ["winepath", "-w", str(folder)], folder, self.env("-all"), PREPARE_TIMEOUT
        )
        path = done.stdout.strip()
        if done.exit_code != 0 or not path:
            raise LoaderUnavailableError(
                f"{folder}: winepath could not map it into the Wine prefix {self.prefix}; "
                "make sure the prefix has a drive for it (Z: maps / by default)."
            )
        return path.rstrip("\\")

    def run(self, command: Sequence[str], cwd: Path, timeout: float) -> Outcome:
        """One run with the loader's settings; past the time limit, the prefix is cleaned up."""
        self._warm_up()
        outcome = run_program(command, cwd, self.env(overrides=self.overrides), timeout)
        if outcome.exit_code is None:
            self._stop()
        return outcome

    def _stop(self) -> None:
        """Kill the private prefix's wineserver and what still runs in it; a user's prefix
        keeps its server (only the run's own processes were killed)."""
        self._warm = False
        if self.owned and shutil.which("wineserver"):
            for flag in ("-k", "-w"):
                run_program(["wineserver", flag], None, self.env("-all"), PREPARE_TIMEOUT)


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
    plan: Plan, target: str, kind: str, command: tuple[str, ...], outcome: Outcome, limit: float
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
        return app_verdict(code)
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
    root = system_root()
    env = child_environment(PATH=rf"{root}\System32;{root};{root}\System32\Wbem")
    if sys.platform == "win32":
        import ctypes

        ctypes.windll.kernel32.SetErrorMode(0x8003)  # no dialogs; inherited by the children
    runs: list[LoaderRun] = []
    exes = app_exes(plan)
    for exe in exes:
        command = (str(folder / exe), *app_args)
        outcome = run_program(command, folder, env, timeout)
        not_found = outcome.exit_code is not None and (outcome.exit_code & 0xFFFFFFFF) == (
            STATUS_DLL_NOT_FOUND
        )
        runs.append(_windows_run(plan, exe, "app", command, outcome.exit_code, not_found))
    for dll in runtime_roots(plan, exes):
        command = (sys.executable, "-c", _WINDOWS_LOAD, str(folder / dll))
        outcome = run_program(command, folder, env, timeout)
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
        verdict = app_verdict(code)
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
    note: Note = SILENT.note,
    lock_timeout: float | None = None,
) -> AuditReport:
    """The report with the loader's verdict (`load_proof`) and the disagreements as findings
    (those matching an `ignore` rule go to `suppressed`). Raises LoaderUnavailableError where
    no Windows loader can run. `lock_timeout`: how long to wait for another process setting up
    the private Wine prefix (the command's $BUNDLE_LOCK_TIMEOUT; None: as long as it takes)."""
    plan, folder = report.plan, report.folder.resolve()  # the runs use cwd = folder
    names = [entry.name for entry in os.scandir(folder) if entry.is_file()]
    if os.name == "nt":
        runs = _windows_runs(plan, folder, app_args, timeout)
        proof = judge(plan, names, runs, loader="windows", loader_version="Windows")
        doctor = _doctor(
            folder,
            names,
            lambda command: run_program(command, folder, child_environment(), timeout),
        )
    else:
        loader = _wine_loader(plan, cache_dir, note, lock_timeout)
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
        doctor = _doctor(
            folder, names, lambda command: loader.run(("wine", *command), folder, timeout)
        )
    proof = replace(proof, doctor=doctor)
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


def _doctor(
    folder: Path, names: Sequence[str], run: Callable[[tuple[str, ...]], Outcome]
) -> dict[str, Any] | None:
    """bundle-doctor.exe --json, when the bundle ships it with its data file: its report, or
    {"error": ...} when it gave none."""
    if DOCTOR_EXE not in names or DOCTOR_DATA not in names:
        return None
    outcome = run((str(folder / DOCTOR_EXE), "--json"))
    try:
        document = json.loads(outcome.stdout)
    except ValueError:
        last = (outcome.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"no report (exit {outcome.exit_code}): {last}"}
    return document if isinstance(document, dict) else {"error": "its report is not an object"}


def _wine_loader(plan: Plan, cache_dir: Path | None, note: Note, wait: float | None) -> WineLoader:
    if shutil.which("wine") is None:
        raise LoaderUnavailableError(
            "bundle audit --run needs a Windows loader to start the app: Windows itself, or "
            "Wine here (no `wine` on PATH; e.g. apt-get install wine wine64); "
            "run the audit without --run, or on a machine that has one."
        )
    configured = wine_prefix()
    if configured is not None:
        return WineLoader(configured, False, native_vc_runtime(plan), note, wait)
    prefix = (cache_dir or platform_cache_dir()) / PRIVATE_PREFIX
    return WineLoader(prefix, True, native_vc_runtime(plan), note, wait)
