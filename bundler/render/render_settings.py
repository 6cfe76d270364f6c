"""Decide layer: the user's settings of the installer, its signing and the post-build step.

They come from flags, else bundle.toml's [render] and [sign] tables. Each is a frozen
dataclass, validated by `checked()` before anything is built or written, so a bad value is one
ConfigError naming it, never a half-written bundle. The renderers (bundler.render.iss, .sign,
.postbuild) take them as given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bundler.config.validate import COMPRESSIONS, INSTALL_SCOPES, SIGN_TOOLS
from bundler.errors import ConfigError
from bundler.render.escaping import inno_directive
from bundler.target.manifest import Table

# Measured on the 2.6 GB GPU payload (benchmarks/README.md, P9): LZMA2 at "normal" with a 16 MiB
# dictionary, solid, in ISCC's separate 64-bit compressor process took 0.96x the time of
# `7z a -mx5 -mmt=on` at 1.02x its size; Inno's plain lzma2 (= lzma2/max, per file) 1.20x / 1.04x.
DEFAULT_COMPRESSION = "lzma2/normal"
DEFAULT_DICTIONARY_KB = 16384
# Keys that would put a secret into bundle.toml: refused, whatever their value.
SECRET_KEYS = ("password", "pass", "pfx_password", "pin", "passphrase")
DEFAULT_PACK_PART_MB = 100
PACK_PART_MB = (4, 2000)  # Inno Setup's DiskSliceSize, in MB (1 MB = 1,000,000 bytes)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The time of every file in a setup without a source date: 1980-01-01 00:00:00 UTC, the archives'
# fixed time (bundler/ship/archive.py). Never the clock, never the source file's time, so the
# same inputs compile to the same setup bytes anywhere (docs/reproducible.md).
FIXED_FILE_DATE = 315532800


@dataclass(frozen=True)
class IssSettings:
    """What the user decides about the installer (flags, else bundle.toml [render])."""

    app_name: str | None = None  # default: the exe's ProductName, else its name without .exe
    app_version: str | None = None  # default: the exe's FileVersion (VS_VERSIONINFO)
    publisher: str | None = None
    app_id: str | None = None  # default: derived from the app name, stable across runs
    compression: str = DEFAULT_COMPRESSION
    shortcut: bool = False  # a Start-menu shortcut to the app
    require_gpu: bool | None = None  # default: the profile's gpu_driver.require
    require_eps: tuple[str, ...] = ()  # packs the setup must be able to use (--require-ep)
    # The runtime pack apart from the app (docs/runtime-pack.md): its own setup, compiled once
    # per pack; `pack_url` (a folder URL) adds setup-web.iss, which downloads it from there
    runtime_pack: bool = False
    pack_url: str | None = None
    # the pack's setup in parts of this size (Inno's disk slices), each downloaded and checked
    # on its own, so a broken download resumes at the first part the machine lacks
    pack_part_mb: int = DEFAULT_PACK_PART_MB
    install_scope: str = "machine"  # "machine" (admin), "user" (no admin) or "ask"
    sign: SignSettings | None = None  # bundle.toml [sign]: sign the setup and its uninstaller
    # $SOURCE_DATE_EPOCH: the time the app's setup gives its files; None: FIXED_FILE_DATE
    source_date: int | None = None

    def checked(self, vc_runtime: str | None = None) -> IssSettings:
        """The settings, validated before anything is built or written (with the bundle's VC++
        runtime mode when it is known: installer mode needs administrator rights)."""
        if self.install_scope not in INSTALL_SCOPES:
            raise ConfigError(
                f"install_scope '{self.install_scope}' is not one of {', '.join(INSTALL_SCOPES)}."
            )
        if self.install_scope != "machine" and vc_runtime == "installer":
            raise ConfigError(
                f"install_scope '{self.install_scope}' cannot run vc_redist.x64.exe, which needs "
                "administrator rights; use --vc-runtime app-local, or install_scope 'machine'."
            )
        if self.compression not in COMPRESSIONS:
            raise ConfigError(
                f"installer compression '{self.compression}' is not one Inno Setup knows; "
                "use lzma2 (the default), lzma2/fast, zip, zip/1 ... zip/9, bzip or none."
            )
        if self.sign is not None:
            self.sign.checked()
        if self.pack_url is not None:
            checked_pack_url(self.pack_url)
        if self.pack_part_mb != DEFAULT_PACK_PART_MB and not (self.runtime_pack or self.pack_url):
            raise ConfigError(
                "pack_part_mb sizes the runtime pack's parts: add --runtime-pack (or [render] "
                "runtime_pack = true), or leave pack_part_mb out."
            )
        if not PACK_PART_MB[0] <= self.pack_part_mb <= PACK_PART_MB[1]:
            raise ConfigError(
                f"pack_part_mb {self.pack_part_mb} is not between {PACK_PART_MB[0]} and "
                f"{PACK_PART_MB[1]}: the first part also holds the pack's setup program (about "
                "2 MB), and Inno Setup makes no part over 2100 MB."
            )
        for text in (self.app_name, self.app_version, self.publisher, self.app_id):
            if text is not None:
                inno_directive(text)  # refuses what no Inno line can hold, before any work
        if self.app_version is not None and not version_info(self.app_version):
            raise ConfigError(
                f"app version '{self.app_version}' must start with up to four numbers "
                "(1.2, 1.2.3, 1.2.3.4, optionally followed by text such as 1.2.3-rc1)."
            )
        return self


_LOOPBACK = re.compile(r"http://(127\.0\.0\.1|localhost)(:\d+)?(/|$)")


def checked_pack_url(url: str) -> str:
    """An https:// folder URL (plain http only on this machine's loopback, for tests): the web
    setup downloads the pack from it and checks its SHA-256, but a pack URL in a shipped setup
    should not invite a man in the middle to make installs fail."""
    if url.startswith("https://") or _LOOPBACK.match(url):
        inno_directive(url)  # one line, no control characters
        return url
    raise ConfigError(
        f"pack_url '{url}' is not an https:// URL; publish the runtime pack on an https:// "
        "server and give the folder's URL (plain http only for 127.0.0.1, for tests)."
    )


def touch_values(source_date: int | None) -> dict[str, str]:
    """Inno Setup's TouchDate and TouchTime (UTC, with TimeStampsInUTC=yes) for a setup whose
    [Files] carry the touch flag: with it ISCC stores this time for each file instead of the
    source file's, which differs from checkout to checkout (docs/reproducible.md)."""
    moment = datetime.fromtimestamp(FIXED_FILE_DATE if source_date is None else source_date, UTC)
    return {"touch_date": moment.strftime("%Y-%m-%d"), "touch_time": moment.strftime("%H:%M:%S")}


def version_info(version: str) -> str | None:
    """The numeric part Windows puts in the setup's own version resource (up to 4 numbers)."""
    match = re.match(r"\d{1,5}(\.\d{1,5}){0,3}", version)
    return match.group(0) if match else None


@dataclass(frozen=True)
class SignSettings:
    """bundle.toml [sign]: which tool signs, with what (bundler.render.sign says how)."""

    tool: str
    command: str | None = None  # tool = "custom": Inno's Sign Tool command ($f, $q, $$)
    certificate: str | None = None  # a PFX file, or (osslsigncode) a PKCS#11 URI
    password_env: str | None = None  # the NAME of the variable that holds the PFX password
    timestamp_url: str | None = None
    description: str | None = None

    def checked(self) -> SignSettings:
        """The settings, or a one-line ConfigError saying what to change."""
        if self.tool not in SIGN_TOOLS:
            raise ConfigError(f"[sign] tool '{self.tool}' is not one of {', '.join(SIGN_TOOLS)}.")
        if self.tool == "custom":
            if not self.command or "$f" not in self.command:
                raise ConfigError(
                    "[sign] tool 'custom' needs command = \"...\" naming the file to sign as $f "
                    "(Inno Setup's Sign Tool syntax: $q a quote, $$ a dollar)."
                )
            _one_line("command", self.command)
            return self
        if self.command is not None:
            raise ConfigError(
                f"[sign] command is only for tool = 'custom'; tool '{self.tool}' builds its own."
            )
        if not self.certificate:
            raise ConfigError(
                f"[sign] tool '{self.tool}' needs certificate = \"PATH.pfx\""
                + (" (or a pkcs11: URI)." if self.tool == "osslsigncode" else ".")
            )
        if self.password_env is not None and not _ENV_NAME.fullmatch(self.password_env):
            raise ConfigError(
                f"[sign] password_env '{self.password_env}' is not an environment variable "
                "name; give the NAME of the variable that holds the password (e.g. PFX_PASSWORD)."
            )
        for key in ("certificate", "timestamp_url", "description"):
            value = getattr(self, key)
            if value is not None:
                _plain(key, value)
        return self


def refuse_secrets(table: Table) -> None:
    """A literal password in the [sign] table is an error, never silently ignored."""
    for key in SECRET_KEYS:
        if table.peek(key) is not None:
            raise ConfigError(
                f"{table.where}: {key}: never put a password in bundle.toml; set "
                'password_env = "NAME" and the password in that environment variable.'
            )


def _plain(key: str, value: str) -> None:
    """A value the command quotes as $q...$q: no quote, no line end, no %, which cmd would
    expand."""
    _one_line(key, value)
    bad = next((char for char in '"%' if char in value), None)
    if bad is not None:
        raise ConfigError(
            f"[sign] {key} '{value}' contains {bad}, which the sign command cannot pass through "
            "cmd; use a path or URL without it."
        )


def _one_line(key: str, value: str) -> None:
    if "\n" in value or "\r" in value:
        raise ConfigError(f"[sign] {key} must be one line.")


@dataclass(frozen=True)
class PostbuildSettings:
    """project_dir: the Visual Studio project's folder (bundle.toml [render] project_dir, or
    --project-dir); with it the event names the script relative to $(ProjectDir)."""

    project_dir: Path | None = None
