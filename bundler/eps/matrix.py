"""Read layer: the EP pack x core proof (manifests/ep-matrix.toml, issue 40): for each profile and
each pack, what happened when an app registered the pack with that profile's onnxruntime.dll
under Wine. Written by `python -m tools.evidence.ep_matrix` (run outside CI: it fetches every
core); tests/test_ep_matrix_data.py holds it against the catalogue, and the build acts on it
(bundler.eps.choice): a pair recorded as refused or crashed is refused (exit 25), a pair not
run yet is noted.

Only the registration's outcome is recorded, never what the host offers (devices, adapters):
  registered  RegisterExecutionProviderLibrary returned no error
  refused     it returned ORT's (or the pack's) error message, kept in `message`
  crashed     the process ended without a verdict; `message` holds its exit status
  not-run     no run yet; `message` says why
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundler.errors import ProfileError
from bundler.target import resources
from bundler.target.manifest import Table, load_toml

OUTCOMES = ("registered", "refused", "crashed", "not-run")
FAILED = ("refused", "crashed")


@dataclass(frozen=True)
class PairProof:
    """One pack registered with one profile's core."""

    profile: str
    pack: str
    outcome: str  # one of OUTCOMES
    ort: str = ""  # the version the core reported when it ran ("" for not-run)
    message: str = ""  # refused: ORT's message; crashed: the exit status; not-run: why

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED

    @property
    def verdict(self) -> str:
        """The outcome in words, for a message."""
        if self.outcome == "registered":
            return f"registered with ORT {self.ort}"
        if self.outcome == "not-run":
            return f"not run ({self.message})"
        return f"{self.outcome} by ORT {self.ort}: {self.message}"


def matrix_file() -> Path:
    return resources.manifests_dir() / "ep-matrix.toml"


def load_matrix(path: Path | None = None) -> dict[tuple[str, str], PairProof]:
    """(profile, pack) -> its recorded proof; a ProfileError naming the row for a bad one."""
    table = load_toml(path or matrix_file())
    pairs: dict[tuple[str, str], PairProof] = {}
    for row in table.tables("pair", []):
        proof = _pair(row)
        key = (proof.profile, proof.pack)
        if key in pairs:
            raise ProfileError(f"{row.where}: a second row for {proof.profile} x {proof.pack}.")
        pairs[key] = proof
    table.done()
    return pairs


def _pair(row: Table) -> PairProof:
    proof = row.record(PairProof)
    if proof.outcome not in OUTCOMES:
        raise ProfileError(
            f"{row.where}: key 'outcome' must be one of {', '.join(OUTCOMES)}, "
            f"not '{proof.outcome}'."
        )
    if proof.outcome != "registered" and not proof.message:
        raise ProfileError(f"{row.where}: a '{proof.outcome}' row needs its 'message'.")
    return proof


def pair_proof(profile: str, pack: str) -> PairProof | None:
    """The recorded proof of `pack` beside `profile`'s core, or None where there is no row."""
    return load_matrix().get((profile, pack))
