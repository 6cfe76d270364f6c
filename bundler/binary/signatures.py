"""Read layer: Authenticode: does a vendor-signed DLL still carry a signature that verifies?

A DLL that was signed and no longer verifies has been changed after signing: patched,
corrupted in transit, or replaced by someone else's build under the vendor's name. Checked:
the signed digest equals the file's Authenticode hash, and the signer's signature over it is
valid. Not checked: the chain to a trusted root and revocation (Windows does that with its own
root store when a policy requires it); certificate expiry is ignored, because a signature
timestamped while the certificate was valid stays valid.

Which vendors sign is a fact of the pinned binaries, recorded per artifact in the profiles
(`signed = true`: ONNX Runtime and the VC++ runtime by Microsoft, cuDNN by NVIDIA; the CUDA
runtime, cuBLAS, cuFFT and NVRTC DLLs of the PyPI wheels are not signed).

The reader is LIEF (PyPI `lief`, the optional `signatures` extra). The `signify` package would
be the lighter choice, but its crypto backend (oscrypto 1.3.0) cannot be imported on Linux with
OpenSSL 3.0.10 or newer: it does not parse that version string, so it fails on current Debian.
Read layer (check_signature: one file), plus the audit's judgement of a folder's signatures.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from bundler.binary.pe import read_pe
from bundler.errors import ConfigError, InputFileError, IntegrityError
from bundler.findings import Finding, finding
from bundler.target.profiles import Profile

INSTALL_HINT = 'pip install "ort-bundle[signatures]" (LIEF reads Authenticode signatures)'


class SignatureState(StrEnum):
    VALID = "valid"
    INVALID = "invalid"  # signed, and the signature does not verify
    UNSIGNED = "unsigned"


@dataclass(frozen=True)
class Signature:
    state: SignatureState
    signer: str | None  # the signing certificate's subject
    detail: str  # what LIEF reported, e.g. "BAD_DIGEST"


UNSIGNED = Signature(SignatureState.UNSIGNED, None, "no Authenticode signature")


def _lief() -> Any:
    try:
        import lief
    except ImportError:
        raise ConfigError(f"checking signatures needs LIEF: {INSTALL_HINT}.") from None
    lief.logging.disable()
    return lief


_PEM_BLOCK = re.compile(rb"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.S)


@dataclass(frozen=True)
class Trust:
    """The root CAs of a --trust file, as DER certificates. LIEF reads them only when it checks
    a signature: LIEF 1.0 reads a lone certificate only after it has read a signed PE file
    (before that, every certificate fails with mbedTLS's error -0x3B00)."""

    path: Path
    roots: tuple[bytes, ...]

    def certificates(self, lief: Any) -> list[Any]:
        parsed = [cert for der in self.roots for cert in lief.PE.x509.parse(list(der)) or ()]
        if len(parsed) != len(self.roots):
            raise ConfigError(f"{self.path}: LIEF cannot read a certificate of this file.")
        return parsed


def load_trust(path: Path) -> Trust:
    """The root certificates of a PEM (or DER) file, for `check_signature(trust=...)`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}).") from None
    try:
        blocks = [base64.b64decode(block) for block in _PEM_BLOCK.findall(data)]
    except binascii.Error:
        blocks = []
    roots = tuple(blocks) if blocks else (data,) if data.startswith(b"\x30\x82") else ()
    if not roots:
        raise ConfigError(f"{path}: no certificate found; --trust takes a PEM file of root CAs.")
    return Trust(path, roots)


def check_signature(path: Path, trust: Trust | None = None) -> Signature:
    """The state of `path`'s Authenticode signature (the first one, as Windows uses). With
    `trust` (load_trust), the signer's certificate must also be issued by one of those roots
    (directly: put an intermediate CA into the trust file too), instead of nothing being said
    about the chain."""
    lief = _lief()
    binary = lief.PE.parse(str(path))
    if binary is None:
        raise InputFileError(f"{path}: not a readable PE file; its signature cannot be checked.")
    signatures = list(binary.signatures)
    if not signatures:
        return UNSIGNED
    checks = lief.PE.Signature.VERIFICATION_CHECKS.SKIP_CERT_TIME
    flags = binary.verify_signature(checks)
    signer = _signer(signatures[0])
    if flags != lief.PE.Signature.VERIFICATION_FLAGS.OK:
        return Signature(SignatureState.INVALID, signer, _flag_names(flags))
    if trust is not None:
        certificate = signatures[0].signers[0].cert if signatures[0].signers else None
        roots = trust.certificates(lief)
        chain = certificate.is_trusted_by(roots) if certificate is not None else None
        if chain != lief.PE.x509.VERIFICATION_FLAGS.OK:
            detail = _flag_names(chain).replace("x509.", "") if chain else "no signer certificate"
            return Signature(SignatureState.INVALID, signer, f"not trusted: {detail}")
    return Signature(SignatureState.VALID, signer, "OK")


def _signer(signature: Any) -> str | None:
    signers = list(signature.signers)
    if not signers or signers[0].cert is None:
        return None
    return str(signers[0].cert.subject)


def _flag_names(flags: Any) -> str:
    """`VERIFICATION_FLAGS.BAD_DIGEST | ...` as `BAD_DIGEST, ...`."""
    text = str(flags).replace("VERIFICATION_FLAGS.", "")
    return ", ".join(part.strip() for part in text.split("|"))


# --- bundle audit --signatures -------------------------------------------------------------------

FINDING_CODES = ("BA601", "BA602")


def signature_findings(
    folder: Path, names: Iterable[str], profile: Profile, trust: Trust | None = None
) -> list[Finding]:
    """BA601 for each file in `folder` whose signature does not verify (with `trust`: or whose
    signer those roots did not issue), BA602 for an unsigned one that the profile's pinned
    build has signed (`signed = true` on its artifact)."""
    found: list[Finding] = []
    for name in names:
        try:  # our reader first: it knows in milliseconds that a file has no signature at all
            signed = read_pe(folder / name).signed  # (LIEF needs seconds for a 0.5 GB DLL)
        except InputFileError:
            continue  # unreadable: the audit reports it already (BA001)
        signature = check_signature(folder / name, trust) if signed else UNSIGNED
        if signature.state is SignatureState.INVALID:
            message = (
                f"{name}: the signature of {signature.signer} does not verify ({signature.detail})"
            )
            found.append(finding("BA601", (name,), message))
        elif signature.state is SignatureState.UNSIGNED and profile.signed_by_vendor(name):
            message = f"{name} is not signed; the profile's pinned build of it is"
            found.append(finding("BA602", (name,), message))
    return found


# --- bundle build with signatures = "verify" -----------------------------------------------------


def verify_vendor_signatures(files: Iterable[tuple[str, Path]], profile: Profile) -> None:
    """Every file (name, source path) whose vendor signs it must carry a signature that
    verifies: an unsigned or changed one never ships. Raises IntegrityError naming it."""
    for name, source in files:
        if not profile.signed_by_vendor(name):
            continue
        signature = check_signature(source)
        if signature.state is SignatureState.VALID:
            continue
        what = (
            "is not signed"
            if signature.state is SignatureState.UNSIGNED
            else f"has a signature that does not verify ({signature.detail})"
        )
        raise IntegrityError(
            f"{source}: {name} {what}, but {profile.name} says its vendor signs it "
            '(signatures = "verify"); take it from the pinned source, or check where it came from.'
        )
