"""Act layer, shared by every renderer: the Jinja environment and the escaping filters.

Templates (`templates/*.j2`) never see a raw value: each value passes through a filter named
after the language and the place it lands in, so escaping is decided here, once, and tested
here. The environment is StrictUndefined (a missing value fails loudly) and does not
autoescape (there is no HTML here); output is written atomically, byte-identical for the same
input (no time stamps, no machine paths).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundler import files, resources
from bundler.errors import ConfigError, OutputError
from bundler.render import kept as render_cache

UTF8_BOM = "\ufeff"
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


def relative_folder(folder: Path, start: Path) -> str:
    """`folder` relative to `start` ("." for the same folder), for a generated file that must
    keep working when both are moved together. Windows cannot express a path to another
    drive relatively, so that is refused with the two folders named."""
    try:
        return os.path.relpath(folder.resolve(), start.resolve())
    except ValueError:
        raise ConfigError(
            f"{folder} and {start} are on different drives: the generated file needs a "
            "relative path between them; put it on the bundle's drive."
        ) from None


def windows_path(value: object) -> str:
    """A bundle-relative posix path as Windows writes it."""
    return str(value).replace("/", "\\")


if TYPE_CHECKING:  # jinja2 is imported by the first render, not by every command
    import jinja2

FILTERS: dict[str, Callable[[Any], str]] = {
    "inno_literal": inno_literal,
    "inno_source": inno_source,
    "inno_const": inno_const,
    "inno_directive": inno_directive,
    "pascal_string": pascal_string,
    "comment": comment,
    "windows_path": windows_path,
}


class Templates:
    """The template machinery of one command, passed to every renderer: the jinja2 environment
    (made on the first rendering that needs it) and what is kept between runs under
    <root>/templates, compiled templates and rendered outputs (bundler.render.kept). `root` is
    the command's cache folder (bundler.cache_root.cache_root); None keeps nothing on disk.
    What the owner reads once (the folder, the templates' digest) holds for its command only."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    @cached_property
    def folder(self) -> Path | None:
        """<root>/templates, created on first use; None: nothing is kept."""
        return render_cache.cache_folder(self.root)

    @cached_property
    def environment(self) -> jinja2.Environment:
        import jinja2

        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(resources.templates_dir())),
            bytecode_cache=_bytecode_cache(self.folder),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters.update(FILTERS)
        return env

    @cached_property
    def sources(self) -> bytes:
        """The digest of the templates and filters (bundler.render.kept.sources_digest)."""
        return render_cache.sources_digest()

    def output_key(self, template: str, values: dict[str, object]) -> str | None:
        """The rendered-output cache's key of this rendering (None: not kept)."""
        return render_cache.output_key(template, values, self.sources)

    def render(self, template: str, **values: Any) -> str:
        """The template rendered with the values; the same rendering as an earlier run is read
        back from bundler.render.kept instead (jinja2 is then not even imported)."""
        folder = self.folder
        key = None if folder is None else self.output_key(template, values)
        if folder is None or key is None:
            return self._render(template, values)
        text = render_cache.load(folder, key)
        if text is None:
            text = self._render(template, values)
            render_cache.store(folder, key, text)
        return text

    def _render(self, template: str, values: dict[str, Any]) -> str:
        import jinja2

        try:
            return self.environment.get_template(template).render(**values)
        except jinja2.UndefinedError as exc:  # a bug in bundle, not in the user's input
            raise RuntimeError(f"template {template}: {exc.message}") from exc


def _bytecode_cache(folder: Path | None) -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs, in `folder` (<cache>/templates): compiling the two
    templates of a build cost more than rendering them (benchmarks/README.md, P3). jinja2 keys
    each by its template's source and the Python version, so an edited template or another
    Python compiles anew; a folder that cannot be written only means compiling every time."""
    if folder is None:
        return None
    import jinja2

    class QuietCache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:  # a damaged entry is a miss: the template is compiled again
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    return QuietCache(str(folder))


def write_text(path: Path, text: str, *, bom: bool = False, newline: str = "\n") -> None:
    """Write `text` atomically (temporary name in the same folder, then rename), with the
    given line ending and an optional UTF-8 byte-order mark."""
    data = ((UTF8_BOM if bom else "") + text.replace("\n", newline)).encode("utf-8")
    temp = path.with_name(f".{path.name}.bundle-tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_bytes(data)
        files.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # e.g. the parent is a file: no temp file either
            temp.unlink(missing_ok=True)
        raise OutputError(
            f"{path}: cannot write: {exc.strerror}; choose a writable place for it."
        ) from None


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


FILTERS.update({"msbuild_escape": msbuild_escape, "xml_text": xml_text})


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


FILTERS.update({"cmd_quoted": cmd_quoted, "cmd_text": cmd_text, "cmd_call_quoted": cmd_call_quoted})
