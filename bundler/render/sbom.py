"""Act layer: render a CycloneDX 1.5 SBOM of a bundle: a view of the lock file plus the profile's
supplier and licence data. Reproducible: no timestamp, and a serial number derived from the
content (the same bundle gives the same bytes)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from bundler import __version__
from bundler.closure.lock import Lock, LockedFile
from bundler.disk import files
from bundler.target.profiles import Artifact, Profile

SBOM_NAME = "bundle.cdx.json"


def sbom_document(lock: Lock, profile: Profile, app_name: str) -> dict[str, Any]:
    artifacts = {artifact.name: artifact for artifact in profile.artifacts}
    components = [
        _component(item, artifacts.get(item.artifact or ""))
        for item in lock.files
        if item.kind != "app"
    ]
    body: dict[str, Any] = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "tools": {
                "components": [{"type": "application", "name": "bundle", "version": __version__}]
            },
            "component": {"type": "application", "name": app_name, "bom-ref": app_name},
            "properties": [{"name": "bundle:profile", "value": lock.profile}],
        },
        "components": components,
    }
    serial = uuid.uuid5(uuid.NAMESPACE_URL, "bundle:" + json.dumps(body, sort_keys=True))
    return {"bomFormat": "CycloneDX", "specVersion": "1.5", "serialNumber": serial.urn, **body}


def _component(item: LockedFile, artifact: Artifact | None) -> dict[str, Any]:
    component: dict[str, Any] = {
        "type": "file" if item.kind == "license" else "library",
        "bom-ref": item.name,
        "name": item.name,
        "hashes": [{"alg": "SHA-256", "content": item.sha256}],
    }
    version = artifact.version if artifact else item.file_version
    if version:
        component["version"] = version
    if artifact and artifact.supplier:
        component["supplier"] = {"name": artifact.supplier}
    if artifact and artifact.license:
        component["licenses"] = [{"expression": artifact.license}]
    if item.origin and item.origin.startswith("pip:"):
        package, _, pinned = item.origin.removeprefix("pip:").partition("==")
        component["purl"] = f"pkg:pypi/{package}@{pinned}"
    elif item.origin and "://" in item.origin:
        component["externalReferences"] = [{"type": "distribution", "url": item.origin}]
    return component


def write_sbom(path: Path, lock: Lock, profile: Profile, app_name: str) -> None:
    temp = path.with_name(f".{path.name}.bundle-tmp")
    document = json.dumps(sbom_document(lock, profile, app_name), indent=2) + "\n"
    temp.write_text(document, encoding="utf-8", newline="\n")  # the same bytes on Windows
    files.replace(temp, path)
