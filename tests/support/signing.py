"""Signing under Wine, for the tests that compile a signed setup with the real ISCC: a test CA
and a code-signing certificate it issued (`make_pki`), and `install_osslsigncode`, which puts an
osslsigncode.exe into a prefix's C:\\windows that runs Debian's /usr/bin/osslsigncode.

Under Wine the osslsigncode preset (`cmd /c call bundlesign.cmd FILE`, the batch file signing to
FILE.signed and moving it over FILE) finds osslsigncode.exe there: a small Windows program that
runs a batch file starting Debian's osslsigncode through a shim (turning the Windows paths ISCC
passes, Z:\\..., C:\\..., into Unix ones) and waiting for it.
"""

from __future__ import annotations

import datetime
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.inno import InnoSetup
from tests.support.mingw import compile_c
from tests.support.skips import require

PASSWORD = "Pfx-s3cret-7731"  # what must never appear in a rendered file


@dataclass(frozen=True)
class Pki:
    ca_pem: Path
    pfx: Path


def make_pki(folder: Path) -> Pki:
    """A code-signing root CA and a leaf it issued, the leaf as a PFX with PASSWORD."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def certificate(
        subject: str, key: rsa.RSAPrivateKey, issuer: str, signer: rsa.RSAPrivateKey, ca: bool
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            usage = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING])
            builder = builder.add_extension(usage, critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = certificate("bundle test CA", ca_key, "bundle test CA", ca_key, ca=True)
    leaf = certificate("bundle test signer", leaf_key, "bundle test CA", ca_key, ca=False)
    ca_pem = folder / "ca.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pfx = folder / "signer.pfx"
    encryption = serialization.BestAvailableEncryption(PASSWORD.encode())
    pfx.write_bytes(pkcs12.serialize_key_and_certificates(b"s", leaf_key, leaf, [ca], encryption))
    return Pki(ca_pem, pfx)


SHIM = """#!{python}
# Runs Debian's osslsigncode for osslsigncode.cmd: the Windows paths ISCC gave (Z:\\..., C:\\...)
# become Unix ones, and the exit code goes to the marker file (argument 1) cmd waits for.
import os, re, subprocess, sys
def unix(arg):
    # Wine hands a quoted argument to a Unix program with its quotes as backslashes
    if len(arg) > 1 and arg[0] == arg[-1] and arg[0] in ('"', chr(92)):
        arg = arg[1:-1]
    match = re.match(r"([A-Za-z]):\\\\(.*)", arg)
    if not match:
        return arg
    drive = os.path.realpath(os.path.join({dosdevices!r}, match[1].lower() + ":"))
    return os.path.join(drive, match[2].replace("\\\\", "/"))
marker, *args = map(unix, sys.argv[1:])
code = subprocess.run(["/usr/bin/osslsigncode", *args]).returncode
with open(marker + ".tmp", "w") as file:
    file.write(str(code))
os.replace(marker + ".tmp", marker)
"""

# Wine starts a Unix program named .exe, but without waiting for it (and `start /unix` does not
# start one at all): the .cmd waits for the shim's marker file and returns its exit code.
WAITER = """@echo off
set "DONE=%TEMP%\\osslsigncode-%RANDOM%%RANDOM%.done"
{shim} "%DONE%" %*
:wait
if not exist "%DONE%" goto wait
set /p CODE=<"%DONE%"
del "%DONE%"
exit /b %CODE%
"""


# cmd does not come back from a batch file to run the preset's `&& move`: osslsigncode.exe, a
# real Windows program, runs the waiting batch file and returns its exit code.
LAUNCHER = r"""#include <windows.h>
#include <stdio.h>
int wmain(void) {
    wchar_t *line = GetCommandLineW();
    static wchar_t command[32768];
    if (*line == L'"') { for (line++; *line && *line != L'"'; line++) {} if (*line) line++; }
    else { while (*line && *line != L' ' && *line != L'\t') line++; }
    _snwprintf(command, 32767, L"cmd.exe /c C:\\windows\\osslsigncode-wait.cmd%ls", line);
    STARTUPINFOW start = {sizeof start};
    PROCESS_INFORMATION process;
    DWORD code = 9;
    if (!CreateProcessW(NULL, command, NULL, NULL, FALSE, 0, NULL, NULL, &start, &process))
        return 9;
    WaitForSingleObject(process.hProcess, INFINITE);
    GetExitCodeProcess(process.hProcess, &code);
    return (int)code;
}
"""


def install_osslsigncode(inno: InnoSetup, folder: Path) -> None:
    """osslsigncode.exe on the prefix's PATH, running Debian's osslsigncode."""
    require(shutil.which("osslsigncode") is not None, "apt-get install osslsigncode")
    shim = folder / "osslsigncode-shim.exe"
    dosdevices = str(inno.prefix / "dosdevices")
    shim.write_text(SHIM.format(python=sys.executable, dosdevices=dosdevices))
    shim.chmod(0o755)
    windows = inno.prefix / "drive_c" / "windows"
    waiter = WAITER.format(shim=inno.windows_path(shim)).replace("\n", "\r\n")
    (windows / "osslsigncode-wait.cmd").write_text(waiter)
    source = folder / "launcher.c"
    source.write_text(LAUNCHER)
    compile_c(source, windows / "osslsigncode.exe", "-municode", "-O2")
