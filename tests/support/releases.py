"""A built bundle as `bundle publish` takes it, and the real consumers of what it writes: the
folder (a lock with pip, URL and local-folder inputs, its licence files, setup.iss, stand-in
setups in Output/, a .zip and a .7z holding the lock), `sha256sum -c`, winget's vendored
schemas (tests/fixtures/winget-schemas/) and the in-toto bindings."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import py7zr

from bundler.closure.lock import LOCK_NAME, Lock, LockedFile
from bundler.closure.lockfile import write_lock
from tests.support.paths import CPU, REPO
from tests.support.skips import require, require_module

# spdx-tools' command line, as its console script `pyspdxtools` runs it
# The published files' consumers are test dependencies of the Linux run (pip install -e .[test]);
# the Windows unit tier has none of them and skips with this reason (tests/test_windows_unit_tier).
CONSUMER_ABSENT = "a consumer of the published files is not installed (pip install -e .[test]): "


def consumer(module: str) -> Any:
    """The consumer `module` (yaml, jsonschema, in_toto_attestation, spdx_tools, cyclonedx)."""
    return require_module(module, CONSUMER_ABSENT + module)


def load_yaml(path: Path) -> Any:
    return consumer("yaml").safe_load(path.read_text(encoding="utf-8"))


PYSPDXTOOLS = (sys.executable, "-m", "spdx_tools.spdx.clitools.pyspdxtools")
SCHEMAS = REPO / "tests" / "fixtures" / "winget-schemas" / "1.12.0"
APP_ID = "{{1A734286-2D97-54EA-B2DD-44C7A68DAA90}"
SETUP = "hello-1.0.0.0-setup.exe"
PACK = "bundle-pack-0123456789abcdef"
ORT_WHEEL = "1c3e5d415b78337fa0b1b75291e9ea9fb2a4c1f148eb5811e7212fed02cfffa8"
MSVC_WHEEL = "aba7fbe71897d25ed53fbb7f391e9f50289378a8a9ae218ba18530c663448391"
ZIP_SHA = "77" * 32
MIT_TEXT = "MIT License\n\nCopyright (c) Microsoft Corporation.\n"
MSVC_TEXT = "Distributable Code for Visual Studio 2022\n(the stand-in's text)\n"
PRIVILEGES = {
    "machine": "PrivilegesRequired=admin",
    "user": "PrivilegesRequired=lowest",
    "ask": "PrivilegesRequired=lowest\nPrivilegesRequiredOverridesAllowed=dialog commandline",
}


def script(scope: str = "machine") -> str:
    return (
        f"; a rendered script's [Setup] lines\n[Setup]\nAppId={APP_ID}\nAppName=hello\n"
        "AppVersion=1.0.0.0\nAppPublisher=Example Ltd\nMinVersion=10.0.10240\n"
        f"{PRIVILEGES[scope]}\nOutputBaseFilename=hello-1.0.0.0-setup\n\n[Files]\n"
        'Source: "hello.exe"; DestDir: "{app}"\n'
    )


def _entry(folder: Path, name: str, data: bytes, **fields: Any) -> LockedFile:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    return LockedFile(name, fields.pop("kind", "bundled"), digest, len(data), **fields)


def built_bundle(folder: Path, scope: str = "machine") -> Path:
    """`folder`/dist as a CPU build with --sbom-less defaults leaves it, and Output/ as ISCC
    would: the app's setup and a runtime pack's setup with one part (stand-in bytes)."""
    dist = folder / "dist"
    pip_ort = {"artifact": "onnxruntime", "origin": "pip:onnxruntime==1.19.2"}
    pip_msvc = {"artifact": "msvc-runtime", "origin": "pip:msvc-runtime==14.44.35112"}
    files = (
        _entry(dist, "hello.exe", b"MZ app", kind="app"),
        _entry(dist, "onnxruntime.dll", b"MZ ort", archive_sha256=ORT_WHEEL, **pip_ort),
        _entry(dist, "msvcp140.dll", b"MZ msvcp", archive_sha256=MSVC_WHEEL, **pip_msvc),
        _entry(dist, "licenses/onnxruntime/LICENSE", MIT_TEXT.encode(), kind="license",
               archive_sha256=ORT_WHEEL, artifact="onnxruntime"),
        _entry(dist, "licenses/msvc-runtime/LICENSE", MSVC_TEXT.encode(), kind="license",
               archive_sha256=MSVC_WHEEL, artifact="msvc-runtime"),
        _entry(dist, "extra.dll", b"MZ extra", artifact="extra",
               origin="https://example.com/extra.zip", archive_sha256=ZIP_SHA),
        _entry(dist, "mine.dll", b"MZ local", origin="/opt/deps/bin"),
    )  # fmt: skip
    lock = Lock(CPU, "x64", "app-local", files, app="hello.exe", app_file_version="1.0.0.0")
    write_lock(dist / LOCK_NAME, replace(lock, min_windows="10.0.10240"))
    (dist / "setup.iss").write_text(script(scope), encoding="utf-8")
    output = dist / "Output"
    output.mkdir()
    (output / SETUP).write_bytes(b"MZ setup " * 1000)
    (output / f"{PACK}.exe").write_bytes(b"MZ pack")
    (output / f"{PACK}-1.bin").write_bytes(b"pack part")
    with zipfile.ZipFile(dist / "hello.zip", "w") as archive:
        archive.write(dist / LOCK_NAME, f"hello/{LOCK_NAME}")
    with py7zr.SevenZipFile(folder / "hello.7z", "w") as archive:
        archive.write(dist / LOCK_NAME, f"hello/{LOCK_NAME}")
    return dist


def sha256sum_check(folder: Path) -> list[str]:
    """`sha256sum -c SHA256SUMS` in `folder`: the names it checked (asserting it passed)."""
    require(shutil.which("sha256sum") is not None, "coreutils' sha256sum is not on PATH")
    done = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=folder, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line.rsplit(": ", 1)[0] for line in done.stdout.splitlines()]


def winget_errors(manifest: Path) -> list[str]:
    """The schema's complaints about one manifest (its ManifestType picks the schema)."""
    data = load_yaml(manifest)
    schema = json.loads(
        (SCHEMAS / f"manifest.{data['ManifestType']}.1.12.0.json").read_text("utf-8")
    )
    return [
        error.message for error in consumer("jsonschema").Draft7Validator(schema).iter_errors(data)
    ]


def lock_pins(lock: Path) -> dict[str, str]:
    """The lock's pinned inputs read from its JSON by this test's own rule: a pip pin as its
    purl, a URL as itself, each with its archive's SHA-256."""
    pins = {}
    for item in json.loads(lock.read_text(encoding="utf-8"))["files"]:
        origin = item.get("origin") or ""
        if origin.startswith("pip:"):
            name, version = origin[4:].split("==")
            pins[f"pkg:pypi/{name}@{version}"] = item["archive_sha256"]
        elif origin.startswith("https://"):
            pins[origin] = item["archive_sha256"]
    return pins
