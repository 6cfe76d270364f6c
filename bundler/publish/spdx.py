"""Decide layer: an SPDX 2.3 JSON SBOM of a bundle (https://spdx.github.io/spdx-spec/v2.3/),
from the inputs of the CycloneDX one (bundler.render.sbom): the lock's files, the profile's
supplier and licence of each artifact. One package a shipped file, with its SHA-256, where it
came from (the URL, or the purl of its wheel) and its licence. A `LicenseRef-*` identifier
carries its text (`hasExtractedLicensingInfos`), read from the licence files the bundle ships
for that artifact. Reproducible: the document's namespace is derived from its content, and its
creation time is the release's source date (SOURCE_DATE_EPOCH), else a fixed one."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bundler import __version__
from bundler.closure.lock import Lock, LockedFile
from bundler.publish.slsa import pinned_uri
from bundler.target.profiles import Artifact, Profile

SPDX_NAME = "bundle.spdx.json"
FIXED_DATE = 315532800  # 1980-01-01T00:00:00Z: the archives' fixed time (bundler/ship/archive.py)
_REF = re.compile(r"LicenseRef-[A-Za-z0-9.\-]+")
_NO_TEXT = "The bundle ships no licence file for this identifier; see the supplier's terms."


def spdx_document(
    lock: Lock, profile: Profile, app_name: str, texts: Mapping[str, str], source_date: int | None
) -> dict[str, Any]:
    artifacts = {artifact.name: artifact for artifact in profile.artifacts}
    shipped = [item for item in lock.files if item.kind not in ("app",)]
    packages = [
        _package(number, item, artifacts.get(item.artifact or ""))
        for number, item in enumerate(shipped, 1)
    ]
    root = _root(app_name, lock)
    body: dict[str, Any] = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"{app_name} (bundle, profile {lock.profile})",
        "creationInfo": {
            "created": _date(source_date),
            "creators": [f"Tool: bundle-{__version__}"],
        },
        "packages": [root, *packages],
        "relationships": [
            {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
             "relatedSpdxElement": root["SPDXID"]},
            *({"spdxElementId": root["SPDXID"], "relationshipType": "CONTAINS",
               "relatedSpdxElement": package["SPDXID"]} for package in packages),
        ],
        "hasExtractedLicensingInfos": _extracted(packages, artifacts, texts),
    }  # fmt: skip
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()
    namespace = f"https://spdx.org/spdxdocs/bundle-{_id(app_name)}-{digest[:32]}"
    return {**body, "documentNamespace": namespace}


def _root(app_name: str, lock: Lock) -> dict[str, Any]:
    package: dict[str, Any] = {
        "SPDXID": "SPDXRef-Package-app",
        "name": app_name,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "APPLICATION",
    }
    if lock.app_file_version:
        package["versionInfo"] = lock.app_file_version
    return package


def _package(number: int, item: LockedFile, artifact: Artifact | None) -> dict[str, Any]:
    licence = artifact.license if artifact and artifact.license else "NOASSERTION"
    uri = pinned_uri(item)
    package: dict[str, Any] = {
        "SPDXID": f"SPDXRef-File-{number}-{_id(item.name)}",
        "name": item.name,
        "downloadLocation": uri if uri and "://" in uri else "NOASSERTION",
        "filesAnalyzed": False,
        "checksums": [{"algorithm": "SHA256", "checksumValue": item.sha256}],
        "licenseConcluded": licence,
        "licenseDeclared": licence,
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "FILE" if item.kind == "license" else "LIBRARY",
    }
    version = artifact.version if artifact else item.file_version
    if version:
        package["versionInfo"] = version
    if artifact and artifact.supplier:
        package["supplier"] = f"Organization: {artifact.supplier}"
    if uri and uri.startswith("pkg:"):
        package["externalRefs"] = [
            {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
             "referenceLocator": uri}
        ]  # fmt: skip
    return package


def _extracted(
    packages: list[dict[str, Any]], artifacts: Mapping[str, Artifact], texts: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One entry a LicenseRef the packages use, with the texts of the artifacts it licenses."""
    owners: dict[str, list[str]] = {}
    for artifact in sorted(artifacts.values(), key=lambda entry: entry.name):
        for ref in _REF.findall(artifact.license or ""):
            owners.setdefault(ref, []).append(artifact.name)
    used = {ref for package in packages for ref in _REF.findall(package["licenseDeclared"])}
    return [
        {"licenseId": ref, "name": ref.removeprefix("LicenseRef-"),
         "extractedText": "\n\n".join(texts[o] for o in owners[ref] if o in texts) or _NO_TEXT}
        for ref in sorted(used)
    ]  # fmt: skip


def _id(name: str) -> str:
    """An SPDX identifier's tail: letters, digits, '.' and '-' only."""
    return re.sub(r"[^A-Za-z0-9.\-]", "-", name)


def _date(source_date: int | None) -> str:
    moment = datetime.fromtimestamp(FIXED_DATE if source_date is None else source_date, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
