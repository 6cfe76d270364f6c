r"""The winget manifest's switches, proved with the real setup (issue 41): examples/hello's CPU
bundle with `install_scope = "{scope}"` compiled by the real ISCC under Wine, published, then
installed silently once per installer of the manifest with exactly its switches (Silent plus
the scope's Custom). Each install must succeed, Wine's registry must then hold the uninstall
key the manifest names as its product code, in the scope's hive, and the folder that key points
to must audit clean. The shared `inno` prefix and the CPU cache keep it to about a minute.

Two scripts: `install_scope = "{scope}"` (PrivilegesRequiredOverridesAllowed=commandline: two
installers, /ALLUSERS and /CURRENTUSER) and `"user"` (one user installer, no switch). The "ask"
script's /CURRENTUSER install is not run here: its DefaultDirName is {autopf}, which a per-user
install expands to the user's program folder (FOLDERID_UserProgramFiles), and Wine cannot
expand it (the setup log: 'Failed to expand shell folder constant "autopf"'); the "user"
script installs into {localappdata}\Programs instead, which Wine has (docs/publishing.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.inno import InnoSetup, read_setup_log
from tests.support.paths import hello_app
from tests.support.releases import PYSPDXTOOLS, load_yaml, lock_pins, sha256sum_check
from tests.support.runs import bundle_from_cache, run_bundle

UNINSTALL = r"Software\Microsoft\Windows\CurrentVersion\Uninstall"
HIVES = {"machine": "HKLM", "user": "HKCU"}
SETUP_NAME = "hello-1.0.0.0-setup.exe"  # examples/hello: ProductName hello, FileVersion 1.0.0.0
CONFIG = """[build]
exe = "hello.exe"
profile = "ort-1.19.2-cpu"
out = "dist"

[render]
compression = "zip/1"
install_scope = "{scope}"

[publish]
package_id = "Example.Hello"
license = "MIT"
short_description = "Says which ONNX Runtime it loads."
url = "https://example.com/releases/{version}/{name}"
"""


def install_location(inno: InnoSetup, key: str) -> str | None:
    """The uninstall key's InstallLocation (a REG_SZ), None without the key."""
    done = inno.program("reg", "query", key, "/v", "InstallLocation", "/reg:64", timeout=60)
    for line in done.stdout.splitlines():
        name, _, rest = line.strip().partition("    ")
        if name == "InstallLocation" and "REG_SZ" in rest:
            return rest.split("REG_SZ", 1)[1].strip()
    return None


@pytest.mark.parametrize(("scope", "scopes", "run"), [
    ("ask", {"machine", "user"}, {"machine"}), ("user", {"user"}, {"user"})
])  # fmt: skip
def test_each_scope_installs_with_the_manifest_switches_under_its_product_code(
    inno: InnoSetup, cpu_cache: Path, tmp_path: Path, scope: str, scopes: set[str], run: set[str]
) -> None:
    app = hello_app(tmp_path / "app", CONFIG.replace("{scope}", scope))
    built = bundle_from_cache(
        "build", "--config", str(app / "bundle.toml"), "--cache-dir", str(cpu_cache)
    )
    assert built.returncode == 0, built.stderr
    dist = app / "dist"
    inno.compile(dist / "setup.iss", dist / "Output").check()
    done = run_bundle("publish", str(dist), "--config", str(app / "bundle.toml"), "--json")
    assert done.returncode == 0, done.stderr
    release = Path(json.loads(done.stdout)["out"])
    assert SETUP_NAME in sha256sum_check(release)  # the real setup, listed and intact
    verified = run_bundle("verify", str(release), "--json")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["dependencies"] == 2  # the onnxruntime and msvc wheels
    changed = tmp_path / "download" / SETUP_NAME  # the real setup, one byte changed
    changed.parent.mkdir()
    data = bytearray((release / SETUP_NAME).read_bytes())
    data[len(data) // 2] ^= 0x01
    changed.write_bytes(bytes(data))
    refused = run_bundle("verify", str(changed), "--sums", str(release / "SHA256SUMS"))
    assert refused.returncode == 26 and f"{changed}: SHA-256" in refused.stderr, refused.stderr
    statement = json.loads((release / "bundle.provenance.json").read_text(encoding="utf-8"))
    stated = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert {d["uri"]: d["digest"]["sha256"] for d in stated} == lock_pins(dist / "bundle.lock.json")
    spdx = subprocess.run(
        [*PYSPDXTOOLS, "-i", str(release / "bundle.spdx.json")], capture_output=True, text=True
    )
    assert spdx.returncode == 0 and "invalid" not in spdx.stderr, spdx.stderr
    folder = release / "winget" / "Example.Hello"
    manifest = load_yaml(folder / "Example.Hello.installer.yaml")
    code = manifest["ProductCode"]
    assert {i["Scope"] for i in manifest["Installers"]} == scopes
    setup = release / json.loads(done.stdout)["winget"]["setup"]
    for installer in (i for i in manifest["Installers"] if i["Scope"] in run):
        switches = installer["InstallerSwitches"]
        args = [*switches["Silent"].split(), *filter(None, [switches.get("Custom")])]
        key = rf"{HIVES[installer['Scope']]}\{UNINSTALL}\{code}"
        log = tmp_path / f"{installer['Scope']}.log"
        ran = inno.program(setup, *args, f"/LOG={inno.windows_path(log)}", cwd=release, timeout=600)
        text = read_setup_log(log) if log.is_file() else ""
        assert ran.returncode == 0, (installer["Scope"], ran.stdout, ran.stderr, text)
        location = install_location(inno, key)
        assert location, f"no uninstall key {key} after the {installer['Scope']} install"
        installed = inno.unix_path(location)
        try:
            audit = run_bundle("audit", str(installed), "--json")
            assert audit.returncode == 0, audit.stdout + audit.stderr
        finally:
            inno.uninstall(installed)
        assert install_location(inno, key) is None  # the uninstaller removed its key
