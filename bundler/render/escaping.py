"""Decide layer, shared by every renderer: the escaping filters, one per language and place.

Templates (`templates/*.j2`) never see a raw value: each value passes through a filter named
after the language and the place it lands in (an Inno Setup directive, a [Files] source, an
MSBuild property, a cmd.exe argument ...), so escaping is decided here, once, and tested here.
A value no spelling can carry is refused with a ConfigError rather than guessed at. The filters
are pure functions of their value; bundler.render.engine gives them to the Jinja environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from bundler.errors import ConfigError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# The inline-directive start of Inno Setup's preprocessor (ISPP) as our scripts set it with
# `#pragma inlinestart`: "<" cannot occur in a Windows file name, so only free text (app name,
# publisher, version) could contain it, and the filters refuse that instead of guessing.
ISPP_INLINE_START = "<#"
ISPP_INLINE_END = "#>"


def _plain(value: object, what: str) -> str:
    """One line of text; control characters (a newline would end an Inno entry) refused."""
    text = str(value)
    if _CONTROL.search(text):
        raise ConfigError(f"{what} {text!r} contains a control character (newline, tab, ...).")
    if ISPP_INLINE_START in text:
        raise ConfigError(
            f"{what} {text!r} contains '{ISPP_INLINE_START}', which Inno Setup's "
            "preprocessor would read as a directive; choose another text."
        )
    return text


def inno_literal(value: object) -> str:
    """Text inside a double-quoted Inno parameter value where constants are not expanded
    ([Files] Source): only the double quote is special, and it is doubled."""
    return _plain(value, "Inno Setup value").replace('"', '""')


def _without(text: str, refused: str, problem: str, remedy: str) -> str:
    """`text` unchanged, or ConfigError naming the refused characters it holds."""
    bad = sorted(set(text) & set(refused))
    if bad:
        raise ConfigError(f"{text!r} {problem} (it contains {' '.join(bad)}); {remedy}.")
    return text


def inno_source(value: object) -> str:
    """A [Files] Source path: a Windows file name cannot hold `"<>|?*:` (ISCC refuses a quote,
    and `*?` would be wildcards), so such a name is refused rather than escaped."""
    text = _plain(value, "file name")
    return _without(text, '"<>|?*:', "is not a valid Windows file name", "rename the file")


def inno_const(value: object) -> str:
    """Text inside a double-quoted Inno parameter value where `{constants}` are expanded
    (DestDir, Name, Filename): a literal `{` is written `{{` (a `}` needs nothing)."""
    return inno_literal(value).replace("{", "{{")


def comment(value: object) -> str:
    """Text for a one-line comment (`;` in Inno, `//` in Pascal Script)."""
    return _plain(value, "comment text")


def inno_directive(value: object) -> str:
    """A [Setup] directive value (AppName=...): unquoted to the end of the line, constants
    expanded, so `{` is doubled; leading and trailing blanks would be lost, so are refused."""
    text = _plain(value, "Inno Setup [Setup] value")
    if text != text.strip():
        raise ConfigError(f"Inno Setup [Setup] value {text!r} starts or ends with a blank.")
    return text.replace("{", "{{")


def pascal_string(value: object) -> str:
    """A Pascal Script string literal for [Code]: single quotes, an embedded one doubled."""
    return "'" + _plain(value, "Inno Setup [Code] string").replace("'", "''") + "'"


def windows_path(value: object) -> str:
    """A bundle-relative posix path as Windows writes it."""
    return str(value).replace("/", "\\")


# --- MSBuild and XML: ort-bundle.props / ort-bundle.targets ------------------------------------

# What MSBuild reads with a meaning of its own in project text: $( properties, @( item lists,
# %( metadata and %XX escapes, ; list separators, ' condition quotes, ? * wildcards. MSBuild
# reads %XX (two hex digits) back as the character, so a literal is written with these as %XX.
MSBUILD_SPECIAL = "%$@';?*"


def _control_free(value: object, what: str) -> str:
    text = str(value)
    if _CONTROL.search(text):
        raise ConfigError(f"{what} {text!r} contains a control character (newline, tab, ...).")
    return text


def msbuild_escape(value: object) -> str:
    """A literal for MSBuild (a folder or file name, a property's text): every special
    character as %XX, so MSBuild neither expands, splits, globs nor ends a quote on it."""
    text = _control_free(value, "MSBuild value")
    return "".join(f"%{ord(char):02X}" if char in MSBUILD_SPECIAL else char for char in text)


def xml_text(value: object) -> str:
    """Text for XML element content or a double-quoted attribute: & < > " as entities.
    Control characters are refused (XML 1.0 cannot hold most of them)."""
    text = _control_free(value, "XML text")
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


# --- cmd.exe batch files: postbuild.cmd ---------------------------------------------------------

# Outside double quotes cmd gives these a meaning of its own (escape, command separators,
# redirection, blocks); a caret before one makes it literal.
CMD_SPECIAL = "^&|<>()"


def _cmd_value(value: object, what: str) -> str:
    """One line of batch text: a newline would end the command and a double quote would flip
    cmd's quoting for the rest of the line (no Windows file name holds one)."""
    text = str(value)
    if _CONTROL.search(text):
        raise ConfigError(f"{what} {text!r} contains a control character (newline, tab, ...).")
    if '"' in text:
        raise ConfigError(f"{what} {text!r} contains a double quote, which cmd cannot pass.")
    return text


def cmd_quoted(value: object) -> str:
    """Text inside a double-quoted argument of a batch file ("...", set "NAME=..."): the quotes
    already make ^ & | < > ( ) literal, but cmd still expands %NAME% and %1 when it reads the
    line, so % is doubled. (! would need care with delayed expansion, which our scripts turn
    off with setlocal DisableDelayedExpansion.)"""
    return _cmd_value(value, "batch-file value").replace("%", "%%")


def cmd_text(value: object) -> str:
    """Unquoted text in a batch file (an echo line): each of ^ & | < > ( ) gets a caret, so cmd
    prints it instead of acting on it, and % is doubled (a caret does not protect it)."""
    text = _cmd_value(value, "batch-file text")
    escaped = "".join(f"^{char}" if char in CMD_SPECIAL else char for char in text)
    return escaped.replace("%", "%%")


def cmd_call_quoted(value: object) -> str:
    """Text inside a double-quoted argument of CALL in a batch file (a post-build event's
    `call "...\\postbuild.cmd"`). Windows' CALL expands % a second time and doubles every
    caret, quoted or not, which nothing undoes inside quotes; Wine's CALL does neither. No
    spelling works for both, so % and ^ are refused instead of being escaped."""
    text = _cmd_value(value, "CALL argument")
    return _without(
        text,
        "%^",
        "holds characters that cmd's CALL does not pass through unchanged",
        "rename the folder, or edit the command by hand",
    )


# Each filter by the name the templates use (read-only: bundler.render.engine copies it).
FILTERS: Mapping[str, Callable[[Any], str]] = MappingProxyType(
    {
        "inno_literal": inno_literal,
        "inno_source": inno_source,
        "inno_const": inno_const,
        "inno_directive": inno_directive,
        "pascal_string": pascal_string,
        "comment": comment,
        "windows_path": windows_path,
        "msbuild_escape": msbuild_escape,
        "xml_text": xml_text,
        "cmd_quoted": cmd_quoted,
        "cmd_text": cmd_text,
        "cmd_call_quoted": cmd_call_quoted,
    }
)
