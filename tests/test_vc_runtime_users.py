"""`--vc-runtime installer` when nothing needs the VC++ runtime (issue 40, part 1).

onnxruntime-windowsml's DLLs link the CRT statically (their import tables name no VC++ runtime
DLL: docs/catalogue.md, "DirectML after 1.24.4"), and examples/hello is built with mingw-w64
(it imports msvcrt.dll, not the VC++ runtime). So a build of hello with a windowsml profile has
nothing for vc_redist.x64.exe to install, and installer mode asks for no --vc-redist. An app
that imports the runtime itself, or a profile whose DLLs do, still needs it: the refusal names
who imports it, before any download.
"""

from __future__ import annotations

from pathlib import Path

from bundler.binary.pe import read_pe
from bundler.closure.vcruntime import vc_runtime_users
from bundler.target.profiles import load_profile
from tests.support.paths import HELLO
from tests.support.pefactory import write_pe
from tests.support.runs import run_bundle

WINDOWSML = "ort-1.30.0-windowsml-directml"


def test_nothing_of_a_windowsml_build_of_hello_imports_the_vc_runtime() -> None:
    assert vc_runtime_users(read_pe(HELLO), load_profile(WINDOWSML), ()) == []


def test_an_msvc_app_or_a_profile_dll_or_a_pack_needs_it(tmp_path: Path) -> None:
    msvc = read_pe(write_pe(tmp_path / "app.exe", dll=False, imports=("VCRUNTIME140.dll",)))
    assert vc_runtime_users(msvc, load_profile(WINDOWSML), ()) == ["app.exe"]
    assert vc_runtime_users(msvc, load_profile(WINDOWSML), ("webgpu",)) == ["app.exe", "webgpu"]
    users = vc_runtime_users(read_pe(HELLO), load_profile("ort-1.19.2-cpu"), ())
    assert "onnxruntime.dll" in users and "msvcp140.dll" not in users  # the runtime's own


def test_installer_mode_without_vc_redist_is_refused_where_the_runtime_is_needed(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    args = ("build", str(HELLO), "--out", str(out), "--vc-runtime", "installer", "--offline")
    refused = run_bundle(*args, "--profile", "ort-1.19.2-cpu")
    assert refused.returncode == 14, refused.stderr
    assert "needs --vc-redist PATH" in refused.stderr
    assert "onnxruntime.dll" in refused.stderr  # who imports it
    assert not out.exists()  # refused before anything was written
