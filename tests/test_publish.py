"""`bundle publish` and `bundle verify` (issue 41), each output read by its real consumer, not
by the code that wrote it: `sha256sum -c`, the in-toto attestation bindings, spdx-tools'
`pyspdxtools`, cyclonedx-python-lib's validator, winget's own manifest schemas (vendored in
tests/fixtures/winget-schemas/). The bundle is a stand-in (tests/support/releases.py); the
Wine test (tests/test_publish_wine.py) publishes a real compiled setup."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bundler.errors import ExitCode
from tests.support.releases import (
    MIT_TEXT,
    MSVC_TEXT,
    PACK,
    PYSPDXTOOLS,
    SETUP,
    built_bundle,
    consumer,
    load_yaml,
    lock_pins,
    script,
    sha256sum_check,
    winget_errors,
)
from tests.support.runs import run_bundle

WINGET = ("--package-id", "Example.Hello", "--license", "MIT", "--short-description", "Says hi")
URL = ("--url", "https://example.com/releases/{version}/{name}")
COREUTILS = pytest.mark.posix_only(reason="GNU coreutils' sha256sum checks SHA256SUMS")


def published(tmp_path: Path, *extra: str, scope: str = "machine") -> tuple[Path, dict[str, Any]]:
    dist = built_bundle(tmp_path, scope)
    result = run_bundle("publish", str(dist), *extra, "--json")
    assert result.returncode == 0, result.stderr
    return dist / "release", json.loads(result.stdout)


@COREUTILS
def test_sha256sum_checks_every_published_file(tmp_path: Path) -> None:
    release, document = published(tmp_path)
    checked = sha256sum_check(release)
    expected = {SETUP, f"{PACK}.exe", f"{PACK}-1.bin", "hello.zip", "bundle.lock.json"}
    assert set(checked) == expected | {"bundle.cdx.json", "bundle.spdx.json"}
    assert [f["name"] for f in document["files"]] == sorted(checked)
    assert document["winget"] is None and document["notes"]


def test_the_statement_parses_with_in_toto_and_pins_what_the_lock_pins(tmp_path: Path) -> None:
    consumer("in_toto_attestation")
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement

    release, _ = published(tmp_path)
    text = (release / "bundle.provenance.json").read_text(encoding="utf-8")
    parsed = json_format.Parse(text, statement_pb2.Statement())
    Statement.copy_from_pb(parsed).validate()  # raises on a malformed statement
    assert parsed.predicate_type == "https://slsa.dev/provenance/v1"
    sums = dict(
        line.split("  ")[::-1] for line in (release / "SHA256SUMS").read_text("utf-8").splitlines()
    )
    assert {s.name: s.digest["sha256"] for s in parsed.subject} == sums
    predicate = json_format.ParseDict(json.loads(text)["predicate"], provenance_pb2.Provenance())
    deps = predicate.build_definition.resolved_dependencies
    pinned = {d.uri: d.digest["sha256"] for d in deps if d.uri}
    assert pinned == lock_pins(release / "bundle.lock.json")
    [local] = [d for d in deps if not d.uri]
    mine = hashlib.sha256(b"MZ local").hexdigest()
    assert local.name == "mine.dll" and local.digest["sha256"] == mine
    assert local.annotations["reproducible"] is False
    parameters = json.loads(text)["predicate"]["buildDefinition"]["externalParameters"]
    assert parameters["profile"] == "ort-1.19.2-cpu"
    assert parameters["app"]["digest"]["sha256"] == hashlib.sha256(b"MZ app").hexdigest()


def test_the_sboms_validate_with_spdx_tools_and_cyclonedx(tmp_path: Path) -> None:
    consumer("cyclonedx"), consumer("spdx_tools")
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    release, _ = published(tmp_path)
    spdx = release / "bundle.spdx.json"
    checked = subprocess.run([*PYSPDXTOOLS, "-i", str(spdx)], capture_output=True, text=True)
    assert checked.returncode == 0 and "invalid" not in checked.stderr, checked.stderr
    document = json.loads(spdx.read_text(encoding="utf-8"))
    [extracted] = document["hasExtractedLicensingInfos"]
    assert extracted["licenseId"] == "LicenseRef-Microsoft-VS2022-Distributable-Code"
    assert extracted["extractedText"] == MSVC_TEXT  # the shipped licence file's text
    by_name = {p["name"]: p for p in document["packages"]}
    assert by_name["onnxruntime.dll"]["licenseDeclared"] == "MIT"
    assert MIT_TEXT not in json.dumps(document["hasExtractedLicensingInfos"])
    [purl] = by_name["onnxruntime.dll"]["externalRefs"]
    assert purl["referenceLocator"] == "pkg:pypi/onnxruntime@1.19.2"
    sha = hashlib.sha256(b"MZ ort").hexdigest()
    assert by_name["onnxruntime.dll"]["checksums"] == [
        {"algorithm": "SHA256", "checksumValue": sha}
    ]
    # the check can fail: without the extracted text, the LicenseRef is unknown
    broken = tmp_path / "broken.spdx.json"
    broken.write_text(json.dumps({**document, "hasExtractedLicensingInfos": []}))
    refused = subprocess.run([*PYSPDXTOOLS, "-i", str(broken)], capture_output=True, text=True)
    assert "Unrecognized license reference" in refused.stdout + refused.stderr
    errors = JsonStrictValidator(SchemaVersion.V1_5).validate_str(
        (release / "bundle.cdx.json").read_text(encoding="utf-8")
    )
    assert errors is None, errors


@pytest.mark.parametrize(
    ("scope", "installers"),
    [
        ("machine", {"machine": None}),
        ("user", {"user": None}),
        ("ask", {"machine": "/ALLUSERS", "user": "/CURRENTUSER"}),
    ],
)
def test_the_winget_manifests_validate_with_the_scopes_the_script_allows(
    tmp_path: Path, scope: str, installers: dict[str, str | None]
) -> None:
    release, document = published(tmp_path, *WINGET, *URL, scope=scope)
    folder = release / "winget" / "Example.Hello"
    assert sorted(p.name for p in folder.iterdir()) == [
        "Example.Hello.installer.yaml", "Example.Hello.locale.en-US.yaml", "Example.Hello.yaml"
    ]  # fmt: skip
    for manifest in folder.iterdir():
        assert winget_errors(manifest) == [], manifest.name
    installer = load_yaml(folder / "Example.Hello.installer.yaml")
    assert installer["InstallerType"] == "inno"
    assert installer["ProductCode"] == "{1A734286-2D97-54EA-B2DD-44C7A68DAA90}_is1"
    assert installer["MinimumOSVersion"] == "10.0.10240"
    setup_sha = hashlib.sha256((release / SETUP).read_bytes()).hexdigest().upper()
    found = {i["Scope"]: i["InstallerSwitches"].get("Custom") for i in installer["Installers"]}
    assert found == installers
    for entry in installer["Installers"]:
        assert entry["InstallerSha256"] == setup_sha
        assert entry["InstallerUrl"] == f"https://example.com/releases/1.0.0.0/{SETUP}"
    assert document["winget"]["setup"] == SETUP


def test_a_broken_manifest_fails_the_schema(tmp_path: Path) -> None:
    release, _ = published(tmp_path, *WINGET, *URL)
    manifest = release / "winget" / "Example.Hello" / "Example.Hello.installer.yaml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace('"inno"', '"innosetup"'), encoding="utf-8")
    assert winget_errors(manifest)


@COREUTILS
def test_a_setup_in_slices_is_refused_for_winget_and_listed_in_the_sums(tmp_path: Path) -> None:
    dist = built_bundle(tmp_path)
    (dist / "Output" / "hello-1.0.0.0-setup-1.bin").write_bytes(b"slice")
    refused = run_bundle("publish", str(dist), *WINGET, *URL)
    assert refused.returncode == ExitCode.CONFIG, refused.stderr
    assert "hello-1.0.0.0-setup-1.bin" in refused.stderr and "one file" in refused.stderr
    assert not (dist / "release").exists()  # nothing half-written
    done = run_bundle("publish", str(dist))
    assert done.returncode == 0, done.stderr
    assert "hello-1.0.0.0-setup-1.bin" in sha256sum_check(dist / "release")


def test_winget_values_come_from_bundle_toml(tmp_path: Path) -> None:
    dist = built_bundle(tmp_path)
    config = tmp_path / "bundle.toml"
    config.write_text(
        '[publish]\npackage_id = "Example.Hello"\nlicense = "MIT"\n'
        'short_description = "Says hi"\nurl = "https://example.com/{name}"\n'
    )
    result = run_bundle("publish", str(dist), "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout)["settings"]
    assert options["package_id"] == {"value": "Example.Hello", "from": "bundle.toml"}
    missing = tmp_path / "partial.toml"
    missing.write_text('[publish]\npackage_id = "Example.Hello"\n')
    refused = run_bundle("publish", str(dist), "--config", str(missing), "--force")
    assert refused.returncode == ExitCode.CONFIG and "--license" in refused.stderr


def test_verify_passes_then_names_the_changed_setup(tmp_path: Path) -> None:
    release, _ = published(tmp_path)
    ok = run_bundle("verify", str(release), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["dependencies"] == 4  # three pinned archives, one local file
    setup = release / SETUP
    data = bytearray(setup.read_bytes())
    data[100] ^= 1  # one byte
    setup.unlink()  # a hard link to the built file: replace it, never edit both
    setup.write_bytes(bytes(data))
    changed = run_bundle("verify", str(setup))
    assert changed.returncode == ExitCode.VERIFY_FAILED, changed.stderr
    assert f"{setup}: SHA-256" in changed.stderr


def test_verify_names_the_dependency_that_differs_from_the_lock(tmp_path: Path) -> None:
    release, _ = published(tmp_path)
    archive_7z = tmp_path / "hello.7z"
    statement = release / "bundle.provenance.json"
    document = json.loads(statement.read_text(encoding="utf-8"))
    for dependency in document["predicate"]["buildDefinition"]["resolvedDependencies"]:
        if dependency.get("uri") == "pkg:pypi/onnxruntime@1.19.2":
            dependency["digest"]["sha256"] = "0" * 64
    statement.write_text(json.dumps(document), encoding="utf-8")
    setup = str(release / SETUP)
    for lock in (archive_7z, release / "hello.zip"):  # the lock inside each kind of archive
        differs = run_bundle("verify", setup, "--lock", str(lock))
        assert differs.returncode == ExitCode.VERIFY_FAILED, differs.stderr
        assert "dependency pkg:pypi/onnxruntime@1.19.2" in differs.stderr
    untouched = run_bundle(
        "verify", setup, "--statement", str(statement), "--lock", str(archive_7z)
    )
    assert untouched.returncode == ExitCode.VERIFY_FAILED


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [("--package-id", "Hello", "package_id 'Hello'"), ("--short-description", "Hi", "3 to 256"),
     ("--url", "ftp://example.com/{name}", "http(s)://")],
)  # fmt: skip
def test_a_value_winget_would_refuse_is_refused_first(
    tmp_path: Path, flag: str, value: str, named: str
) -> None:
    dist = built_bundle(tmp_path)
    given = {**dict(zip(WINGET[::2], WINGET[1::2], strict=True)), URL[0]: URL[1], flag: value}
    refused = run_bundle("publish", str(dist), *(part for pair in given.items() for part in pair))
    assert refused.returncode == ExitCode.CONFIG, refused.stderr
    assert named in refused.stderr and refused.stderr.count("\n") == 1
    assert not (dist / "release").exists()


def test_the_web_setup_of_a_runtime_pack_gets_the_manifests_when_named(tmp_path: Path) -> None:
    """A GPU setup spans slices; the runtime pack's web setup is one file: --winget-setup
    picks it, by the name its script's OutputBaseFilename gives."""
    dist = built_bundle(tmp_path)
    (dist / "Output" / "hello-1.0.0.0-setup-1.bin").write_bytes(b"slice")
    web = script().replace("OutputBaseFilename=hello-1.0.0.0-setup", "OutputBaseFilename=hello-web")
    (dist / "setup-web.iss").write_text(web, encoding="utf-8")
    (dist / "Output" / "hello-web.exe").write_bytes(b"MZ web setup")
    done = run_bundle("publish", str(dist), *WINGET, *URL, "--winget-setup", "hello-web.exe")
    assert done.returncode == 0, done.stderr
    folder = dist / "release" / "winget" / "Example.Hello"
    installer = load_yaml(folder / "Example.Hello.installer.yaml")
    [entry] = installer["Installers"]
    assert entry["InstallerUrl"].endswith("/hello-web.exe")
    assert entry["InstallerSha256"] == hashlib.sha256(b"MZ web setup").hexdigest().upper()
    unknown = run_bundle("publish", str(dist), *WINGET, *URL, "--winget-setup", "nope.exe")
    assert unknown.returncode == ExitCode.CONFIG and "hello-web.exe" in unknown.stderr


@COREUTILS
def test_the_runtime_pack_s_setup_and_parts_come_from_the_pack_cache(tmp_path: Path) -> None:
    """setup-web.iss downloads the pack: its setup and parts, compiled into the cache's
    runtime-packs/, are published and listed; without them the web setup cannot be published."""
    dist = built_bundle(tmp_path)
    name = "0123456789abcdef-aabbccdd"
    web = script().replace("OutputBaseFilename=hello-1.0.0.0-setup", "OutputBaseFilename=hello-web")
    (dist / "setup-web.iss").write_text(f'#define PackName "bundle-pack-{name}"\n{web}', "utf-8")
    (dist / "Output" / "hello-web.exe").write_bytes(b"MZ web setup")
    cache = tmp_path / "cache"
    refused = run_bundle("publish", str(dist), "--cache-dir", str(cache))
    assert refused.returncode == ExitCode.INPUT, refused.stderr
    assert f"bundle-pack-{name}.exe" in refused.stderr and "--cache-dir" in refused.stderr
    packs = cache / "runtime-packs" / name
    packs.mkdir(parents=True)
    parts = [packs / f"bundle-pack-{name}{suffix}" for suffix in (".exe", "-1.bin", "-2.bin")]
    for number, part in enumerate(parts):
        part.write_bytes(b"pack %d" % number)
    done = run_bundle("publish", str(dist), "--cache-dir", str(cache))
    assert done.returncode == 0, done.stderr
    assert {part.name for part in parts} <= set(sha256sum_check(dist / "release"))


def test_two_files_of_one_name_are_refused_and_one_file_twice_is_one(tmp_path: Path) -> None:
    dist = built_bundle(tmp_path)
    elsewhere = tmp_path / "other" / "hello.zip"  # another archive, named like DIST's
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"another zip")
    clash = run_bundle("publish", str(dist), "--archive", str(elsewhere))
    assert clash.returncode == ExitCode.CONFLICT, clash.stderr
    assert str(elsewhere) in clash.stderr and "same name" in clash.stderr
    setup = dist / "Output" / SETUP
    setup.rename(dist / SETUP)  # ISCC told to write beside the script: --setups DIST
    done = run_bundle("publish", str(dist), "--setups", str(dist), "--json")
    assert done.returncode == 0, done.stderr
    names = [f["name"] for f in json.loads(done.stdout)["files"]]
    assert names.count("bundle.lock.json") == 1 and SETUP in names
    assert "hello.exe" not in names and "onnxruntime.dll" not in names  # the app's, not setups
