"""Decide layer: `bundle audit PATH --run`: the load proof. The real loader's verdict beside the
audit's.

The audit is a model of the Windows loader; the load proof asks a real one and compares. Any
disagreement is itself a finding (BA5xx): either the model is wrong about this folder, or the
machine running the proof differs from a clean target in a way that matters. This module
decides what to run and what the runs prove; bundler.audit.loadrun runs them.

What runs: every app exe of the Plan (status APP); then every runtime root that is present - a
DLL the Plan reaches by a runtime edge or as a profile root (the ORT providers, cuDNN's
sub-libraries, NVRTC) - unless the static import closure of an exe or of a larger root already
loads it.

The VC++ runtime under Wine: Wine has builtins for the VC++ runtime that a clean Windows lacks,
so every VC++ runtime DLL is forced native (`=n`) - not only the ones shipped: a forced name
that is absent fails exactly as on Windows, which is the point (a missing vcruntime140_1.dll
must be reported by the loader too). The one exception is a name the Plan marks as installed by
vc_redist (--vc-runtime installer): Wine's builtin then plays the installed runtime. Other Wine
builtins (msvcr120, d3dx9_43, ...) are left alone on purpose: forcing every name the audit
expects from the folder would make the loader repeat the audit's own classification; left
alone, a builtin that hides a missing DLL shows up as a disagreement (BA502).

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

Windows names no missing DLL, so there the comparison is per run: "a DLL was not found"
against the audit's expectation for that run.

Decide layer: pure functions over the Plan and the runs bundler.audit.loadrun made, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bundler.audit.loader_output import LoaderRun, hex_code
from bundler.closure.lock import DOCTOR_EXE
from bundler.closure.plan import EdgeKind, Plan, Status
from bundler.closure.vcruntime import VC_RUNTIME_DLLS
from bundler.findings import Finding, finding
from bundler.target.profiles import dll_key

# Catalogue codes raised here, by running, not by a check.
FINDING_CODES = ("BA501", "BA502", "BA503")


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
    # bundle-doctor.exe's --json report, run by the same loader when the bundle ships one
    doctor: dict[str, Any] | None = None

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
            "doctor": self.doctor,
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
        return lines + doctor_lines(self.doctor)


def doctor_lines(document: dict[str, Any] | None) -> list[str]:
    """The doctor's verdict under the load proof: its exit code and each finding in a line.
    Its findings describe this machine (no NVIDIA driver under Wine, for one), not the
    bundle: they are shown, never counted."""
    if document is None:
        return []
    if "error" in document:
        return [f"  {DOCTOR_EXE}: {document['error']}"]
    lines = [f"  {DOCTOR_EXE} (this machine, not counted): exit {document.get('exit_code')}"]
    for item in document.get("findings", []):
        lines.append(f"    {item.get('code')} {item.get('name')}: {item.get('message')}")
    return lines


# --- deciding what to run and what it proves (no I/O) ---------------------------------------------


def app_exes(plan: Plan) -> list[str]:
    """The app exes the audit resolved (not an installer, not another machine's exe, not
    bundle-doctor.exe: the doctor runs on its own, with --json)."""
    return [
        item.name
        for key in plan.roots
        if (item := plan.file(key))
        and item.status is Status.APP
        and key.endswith(".exe")
        and key != DOCTOR_EXE
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
    for run in proof.runs:
        if run.app_failed:
            message = (
                f"{run.target} started, then FAILED with exit code {run.exit_code} "
                f"({hex_code(run.exit_code)}): its DLLs loaded, the app itself reported an error"
            )
            found.append(finding("BA503", (run.target,), message, (run.verdict,)))
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
