"""Decide layer: the provenance of a release, an in-toto v1 Statement with a SLSA v1
provenance predicate (https://slsa.dev/spec/v1.0/provenance): its subjects are the files of
SHA256SUMS; its build definition names the profile, the app and the build's options; its
resolved dependencies are the lock's pinned artifacts, each as its URL or purl with the SHA-256
of the archive the build verified. A file that came from a local folder (a profile's `dir`
source, --search) is listed by name and hash and marked not reproducible: nobody else can
fetch it. The statement is unsigned: a CI signs it (docs/publishing.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundler.closure.lock import Lock, LockedFile

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
# Our build type, a URN (the project has no site of its own to host it): docs/publishing.md,
# "The provenance statement", defines what its externalParameters hold.
BUILD_TYPE = "urn:ort-bundle:build-type:bundle-build:v1"
DEFAULT_BUILDER = "urn:ort-bundle:builder:unverified"  # a CI gives its own (--builder-id)
STATEMENT_NAME = "bundle.provenance.json"
NOT_REPRODUCIBLE = "local-folder"
_OWN = ("app", "doctor")  # the app is a parameter; the doctor is bundle's own program


def statement(
    subjects: Mapping[str, str], lock: Lock, app_sha256: str | None, builder_id: str
) -> dict[str, Any]:
    """The Statement for `subjects` (name -> SHA-256), built from `lock`."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": subjects[name]}} for name in sorted(subjects)
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": external_parameters(lock, app_sha256),
                "resolvedDependencies": dependencies(lock),
            },
            "runDetails": {
                "builder": {"id": builder_id, "version": {"bundle": lock.tool_version}},
            },
        },
    }


def external_parameters(lock: Lock, app_sha256: str | None) -> dict[str, Any]:
    app: dict[str, Any] = {"name": lock.app, "fileVersion": lock.app_file_version}
    if app_sha256:
        app["digest"] = {"sha256": app_sha256}
    options = {
        "architecture": lock.architecture,
        "vcRuntime": lock.vc_runtime,
        "gpus": list(lock.gpus),
        "eps": [pack.name for pack in lock.eps],
        "models": [{"name": m.name, "digest": {"sha256": m.sha256}} for m in lock.models],
        "doctor": lock.doctor,
        "runtimePack": lock.runtime_pack.sha256 if lock.runtime_pack else None,
    }
    return {"profile": lock.profile, "app": app, "options": options}


def dependencies(lock: Lock) -> list[dict[str, Any]]:
    """Every pinned archive once (a licence file shares its artifact's archive), then every
    file from a local folder, by name."""
    uris = {item.archive_sha256: pinned_uri(item) for item in lock.files if pinned_uri(item)}
    pinned: dict[str, dict[str, Any]] = {}
    local: list[dict[str, Any]] = []
    for item in lock.files:
        if item.kind in _OWN:
            continue
        uri = uris.get(item.archive_sha256) if item.archive_sha256 else None
        if uri is not None and item.archive_sha256:
            entry = {"uri": uri, "digest": {"sha256": item.archive_sha256}}
            pinned.setdefault(item.archive_sha256, {**entry, "name": item.artifact or uri})
        elif item.archive_sha256 is None:
            local.append(_local(item))
    ordered = sorted(pinned.values(), key=lambda entry: (entry["uri"], entry["digest"]["sha256"]))
    return [*ordered, *sorted(local, key=lambda entry: entry["name"])]


def pinned_uri(item: LockedFile) -> str | None:
    """A pip pin as its purl (pkg:pypi/NAME@VERSION), a URL as itself; None: a local file."""
    origin = item.origin or ""
    if origin.startswith("pip:"):
        package, _, version = origin.removeprefix("pip:").partition("==")
        return f"pkg:pypi/{package.lower()}@{version}"
    return origin if "://" in origin else None


def _local(item: LockedFile) -> dict[str, Any]:
    return {
        "name": item.name,
        "digest": {"sha256": item.sha256},
        "annotations": {"source": NOT_REPRODUCIBLE, "reproducible": False},
    }


def dependency_keys(entries: list[Any]) -> dict[str, str]:
    """A statement's dependencies as {uri or name: sha256}, for comparing two lists."""
    keys: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, dict):
            digest = entry.get("digest") if isinstance(entry.get("digest"), dict) else {}
            key = str(entry.get("uri") or entry.get("name") or "")
            keys[key] = str((digest or {}).get("sha256", ""))
    return keys
