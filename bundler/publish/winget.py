"""Decide layer: winget manifests of one single-file setup, schema 1.12.0, as winget-pkgs takes a
multi-file package (https://github.com/microsoft/winget-pkgs, "Authoring manifests"): a version,
an installer and a default-locale manifest.

What the script allows decides the scopes (Inno Setup's help, "[Setup]: PrivilegesRequired" and
"PrivilegesRequiredOverridesAllowed"; "Setup Command Line Parameters" for /ALLUSERS and
/CURRENTUSER): `admin` alone installs for the machine; `lowest` alone for the user; `lowest`
with `commandline` among the overrides takes /ALLUSERS (machine) and /CURRENTUSER (user), each
an installer of its own. The product code is what Inno writes its uninstall key under,
`{AppId}_is1` (the help, "[Setup]: AppId"). bundle cannot know the package's identifier, licence
and description, nor where the setup will be downloaded from: they come from bundle.toml's
[publish] or flags. The manifests are YAML; every value is written as a JSON string, which YAML
reads as the same string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bundler.closure.lock import Lock
from bundler.errors import ConfigError
from bundler.publish.scripts import SetupScript

MANIFEST_VERSION = "1.12.0"
SCHEMA_URL = "https://aka.ms/winget-manifest.{kind}.1.12.0.schema.json"
SILENT = "/SP- /VERYSILENT /SUPPRESSMSGBOXES /NORESTART"
SILENT_WITH_PROGRESS = "/SP- /SILENT /SUPPRESSMSGBOXES /NORESTART"
SCOPE_SWITCHES = {"machine": "/ALLUSERS", "user": "/CURRENTUSER"}


@dataclass(frozen=True)
class WingetInfo:
    """What a winget package needs that the bundle cannot know."""

    package_id: str
    license: str
    short_description: str
    url: str  # a template: {name} is the setup's file name, {version} the package version
    publisher: str | None = None


# winget's own limits (its 1.12.0 schemas): PackageIdentifier is 2 to 8 dot-separated parts of
# up to 32 characters without blanks, control characters or any of \ / : * ? " < > |; License
# takes 3 to 512 characters, ShortDescription 3 to 256.
_PACKAGE_ID = re.compile(r'[^.\s\\/:*?"<>|\x01-\x1f]{1,32}(\.[^.\s\\/:*?"<>|\x01-\x1f]{1,32}){1,7}')
_LENGTHS = {"license": (3, 512), "short_description": (3, 256)}


def check_info(info: WingetInfo) -> WingetInfo:
    """`info` if winget would take it, else a ConfigError naming the value and the rule."""
    if not _PACKAGE_ID.fullmatch(info.package_id):
        raise ConfigError(
            f"package_id {info.package_id!r}: not a winget PackageIdentifier; give Publisher."
            "Name (2 to 8 parts separated by dots, no blanks), e.g. Example.Hello."
        )
    for key, (low, high) in _LENGTHS.items():
        value = getattr(info, key)
        if not low <= len(value) <= high:
            raise ConfigError(f"{key} {value!r}: winget takes {low} to {high} characters.")
    if not info.url.lower().startswith(("https://", "http://")):
        raise ConfigError(f"url {info.url!r}: winget takes an http(s):// URL; give one.")
    return info


@dataclass(frozen=True)
class Manifest:
    """One manifest file: its name in the package folder and its data."""

    name: str
    data: dict[str, Any]

    def text(self) -> str:
        schema = SCHEMA_URL.format(kind=self.data["ManifestType"])
        lines = [f"# yaml-language-server: $schema={schema}", "", *_yaml(self.data, 0)]
        return "\n".join(lines) + "\n"


def scopes(script: SetupScript) -> dict[str, str | None]:
    """Scope -> the switch that selects it (None: the script's only scope, no switch)."""
    required = (script.directive("PrivilegesRequired") or "admin").lower()
    overrides = (script.directive("PrivilegesRequiredOverridesAllowed") or "").lower().split()
    if "commandline" in overrides:
        return dict(SCOPE_SWITCHES)
    return {"user" if required == "lowest" else "machine": None}


def product_code(script: SetupScript) -> str:
    """`{AppId}_is1`: the script writes AppId with its brace doubled (`{{GUID}`)."""
    app_id = script.directive("AppId")
    if not app_id:
        raise ConfigError(f"{script.name}: has no AppId; render it again with bundle render iss.")
    return app_id.replace("{{", "{") + "_is1"


def manifests(
    script: SetupScript, setup_name: str, sha256: str, lock: Lock, info: WingetInfo
) -> list[Manifest]:
    """The three manifests of `script`'s setup; a setup in slices is refused."""
    if script.slices:
        parts = ", ".join(p.name for p in script.slices)
        raise ConfigError(
            f"{setup_name}: comes in slices ({parts}), and winget downloads and runs one file; "
            "publish a single-file setup to winget (a CPU setup, the runtime pack's web setup, "
            "or a full setup with the pack appended: docs/publishing.md), or drop "
            "[publish] package_id / --package-id to publish without winget manifests."
        )
    version = script.directive("AppVersion") or lock.app_file_version or "0"
    common = {"PackageIdentifier": info.package_id, "PackageVersion": version}
    installers = [
        _installer(setup_name, sha256, info, version, scope, switch)
        for scope, switch in scopes(script).items()
    ]
    installer = {
        **common,
        "InstallerType": "inno",
        "MinimumOSVersion": lock.min_windows or "10.0.0.0",
        "ProductCode": product_code(script),
        "Installers": installers,
        "ManifestType": "installer",
        "ManifestVersion": MANIFEST_VERSION,
    }
    locale = {
        **common,
        "PackageLocale": "en-US",
        "Publisher": info.publisher
        or script.directive("AppPublisher")
        or info.package_id.split(".")[0],
        "PackageName": script.directive("AppName") or lock.app_product_name or info.package_id,
        "License": info.license,
        "ShortDescription": info.short_description,
        "ManifestType": "defaultLocale",
        "ManifestVersion": MANIFEST_VERSION,
    }
    head = {
        **common,
        "DefaultLocale": "en-US",
        "ManifestType": "version",
        "ManifestVersion": MANIFEST_VERSION,
    }
    base = info.package_id
    return [
        Manifest(f"{base}.yaml", head),
        Manifest(f"{base}.installer.yaml", installer),
        Manifest(f"{base}.locale.en-US.yaml", locale),
    ]


def _installer(
    setup_name: str, sha256: str, info: WingetInfo, version: str, scope: str, switch: str | None
) -> dict[str, Any]:
    switches = {"Silent": SILENT, "SilentWithProgress": SILENT_WITH_PROGRESS}
    if switch:
        switches["Custom"] = switch
    return {
        "Architecture": "x64",
        "Scope": scope,
        "InstallerUrl": info.url.replace("{name}", setup_name).replace("{version}", version),
        "InstallerSha256": sha256.upper(),
        "InstallerSwitches": switches,
    }


def _yaml(value: Any, indent: int) -> list[str]:
    """Block YAML of dicts and lists, scalars as JSON (a subset YAML 1.2 reads as written)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                lines += [f"{pad}{key}:", *_yaml(item, indent + 2)]
            else:
                lines.append(f"{pad}{key}: {json.dumps(item, ensure_ascii=False)}")
    else:
        for item in value:
            if not isinstance(item, dict | list):
                lines.append(f"{pad}- {json.dumps(item, ensure_ascii=False)}")
                continue
            nested = _yaml(item, indent + 2)
            lines += [f"{pad}- {nested[0].lstrip()}", *nested[1:]]
    return lines
