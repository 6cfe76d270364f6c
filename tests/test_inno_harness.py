"""The Inno Setup harness (tests/support/inno.py) and the stand-ins, on hand-written scripts.

Independent of bundle's renderer: each script here is written by hand, so what ISCC and setup
must do is known. These tests prove that the harness compiles, installs silently and reports
failures, and that a 64-bit mode setup's [Code] sees the prefix's 64-bit system32 and registry
view, before other tests use it to judge bundle's generated installers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bundler.binary.pe import read_pe
from tests.support.doctor import DRIVER_516, DRIVER_551, Machine
from tests.support.inno import VC_REDIST_LOG, InnoSetup, read_setup_log
from tests.support.mingw import STANDINS_SCRIPT, run_build_script

APP_DIR = r"C:\bundle test (x64)\app"
VC_KEY = r"HKLM\SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64"

SETUP = """\
[Setup]
AppName=bundle harness test
AppVersion=1.0
DefaultDirName={{autopf}}\\bundle harness test
OutputBaseFilename={name}
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
Compression=zip/1
PrivilegesRequired=admin
Uninstallable=no
"""

# InitializeSetup runs before anything is installed: what an installer's preflight sees.
PREFLIGHT_CODE = """
[Code]
function InitializeSetup(): Boolean;
var
  MS, LS, Installed: Cardinal;
begin
  if GetVersionNumbers(ExpandConstant('{sys}\\nvcuda.dll'), MS, LS) then
    Log(Format('preflight: nvcuda.dll %d.%d.%d.%d', [MS shr 16, MS and $FFFF,
      LS shr 16, LS and $FFFF]))  { no line may start with "[": ISCC reads a section tag }
  else
    Log('preflight: nvcuda.dll absent');
  if RegQueryDWordValue(HKLM, 'SOFTWARE\\Microsoft\\VisualStudio\\14.0\\VC\\Runtimes\\x64',
      'Installed', Installed) then
    Log(Format('preflight: VC runtime Installed=%d', [Installed]))
  else
    Log('preflight: VC runtime absent');
  Result := True;
end;
"""


def write_iss(folder: Path, name: str, body: str) -> Path:
    """A script as the renderer writes them: UTF-8 with a BOM."""
    iss = folder / f"{name}.iss"
    iss.write_text(SETUP.format(name=name) + body, encoding="utf-8-sig")
    return iss


def test_compile_and_silent_install(inno: InnoSetup, tmp_path: Path) -> None:
    (tmp_path / "payload.txt").write_bytes(b"installed by the harness test\n")
    iss = write_iss(tmp_path, "payload-setup", '[Files]\nSource: "payload.txt"; DestDir: "{app}"\n')

    compiled = inno.compile(iss, tmp_path / "out").check()
    assert compiled.files == (tmp_path / "out" / "payload-setup.exe",)

    installed = inno.install(compiled.setup_exe, APP_DIR, log=tmp_path / "setup.log").check()
    target = inno.unix_path(APP_DIR) / "payload.txt"
    assert target.read_bytes() == b"installed by the harness test\n"
    assert target.is_relative_to(inno.prefix / "drive_c")
    assert "64-bit install mode: Yes" in installed.log
    assert "Windows version: 10.0." in installed.log


def test_compile_failure_carries_isccs_message(inno: InnoSetup, tmp_path: Path) -> None:
    iss = write_iss(tmp_path, "broken", "NoSuchDirective=1\n")

    compiled = inno.compile(iss, tmp_path / "out")

    assert compiled.returncode == 2  # ISCC: compilation failed
    assert compiled.files == ()
    with pytest.raises(AssertionError, match='Unrecognized \\[Setup\\] section directive "NoSuch'):
        compiled.check()


def test_64bit_setup_code_sees_system32_and_registry(
    inno: InnoSetup, standins: Path, tmp_path: Path
) -> None:
    """A driver DLL in the 64-bit system32 and a VC runtime key in the 64-bit registry view are
    what [Code] sees; the 32-bit folder (syswow64, given another version here) is not."""
    setup = inno.compile(write_iss(tmp_path, "preflight", PREFLIGHT_CODE), tmp_path / "out")
    setup_exe = setup.check().setup_exe
    wow64 = inno.prefix / "drive_c" / "windows" / "syswow64"
    with Machine(inno, standins) as machine:
        try:
            machine.driver(DRIVER_551)
            machine.place(standins / f"nvcuda-{DRIVER_516}" / "nvcuda.dll", wow64)
            inno.set_registry(VC_KEY, "Installed", 1)
            present = inno.install(setup_exe, APP_DIR, log=tmp_path / "present.log").check()
        finally:
            inno.delete_registry_key(VC_KEY)
    absent = inno.install(setup_exe, APP_DIR, log=tmp_path / "absent.log").check()

    assert "preflight: nvcuda.dll 31.0.15.5161" in present.log
    assert "preflight: VC runtime Installed=1" in present.log
    assert "preflight: nvcuda.dll absent" in absent.log
    assert "preflight: VC runtime absent" in absent.log


def test_registry_helpers(inno: InnoSetup) -> None:
    try:
        inno.set_registry(VC_KEY, "Bld", 35112)
        assert inno.get_registry(VC_KEY, "Bld") == 35112
    finally:
        inno.delete_registry_key(VC_KEY)
    assert inno.get_registry(VC_KEY, "Bld") is None
    inno.delete_registry_key(VC_KEY)  # absent: no error


def test_setup_runs_the_vc_redist_standin(inno: InnoSetup, standins: Path, tmp_path: Path) -> None:
    """The way an installer ships the VC runtime: vc_redist.x64.exe into {tmp}, run from [Run]."""
    shutil.copy(standins / "vc_redist.x64.exe", tmp_path)
    iss = write_iss(
        tmp_path,
        "redist",
        '[Files]\nSource: "vc_redist.x64.exe"; DestDir: "{tmp}"; Flags: deleteafterinstall\n'
        '[Run]\nFilename: "{tmp}\\vc_redist.x64.exe"; Parameters: "/install /quiet /norestart";'
        " Flags: waituntilterminated\n",
    )
    ran = inno.unix_path(VC_REDIST_LOG)
    ran.unlink(missing_ok=True)

    setup_exe = inno.compile(iss, tmp_path / "out").check().setup_exe
    installed = inno.install(setup_exe, APP_DIR, log=tmp_path / "setup.log").check()

    lines = ran.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith('vc_redist.x64.exe" /install /quiet /norestart'), lines
    assert "Process exit code: 0" in installed.log
    ran.unlink()


def test_vc_redist_standin_exit_code(
    inno: InnoSetup, standins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = inno.unix_path(VC_REDIST_LOG)
    ran.unlink(missing_ok=True)
    monkeypatch.setenv("VC_REDIST_STANDIN_EXIT", "5")

    run = inno.run(standins / "vc_redist.x64.exe", "/install", "/passive", force_native_vc=False)

    assert run.returncode == 5
    assert ran.read_text(encoding="utf-8").rstrip().endswith("/install /passive")
    ran.unlink()


def test_paths_map_both_ways(inno: InnoSetup, tmp_path: Path) -> None:
    assert inno.unix_path(r"C:\Windows\System32") == inno.system32
    assert inno.unix_path(r"C:\no such dir\x") == inno.prefix / "drive_c" / "no such dir" / "x"
    windows = inno.windows_path(tmp_path / "a b (x64)")
    assert windows == "Z:" + str(tmp_path).replace("/", "\\") + "\\a b (x64)"
    assert inno.unix_path(windows) == tmp_path / "a b (x64)"


def test_setup_log_decoding(tmp_path: Path) -> None:
    utf8 = tmp_path / "utf8.log"
    utf8.write_bytes(b"\xef\xbb\xbf2026 Log opened.\r\nDest filename: C:\\\xc3\xa9\r\n")
    utf16 = tmp_path / "utf16.log"
    utf16.write_bytes("2026 Log opened.\r\nDest filename: C:\\é\r\n".encode("utf-16"))

    expected = "2026 Log opened.\nDest filename: C:\\é\n"
    assert read_setup_log(utf8) == expected
    assert read_setup_log(utf16) == expected


def test_standins_carry_the_driver_versions(standins: Path, tmp_path: Path) -> None:
    for folder, version in (
        ("nvcuda-31.0.15.5161", (31, 0, 15, 5161)),
        ("nvcuda-31.0.15.1694", (31, 0, 15, 1694)),
    ):
        info = read_pe(standins / folder / "nvcuda.dll")
        assert (info.machine, info.is_dll, info.file_version) == ("x64", True, version)
    redist = read_pe(standins / "vc_redist.x64.exe")
    assert (redist.machine, redist.is_dll) == ("x64", False)
    assert redist.file_version is not None and redist.file_version >= (14, 40, 0, 0)

    again = tmp_path / "again"
    run_build_script(STANDINS_SCRIPT, again)
    for path in sorted(standins.rglob("*.*")):  # nvcuda-*/ are folders
        if path.is_dir():
            continue
        rebuilt = again / path.relative_to(standins)
        assert rebuilt.read_bytes() == path.read_bytes(), f"{path.name} is not reproducible"
