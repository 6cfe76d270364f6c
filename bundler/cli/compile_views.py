"""Talk layer: how each setup a bundle renders compiles, one view for `bundle render iss --json`
and `bundle build --json` alike (docs/runtime-pack.md, docs/ci.md), which the GitHub Action
compiles with: the scripts in the order to compile them, each with ISCC's arguments before the
script (`iscc_args`, unquoted) and its command line for this system's shell and for PowerShell.

The kinds of setup (`kind`): `app`, the app's setup (its EP packs are components of it,
`components`: no other script, no other argument); `full`, the app's setup with the runtime
pack appended by the Sign Tool `bundlepack`, which it needs (`/Sbundlepack=$p`); `web`, the app's
setup that downloads the pack. Either pack setup compiles the pack itself, once per pack, into
the pack cache (ISPP runs ISCC on bundle-pack.iss), so the pack is never a compile of its own.
Signing is not a kind: a signed setup (`signed`) gets `/Sbundlesign=COMMAND`, after the pack's
Sign Tool (the signature covers the pack), COMMAND as signtool.txt holds it: a secret in it is a
`%NAME%` that the `cmd /c` running it expands at sign time, so no line here carries its value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type hints only
    from bundler.render.iss import IssResult

APP, FULL, WEB = "app", "full", "web"
PACK = {APP: None, FULL: "appended", WEB: "downloaded"}  # where the setup's runtime pack is


@dataclass(frozen=True)
class Compile:
    """One ISCC run: `iscc [args] script`. `sign_file`: signtool.txt, which cmd's line reads
    (cmd would expand a %NAME% of the command typed on its own line)."""

    kind: str
    script: Path
    args: tuple[str, ...]
    sign_file: Path | None
    components: tuple[str, ...] = ()


def compiles(result: IssResult) -> tuple[Compile, ...]:
    """The setups of `result` in the order to compile them: the full setup (it compiles the
    pack into the pack cache), then the web setup, which finds it there."""
    from bundler.render.pack_iss import APPEND_TOOL
    from bundler.render.sign import SIGN_TOOL_NAME

    sign = result.sign_command if result.sign_line is not None else None
    signing = (f"/S{SIGN_TOOL_NAME}={result.sign_line}",) if sign is not None else ()
    if result.pack_script is None:
        return (Compile(APP, result.path, signing, sign, result.components),)
    full = Compile(FULL, result.path, (f"/S{APPEND_TOOL}=$p", *signing), sign)
    if result.web_script is None:
        return (full,)
    return (full, Compile(WEB, result.web_script, signing, sign))


def compile_part(result: IssResult) -> dict[str, object]:
    """`compile`, `compile_powershell` and `iscc_args` of the first setup (the app's, or the
    full one), as before there were several, and `setups`: every setup, in order."""
    setups = [setup_json(setup) for setup in compiles(result)]
    first = setups[0]
    return {key: first[key] for key in ("compile", "compile_powershell", "iscc_args")} | {
        "setups": setups
    }


def setup_json(setup: Compile) -> dict[str, object]:
    return {
        "kind": setup.kind,
        "script": str(setup.script),
        "signed": setup.sign_file is not None,
        "runtime_pack": PACK[setup.kind],
        "components": list(setup.components),
        "iscc_args": list(setup.args),
        "compile": iscc_line(setup),
        "compile_powershell": iscc_line_powershell(setup),
    }


def iscc_line(setup: Compile) -> str:
    """The ISCC command for this system's shell: cmd's on Windows, else a POSIX shell's."""
    return _cmd_line(setup) if os.name == "nt" else _posix_line(setup)


def _posix_line(setup: Compile) -> str:
    """Every argument in single quotes, where $p and %NAME% stay as written."""
    args = "".join(_single_quoted(arg, "'\\''") + " " for arg in setup.args)
    return f'iscc {args}"{setup.script}"'


def _cmd_line(setup: Compile) -> str:
    """$p stays literal in cmd's double quotes; %NAME% would not (cmd expands it on the line
    typed, the password then on ISCC's command line), so a sign command with one comes from
    signtool.txt through a FOR variable, whose value cmd does not expand again."""
    words = [f'"{arg}"' for arg in setup.args]
    if setup.sign_file is None or not any("%" in arg for arg in setup.args):
        return f'iscc {"".join(word + " " for word in words)}"{setup.script}"'
    words[-1] = words[-1].split("=", 1)[0] + '=%S"'
    args = "".join(word + " " for word in words)
    return f'for /f "usebackq delims=" %S in ("{setup.sign_file}") do iscc {args}"{setup.script}"'


def iscc_line_powershell(setup: Compile) -> str:
    """Every argument in single quotes, where PowerShell expands nothing (a quote inside is
    doubled); in double quotes it would replace $p."""
    words = (*setup.args, str(setup.script))
    return "iscc " + " ".join(_single_quoted(word, "''") for word in words)


def _single_quoted(word: str, quote: str) -> str:
    return "'" + word.replace("'", quote) + "'"
