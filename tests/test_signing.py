"""Signing the installer ([sign] in bundle.toml): the real ISCC under Wine signs the setup and
its uninstaller with osslsigncode, using a test CA made here; both verify against that CA
(osslsigncode verify -CAfile, bundle audit --signatures --trust), a flipped byte does not,
and the PFX password appears in no file bundle wrote. The CA and osslsigncode under Wine are
tests/support/signing.py's.
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundler.closure.lock import PACK_MARKER
from tests.support.inno import InnoSetup
from tests.support.paths import CPU, hello_app
from tests.support.runs import bundle_from_cache as bundle
from tests.support.signing import PASSWORD, Pki, install_osslsigncode, make_pki

PASSWORD_ENV = "BUNDLE_TEST_PFX_PASSWORD"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def config(folder: Path, sign: str) -> Path:
    """An app folder with hello.exe and a bundle.toml whose [sign] table is `sign`."""
    toml = (
        f'[build]\nexe = "hello.exe"\nprofile = "{CPU}"\nout = "dist"\n\n'
        f'[render]\ncompression = "zip/1"\n\n[sign]\n{sign}'
    )
    return hello_app(folder, toml) / "bundle.toml"


# --- configuration errors: one line, exit 14, before any work ------------------------------


@pytest.mark.parametrize(
    ("sign", "message"),
    [
        ('tool = "gpg"\ncertificate = "a.pfx"\n', '[sign] tool = "gpg": not a sign tool'),
        ('tool = "osslsigncode"\n', "needs certificate"),
        (
            'tool = "signtool"\ncertificate = "a.pfx"\npassword = "hunter2"\n',
            "never put a password",
        ),
        (
            'tool = "osslsigncode"\ncertificate = "a.pfx"\npassword_env = "%X%"\n',
            "not an environment",
        ),
        ('tool = "custom"\ncommand = "sign.exe"\n', "$f"),
    ],
)
def test_a_bad_sign_table_is_one_line_and_exit_14(tmp_path: Path, sign: str, message: str) -> None:
    path = config(tmp_path / "app", sign)
    result = bundle("build", "--config", str(path), "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 14, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert "hunter2" not in result.stderr


# --- the real thing: ISCC under Wine signs with osslsigncode --------------------------------


@dataclass(frozen=True)
class Signed:
    dist: Path
    setup: Path
    uninstaller: Path
    app: Path


@pytest.fixture(scope="module")
def signed(
    inno: InnoSetup, cpu_cache: Path, pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Signed]:
    work = tmp_path_factory.mktemp("signed")
    install_osslsigncode(inno, work)
    sign = (
        f'tool = "osslsigncode"\ncertificate = "{pki.pfx}"\n'
        f'password_env = "{PASSWORD_ENV}"\ndescription = "Hello $1 & co"\n'
    )
    path = config(work / "app", sign)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PASSWORD_ENV, PASSWORD)
        built = bundle("build", "--config", str(path), "--cache-dir", str(cpu_cache))
        assert built.returncode == 0, built.stderr
        dist = work / "app" / "dist"
        command = (dist / "signtool.txt").read_text(encoding="utf-8")
        compiled = inno.compile(dist / "setup.iss", work / "output", f"/Sbundlesign={command}")
    compiled.check()
    folder = r"C:\signed (test)"
    inno.install(compiled.setup_exe, folder, log=work / "setup.log").check()
    app = inno.unix_path(folder)
    try:
        yield Signed(dist, compiled.setup_exe, app / "unins000.exe", app)
    finally:
        shutil.rmtree(app, ignore_errors=True)


def osslsigncode_verify(exe: Path, ca: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["osslsigncode", "verify", "-CAfile", str(ca), "-in", str(exe)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def audit_trust(exe: Path, ca: Path) -> subprocess.CompletedProcess[str]:
    return bundle("audit", str(exe), "--signatures", "--trust", str(ca))


@pytest.mark.real_tools
def test_the_setup_and_its_uninstaller_verify_against_the_test_ca(signed: Signed, pki: Pki) -> None:
    lines = (signed.dist / "setup.iss").read_text(encoding="utf-8-sig").splitlines()
    tool = "SignTool=bundlesign $q<#AddBackslash(SourcePath)#>bundlesign.cmd$q"
    assert tool in lines and "SignedUninstaller=yes" in lines
    for exe in (signed.setup, signed.uninstaller):
        checked = osslsigncode_verify(exe, pki.ca_pem)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        audited = audit_trust(exe, pki.ca_pem)
        assert audited.returncode == 0, audited.stdout + audited.stderr
        assert "valid by" in audited.stdout and "bundle test signer" in audited.stdout


@pytest.mark.real_tools
def test_a_flipped_byte_or_another_ca_fails_the_check(
    signed: Signed, pki: Pki, tmp_path: Path
) -> None:
    data = bytearray(signed.setup.read_bytes())
    data[0x400] ^= 0xFF  # in the code, which the Authenticode hash covers
    flipped = tmp_path / "flipped-setup.exe"
    flipped.write_bytes(bytes(data))
    assert osslsigncode_verify(flipped, pki.ca_pem).returncode != 0
    audited = audit_trust(flipped, pki.ca_pem)
    assert audited.returncode == 17, audited.stdout + audited.stderr
    assert "invalid" in audited.stdout
    other = tmp_path / "other.pem"  # a CA that did not issue the signer
    other.write_bytes(_other_ca())
    untrusted = audit_trust(signed.setup, other)
    assert untrusted.returncode == 17, untrusted.stdout + untrusted.stderr
    assert "not trusted" in untrusted.stdout


def _other_ca() -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bundle test CA")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


@pytest.mark.real_tools
def test_no_rendered_or_installed_file_holds_the_password(signed: Signed) -> None:
    script = (signed.dist / "bundlesign.cmd").read_text(encoding="utf-8")
    assert f'-pass "%{PASSWORD_ENV}%"' in script  # by name, expanded by cmd at sign time
    secret = PASSWORD.encode()
    for folder in (signed.dist.parent, signed.app):
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret not in path.read_bytes(), path


@pytest.mark.real_tools
def test_a_runtime_pack_is_signed_like_its_setup(
    inno: InnoSetup, cpu_cache: Path, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--runtime-pack with [sign]: setup.iss compiles the pack itself (ISPP), and passes the
    command in signtool.txt on to that compile: the pack verifies against the test CA, as the
    setup does."""
    install_osslsigncode(inno, tmp_path)
    sign = f'tool = "osslsigncode"\ncertificate = "{pki.pfx}"\npassword_env = "{PASSWORD_ENV}"\n'
    path = config(tmp_path / "app", sign)
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    built = bundle(
        "build", "--config", str(path), "--cache-dir", str(cpu_cache), "--runtime-pack"
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    dist = tmp_path / "app" / "dist"
    assert "SignTool=bundlesign $q{#AddBackslash(SourcePath)}bundlesign.cmd$q" in (
        dist / "bundle-pack.iss"
    ).read_text(encoding="utf-8-sig")
    command = (dist / "signtool.txt").read_text(encoding="utf-8")
    packs = tmp_path / "packs"
    compiled = inno.compile(
        dist / "setup.iss",
        tmp_path / "output",
        "/Sbundlepack=$p",  # appends the pack to the full setup, before bundlesign signs it
        f"/Sbundlesign={command}",
        f"/DBundlePackCache={inno.windows_path(packs)}",
    )
    compiled.check()
    (pack,) = packs.glob("bundle-pack-*.exe")
    for exe in (pack, compiled.setup_exe):
        checked = osslsigncode_verify(exe, pki.ca_pem)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    # the signature covers the pack: it follows the pack's files and the line naming the pack
    setup = compiled.setup_exe.read_bytes()
    assert setup.find(pack.read_bytes()) > 0
    assert setup.rfind(b"bundle runtime pack ") > setup.find(pack.read_bytes())
    # and the signed setup finds its pack before the signature, checks it and installs it
    folder = "C:\\signed pack"
    done = inno.install(compiled.setup_exe, folder, log=tmp_path / "install.log")
    assert done.returncode == 0, done.log
    installed = inno.unix_path(folder)
    assert (installed / "onnxruntime.dll").is_file() and (installed / PACK_MARKER).is_file()
