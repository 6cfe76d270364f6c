"""Act layer: code signing of the setup and its uninstaller, through Inno Setup's Sign Tool.

The script names the sign tool (`SignTool=bundlesign`, `SignedUninstaller=yes`); the command
itself is given to ISCC when it compiles (`/Sbundlesign=COMMAND`), so a script compiles
unsigned on a machine without the certificate. `write_sign_command` writes that command, one
line without a line end, to signtool.txt next to the script (and, for osslsigncode, the batch
file the command calls, bundlesign.cmd: osslsigncode signs to a copy, which then replaces the
file, two commands that a Sign Tool one-liner cannot chain reliably under Wine's cmd):

    iscc "/Sbundlesign=$(cat dist/signtool.txt)" dist/setup.iss      (bash)
    set /p SIGN=<dist\\signtool.txt                  (cmd: two lines; on one, cmd would expand
    iscc "/Sbundlesign=%SIGN%" dist\\setup.iss        %SIGN% before set /p sets it)

Secrets never reach a rendered file: the PFX password is named by its environment variable
(`password_env`), and the command refers to it as %NAME%, which the `cmd /c` that runs the
command expands at sign time (ISCC starts the command itself, without a shell, from its own
folder). In the command, Inno's sequences stand for what its own quoting cannot hold: $f the
quoted file to sign, $q a quote, $$ a dollar.
"""

from __future__ import annotations

from pathlib import Path

from bundler import __version__
from bundler.render.engine import Templates, write_text
from bundler.render.render_settings import SignSettings

SIGN_TOOL_NAME = "bundlesign"
SIGN_COMMAND_FILE = "signtool.txt"
SIGN_SCRIPT = "bundlesign.cmd"  # the osslsigncode preset's batch file, beside the script
SCRIPT_TEMPLATE = "bundlesign.cmd.j2"


def sign_command(settings: SignSettings) -> str:
    """The Sign Tool command ISCC runs for each file it signs (setup, uninstaller)."""
    if settings.tool == "custom":
        assert settings.command is not None
        return settings.command
    assert settings.certificate is not None
    cert = _quoted(settings.certificate)
    password = f"$q%{settings.password_env}%$q" if settings.password_env else None
    if settings.tool == "signtool":
        parts = ["cmd /c signtool sign /fd sha256 /f", cert]
        parts += ["/p", password] if password else []
        if settings.timestamp_url:
            parts += ["/tr", _quoted(settings.timestamp_url), "/td sha256"]
        parts += ["/d", _quoted(settings.description)] if settings.description else []
        return " ".join([*parts, "$f"])
    return "cmd /c call $p $f"  # $p: bundlesign.cmd beside the script (SignTool=bundlesign $p)


def has_sign_script(settings: SignSettings) -> bool:
    """Whether the preset's command calls bundlesign.cmd (osslsigncode's does)."""
    return settings.tool == "osslsigncode"


def sign_values(settings: SignSettings | None) -> dict[str, str | None]:
    """What an Inno script says about signing: the sign tool's name, and the batch file its
    command calls (osslsigncode); both None without [sign]."""
    return {
        "sign_tool": SIGN_TOOL_NAME if settings is not None else None,
        "sign_script": SIGN_SCRIPT if settings and has_sign_script(settings) else None,
    }


def sign_script(templates: Templates, settings: SignSettings) -> str | None:
    """bundlesign.cmd for the osslsigncode preset (None for the others): sign to FILE.signed,
    then move it over FILE, each step's failure the script's exit code."""
    if not has_sign_script(settings):
        return None
    assert settings.certificate is not None
    cert = settings.certificate
    if cert.startswith("pkcs11:"):
        options = [("-pkcs11cert", cert), ("-key", cert)]
    else:
        options = [("-pkcs12", cert)]
    options += [("-t", settings.timestamp_url)] if settings.timestamp_url else []
    options += [("-n", settings.description)] if settings.description else []
    return templates.render(
        SCRIPT_TEMPLATE,
        tool_version=__version__,
        options=options,
        password_env=settings.password_env,
    )


def write_sign_command(templates: Templates, settings: SignSettings, folder: Path) -> Path:
    """signtool.txt in `folder`: the command for ISCC's /Sbundlesign=, one line, no line end;
    and bundlesign.cmd where the preset has one (else an earlier one is removed)."""
    path = folder / SIGN_COMMAND_FILE
    write_text(path, sign_command(settings))
    script = sign_script(templates, settings)
    if script is not None:
        write_text(folder / SIGN_SCRIPT, script, newline="\r\n")
    else:
        (folder / SIGN_SCRIPT).unlink(missing_ok=True)
    return path


def _quoted(value: str) -> str:
    return "$q" + value.replace("$", "$$") + "$q"
